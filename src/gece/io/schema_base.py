"""The bases every file's schema shares: a row of a tabular file, a JSON report, a nullable number.

The schemas themselves are one module per stage family (:mod:`gece.io.pair_rows`,
:mod:`gece.io.metric_reports`, ...), so that a stage imports the contracts of the files it reads and writes,
and an edit to one family's contract re-runs only the stages that use it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TableRow(BaseModel):
    """A row of a tabular file. Floats must be finite: NaN and ±inf are errors, not values."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class JsonReport(BaseModel):
    """A JSON report: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


# a number a report may leave undefined (null)
Num = float | None
