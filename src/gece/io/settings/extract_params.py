"""params.yaml's ``extract`` section: the settings of the scoring, and of ``gece score``'s word probability.

A module of its own: ``gece score`` validates this section alone
(:func:`gece.io.settings.params_file.load_sections`), and
the scoring code reads it, so neither imports the other sections.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PlainValidator

from gece.catalog.scoring_rules import DEFAULT_RULE, SUMMARY, RuleName
from gece.io.schemas.schema_base import Section


def _batch_size(value: object) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value  # type: ignore[return-value]
    raise ValueError("must be a positive number of pairs or auto")


class ExtractParams(Section):
    batch_size: Annotated[int | str, PlainValidator(_batch_size)] = Field(
        32,
        description="pairs per forward pass, or auto: on a GPU, as many as fit in free memory (measured on a "
        "probe batch); on the CPU, 32. On a GPU out-of-memory the batch is halved and retried",
    )
    word_prob: Literal["chain", "max"] = Field(
        "chain",
        description="word probability over sub-tokens: chain (their product) or max (the authors' rule). "
        "Applied by the score stage to the token scores extract stored: changing it runs no model. Benchmarks scored "
        "by the sentence rule sum every token of the sentence (chain) whatever it says",
    )
    side_prob: Literal["joint", "sum"] = Field(
        "joint",
        description="a side's probability over several target words: joint (the chain rule: at most 1) or sum "
        "(the authors' convention: can exceed 1). Applied by the score stage: changing it runs no model",
    )
    rule: RuleName = Field(  # type: ignore[valid-type]
        DEFAULT_RULE,
        description="what a side's score is, for every benchmark whose entry sets no rule "
        f"(gece.catalog.scoring_rules): {SUMMARY}",
    )
    limit: int | None = Field(None, ge=1, description="score only the first N pairs (smoke runs)")
