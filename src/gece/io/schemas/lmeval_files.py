"""The files between gece and lm-evaluation-harness (docs/lmeval.md): the documents gece exports, its record of an
export, the samples lm-eval logs (the part gece reads) and the meta of an imported run."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from gece.catalog.scoring_rules import RuleName

Reason = Literal["spans", "no_suffix", "max", "tokens"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# a float as Python's str() writes it, which is how lm-eval 0.4 logs a log-likelihood (its sanitize_list turns every
# response into text: ["-1.37", "False"]); nothing else that float() would read ("1_0", " 5", "٣", "0x1p3")
FLOAT_TEXT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|-?inf|nan")


def loglikelihood(value: Any) -> float:
    """A log-likelihood as lm-eval logs it: a JSON number, or the text of one as Python writes it (never a boolean
    or other text), finite and at most 0 (the log of a probability); else a ValueError saying which."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"a log-likelihood is a number, not {type(value).__name__} {value!r}")
    if isinstance(value, str) and (len(value) > 40 or not FLOAT_TEXT.fullmatch(value)):
        raise ValueError(f"a log-likelihood is a number, not the text {value[:40]!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"log-likelihood {value!r} is not finite")
    if x > 0:
        raise ValueError(f"log-likelihood {value!r} is above 0, so it is no log of a probability")
    return x


def _response(value: Any) -> Any:
    if isinstance(value, list) and value:
        return [loglikelihood(value[0]), *value[1:]]
    return value


# one answer, [log-likelihood, is_greedy]: lm-eval logs both as text, ["-1.37", "False"]
Response = Annotated[
    list[float | StrictStr | StrictBool], Field(min_length=1, max_length=2), BeforeValidator(_response)
]
TokenCount = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]  # mean divides by it; an int64 column holds it


class Doc(_Strict):
    """One lm-eval document (a line of ``<task>/docs.jsonl``): a pair, its requests and what the import needs.

    ``context`` and ``choices`` (a rule's request ``word`` or ``sentence``, gece.catalog.scoring_rules: one context,
    the two
    sides as choices) or ``contexts`` and ``continuation`` (``suffix``: the two sides as contexts, one continuation);
    ``gold`` is 0, sent_more; ``n_tokens`` the tokens lm-eval sums per side (a ``mean`` rule divides by them);
    ``punct_only`` is ``scored_punct_only``.
    """

    pair_id: StrictStr
    sha: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")
    gold: Literal[0] = 0
    context: StrictStr | None = None
    choices: list[StrictStr] | None = None
    contexts: list[StrictStr] | None = None
    continuation: StrictStr | None = None
    n_tokens: list[TokenCount] = Field(min_length=2, max_length=2)
    punct_only: StrictBool | None = None


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

    model_config = ConfigDict(extra="ignore", strict=True)

    doc_id: StrictInt = Field(ge=0, le=2**63 - 1)
    doc: Doc
    arguments: dict[str, dict[str, StrictStr]]  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
    filtered_resps: list[Response]  # [["-1.37", "False"], ...]: lm-eval 0.4 logs strings


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
    data_sha256: str | None = None  # the sha256 of the score file this meta describes (gece.io.files.paired)
