"""The contract of extract's outputs: the token file (:class:`TokenRow`), its metadata (:class:`ExtractMeta`,
with :class:`SelfCheck`) and the timing file (:class:`ExtractTiming`).

Kept apart from the other files' schemas (:mod:`gece.io.schemas.pair_rows`, ...) because these schemas, with the
writers of :mod:`gece.io.files.writer`, are part of the code that determines a token file's bytes
(:func:`gece.scoring.extraction.scoring_code`): an edit to any other file's contract re-scores no model.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gece.catalog.scoring_rules import DEFAULT_RULE, SUMMARY, RuleName


class TokenRow(BaseModel):
    """Per-pair token scores from a model: extract's output, before any word rule applies.

    ``logprobs_*`` holds log P(x_t | x_<t) of every target token of a side, per target word, per token
    (under the sentence, mean and shared rules: one "word" holding every token of the sentence after the
    prefix token); ``token_ids_*`` and ``token_text_*`` the same tokens' ids and texts (each decoded alone),
    which the shared rule aligns (null in token files written before they were kept);
    ``logits_*`` the raw logits of the same tokens (null where the backend gives log-probabilities
    only). The score stage applies the word rule and the side rule (:mod:`gece.stats.pair_scores`) to
    give a :class:`gece.io.schemas.pair_rows.ScoreRow`. The pair's sentences and labels are in the prepared file,
    joined by
    ``pair_id`` and ``row``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # a NaN or ±inf is an error
    pair_id: str
    row: int = Field(ge=1)
    logprobs_more: list[list[float]] = Field(min_length=1)
    logprobs_less: list[list[float]] = Field(min_length=1)
    logits_more: list[list[float]] | None
    logits_less: list[list[float]] | None
    token_ids_more: list[list[int]] | None = None
    token_ids_less: list[list[int]] | None = None
    token_text_more: list[list[str]] | None = None
    token_text_less: list[list[str]] | None = None

    @model_validator(mode="after")
    def _words_have_tokens(self) -> TokenRow:
        for side in ("more", "less"):
            lp = getattr(self, f"logprobs_{side}")
            if not all(lp):
                raise ValueError(f"logprobs_{side}: a target word without tokens")
            for name in ("logits", "token_ids", "token_text"):
                other = getattr(self, f"{name}_{side}")
                if other is not None and [len(w) for w in other] != [len(w) for w in lp]:
                    raise ValueError(f"{name}_{side} and logprobs_{side} differ in shape")
        return self


class SelfCheck(BaseModel):
    """The extract meta's ``self_check``: what scoring a few pairs both ways measured (the rule is in
    :mod:`gece.scoring.selfcheck`); differences are in log-probability."""

    model_config = ConfigDict(extra="forbid")
    pairs: int = Field(ge=1, description="pairs scored both ways")
    rule: Literal["exact", "reference", "fallback"] = Field(
        description="exact: the same bits required; reference: allowed from the reference pass; fallback: fixed"
    )
    max_abs_diff: float = Field(description="d_fast: optimized vs naive path, same dtype")
    reference_dtype: str | None = Field(description="the dtype of the reference pass (null: none)")
    reference_diff: float | None = Field(description="d_ref: the naive path vs the reference pass")
    allowed: float = Field(ge=0.0)
    p_diff_median: float | None = Field(None, description="median |p - p_float32| over the pairs (bfloat16, float16)")
    p_diff_max: float | None = Field(None, description="largest |p - p_float32| over the pairs (bfloat16, float16)")


class ExtractMeta(BaseModel):
    """``artifacts/tokens/<model>/<benchmark>.meta.json`` (extract) and
    ``artifacts/scores/<benchmark>/<model>.meta.json`` (the same, with the word rule the score stage applied): what
    scored the pairs, and how much work it was.

    Every value is a function of the inputs (pairs, model, settings, library versions), so two
    runs write the same bytes and ``dvc.lock`` does not move; how long this run took is in
    :class:`ExtractTiming`. ``tokens`` counts the real tokens fed to the decoder,
    ``tokens_whole`` what feeding both whole sentences of every pair would take,
    ``head_positions`` the hidden states sent through the LM head, and
    ``flops`` = 2 N_body tokens + 2 H V head_positions.
    """

    model_config = ConfigDict(extra="forbid")
    benchmark: str
    model: str
    backend: Literal["transformers", "vllm"] = "transformers"
    source: str
    kind: Literal["gguf", "directory", "hub"]
    weights: dict[str, str] = Field(description="weights file name -> sha256")
    dtype: str
    device: str
    attention: str
    special_tokens: bool
    word_prob: Literal["chain", "max"] | None = Field(
        description="the word rule the score stage applied; null in the token meta of extract, which applies none"
    )
    side_prob: Literal["joint", "sum"] | None = Field(
        None,
        description="the side rule the score stage applied over a side's target words (joint: the chain rule; sum: "
        "the authors' convention); null in the token meta of extract, which applies none",
    )
    rule: RuleName = Field(DEFAULT_RULE, description=f"the rule that scores the pairs: {SUMMARY}")  # type: ignore[valid-type]
    batch_size: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        description="as set in params (auto: the size used is in the timing file)"
    )
    limit: int | None
    torch: str = Field(description="torch's release (without a local label such as +cpu)")
    cuda: str | None = Field(None, description="the CUDA version torch was built with, on a GPU run; null on the CPU")
    transformers: str
    gece: str
    pairs: int = Field(ge=0)
    multi_target_pairs: int = Field(ge=0, description="pairs with several target words on a side")
    multi_token_targets: int = Field(ge=0, description="target words of more than one token (chain rule applies)")
    continued_pairs: int = Field(ge=0, description="pairs with a target beyond the shared prefix")
    prefixed_sentences: int = Field(
        0,
        ge=0,
        description="sentences fed with the prefix token (BOS, else EOS) "
        "in front, because a word to score was their first token",
    )
    tokens: int = Field(ge=0)
    tokens_padded: int = Field(ge=0)
    tokens_whole: int = Field(ge=0)
    head_positions: int = Field(ge=0)
    flops: float | None = Field(description="null for backend vllm, which does not expose its forward pass")
    flops_per_pair: float | None
    shards: int = Field(ge=0)
    self_check: SelfCheck | None = Field(
        None,
        description="null: not run (backend vllm, no pairs, or the model's own forward pass overflows on the sample)",
    )
    data_sha256: str | None = Field(
        None,
        description="the sha256 of the token or score file this meta describes (gece.io.files.paired; null: written "
        "before gece recorded it, not checked)",
    )


class ExtractTiming(BaseModel):
    """``artifacts/tokens/<model>/<benchmark>.timing.json``: how one extract run went on this machine.

    Not a DVC output (it differs between runs, so it would change ``dvc.lock`` on every run);
    ``make bench`` and the extract log report the same figures.
    """

    model_config = ConfigDict(extra="forbid")
    benchmark: str
    model: str
    pairs: int = Field(ge=0)
    threads: int = Field(ge=1)
    shards_resumed: int = Field(ge=0, description="finished shards reused from a killed run")
    batch_size: int = Field(ge=1, description="pairs per batch (chosen from free memory for batch_size: auto)")
    oom_retries: int = Field(0, ge=0, description="out-of-memory errors after which the pairs per pass were halved")
    seconds: float = Field(ge=0, description="scoring, without loading the model")
    load_seconds: float = Field(ge=0)
    pairs_per_s: float | None
    peak_rss_mb: float = Field(ge=0)
