"""The bases every file's schema shares: a row of a tabular file, a JSON report, a nullable number, a
params.yaml section (strict) and a seed.

The schemas themselves are one module per stage family (:mod:`gece.io.schemas.pair_rows`,
:mod:`gece.io.schemas.metric_reports`, ...), so that a stage imports the contracts of the files it reads and writes,
and an edit to one family's contract re-runs only the stages that use it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class TableRow(BaseModel):
    """A row of a tabular file. Floats must be finite: NaN and ±inf are errors, not values."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class JsonReport(BaseModel):
    """A JSON report: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


# a number a report may leave undefined (null)
Num = float | None


class Section(BaseModel):
    """A params.yaml section. Strict (docs/pipeline.md, "Parameters"): a value must already have the key's type
    as YAML reads it, nothing is converted. A whole-number key takes an integer only (``true``, ``1.0`` and
    ``"10"`` are refused: YAML reads ``true`` as a boolean, which Python would count as 1); a number key takes a
    number, an integer included (``ci: 1`` is 1.0), finite (``.nan``, ``.inf`` are refused); a boolean key takes
    ``true`` or ``false`` only; a text key takes text (quote ``revision: "1234"``). The same rules apply to the
    command-line options, which argparse has already typed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


MAX_SEED = 2**32 - 1  # numpy and scikit-learn seeds are unsigned 32-bit
Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="a random seed, 0 to 2**32 - 1")]


def fmt_error(err: dict, row_offset: int | None = None) -> str:
    """A pydantic error as one line: the row (``row_offset`` + its index, when the location starts with one), the
    field, the message and the value refused."""
    loc = list(err.get("loc", ()))
    where = ""
    if row_offset is not None and loc and isinstance(loc[0], int):
        where = f"row {loc.pop(0) + row_offset}, "
    field = ".".join(str(x) for x in loc)
    got = err.get("input")
    got_s = "" if isinstance(got, dict) else f" (got {got!r})"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}{field + ': ' if field else ''}{msg}{got_s}"
