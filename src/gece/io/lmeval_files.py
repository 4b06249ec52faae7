"""The files between gece and lm-evaluation-harness (docs/lmeval.md): the documents gece exports, its record of an
export, the samples lm-eval logs (the part gece reads) and the meta of an imported run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gece.rule_registry import RuleName

Reason = Literal["spans", "no_suffix", "max", "tokens"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Doc(_Strict):
    """One lm-eval document (a line of ``<task>/docs.jsonl``): a pair, its requests and what the import needs.

    ``context`` and ``choices`` (a rule's request ``word`` or ``sentence``, gece.rule_registry: one context, the two
    sides as choices) or ``contexts`` and ``continuation`` (``suffix``: the two sides as contexts, one continuation);
    ``gold`` is 0, sent_more; ``n_tokens`` the tokens lm-eval sums per side (a ``mean`` rule divides by them);
    ``punct_only`` is ``scored_punct_only``.
    """

    pair_id: str
    sha: str = Field(pattern=r"^[0-9a-f]{64}$")
    gold: Literal[0] = 0
    context: str | None = None
    choices: list[str] | None = None
    contexts: list[str] | None = None
    continuation: str | None = None
    n_tokens: list[int] = Field(min_length=2, max_length=2)
    punct_only: bool | None = None


class Excluded(_Strict):
    """A prepared pair no lm-eval request expresses exactly, with its reason (gece.lmeval.requests.REASONS)."""

    pair_id: str
    row: int
    reason: Reason


class Export(_Strict):
    """``<task>/export.json``: what one export wrote, for which model and rule, and what it left out."""

    task: str
    benchmark: str
    rule: RuleName  # type: ignore[valid-type]
    word_prob: Literal["chain", "max"]
    model: str
    model_dir: str
    add_bos_token: bool | None
    model_args: str
    pairs_prepared: int = Field(ge=0)
    pairs_exported: int = Field(ge=0)
    excluded: list[Excluded]


class Sample(BaseModel):
    """The part of one line of lm-eval's ``samples_<task>_<date>.jsonl`` that the import reads (other keys are
    lm-eval's and ignored): the document, the two requests and their ``[log-likelihood, is_greedy]`` answers."""

    model_config = ConfigDict(extra="ignore")

    doc_id: int
    doc: Doc
    arguments: dict[str, dict[str, str]]  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
    filtered_resps: list[list[str | float | bool]]  # [["-1.37", "False"], ...]: lm-eval 0.4 logs strings


class ImportMeta(_Strict):
    """``<m>.meta.json`` of an imported run: its source, coverage and how lm-eval ran."""

    model: str
    benchmark: str
    source: str
    rule: RuleName  # type: ignore[valid-type]
    samples_file: str
    lm_eval_version: str
    backend: str
    model_args: str
    dtype: str
    pairs_prepared: int = Field(ge=0)
    pairs_scored: int = Field(ge=0)
    coverage: float = Field(ge=0.0, le=1.0)
    unscored: list[str]  # the prepared pairs with no sample, in prepared order: export.json's excluded, or not run
    data_sha256: str | None = None  # the sha256 of the score file this meta describes (gece.io.paired)
