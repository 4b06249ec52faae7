"""The calibration stage's files: the calibrated scores, the report of every method and protocol, its bins."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from gece.catalog.calibration_methods import METHOD_NAMES, MethodName
from gece.io.schemas.metric_reports import BinRecord, MetricsReport
from gece.io.schemas.schema_base import TableRow

CalibrationStatus = Literal["ok", "degenerate", "failed"]
CalibrationMethod = MethodName
CalibrationBinMethod = Literal[("uncalibrated", *METHOD_NAMES)]  # type: ignore[valid-type]


class _CalibratedRowBase(TableRow):
    pair_id: str
    row: int = Field(ge=1)
    y: Literal[0, 1]
    gender_more: str
    gender_less: str
    p: float = Field(ge=0.0, le=1.0)
    split: Literal["fit", "eval"]
    fold: int = Field(ge=0)


CalibratedRow = create_model(
    "CalibratedRow",
    __base__=_CalibratedRowBase,
    __doc__="""Per-pair calibrated scores (``artifacts/calibrated/<benchmark>/<model>.parquet``).

    ``split`` says whether the pair is in the calibration (``fit``) or the held-out (``eval``)
    part of the split protocol; ``split_<method>`` is its held-out p' under that protocol, null
    for ``fit`` pairs (an in-sample p' would flatter the method) and for a method that was not
    run or whose fit failed without scores. ``fold`` is the cross-fitting fold in which the
    pair is held out and ``crossfit_<method>`` its out-of-fold p' (null likewise).
    """,
    **{
        f"{protocol}_{name}": (float | None, Field(ge=0.0, le=1.0))
        for protocol in ("split", "crossfit")
        for name in METHOD_NAMES
    },
)


class MethodReport(BaseModel):
    """One calibration method under one protocol.

    ``metrics``: the metrics of the calibrated scores on the evaluation pairs (null when the
    fit failed without scores); ``reason``: why the status is not ``ok`` (null when it is).
    """

    model_config = ConfigDict(extra="forbid")
    status: CalibrationStatus
    reason: str | None
    params: dict[str, Any]
    metrics: MetricsReport | None


class CrossfitMethodReport(MethodReport):
    """Under cross-fitting: ``params = {"folds": [per-fold params]}``, ``fold_status`` per fold;
    ``status`` is the worst fold's (failed > degenerate > ok)."""

    fold_status: list[CalibrationStatus]


class SplitReport(BaseModel):
    """The split protocol: ``n_fit`` calibration pairs, ``n_eval`` held-out pairs."""

    model_config = ConfigDict(extra="forbid")
    n_fit: int = Field(ge=0)
    n_eval: int = Field(ge=0)
    fraction: float
    uncalibrated: MetricsReport
    methods: dict[CalibrationMethod, MethodReport]


class CrossfitReport(BaseModel):
    """k-fold cross-fitting: ``n_fit`` = pairs fitted on, summed over the folds ((k − 1) · n),
    ``n_eval`` = pairs evaluated, summed over the folds (n: each pair once, out of fold)."""

    model_config = ConfigDict(extra="forbid")
    n_fit: int = Field(ge=0)
    n_eval: int = Field(ge=0)
    folds: int = Field(ge=2)
    uncalibrated: MetricsReport
    methods: dict[CalibrationMethod, CrossfitMethodReport]


class CalibrationReport(BaseModel):
    """``reports/calibration/<benchmark>/<model>.json`` (DVC metrics)."""

    model_config = ConfigDict(extra="forbid")
    split: SplitReport
    crossfit: CrossfitReport


class CalibrationBinRecord(BinRecord):
    """One reliability bin (paper convention, p vs y, on the evaluation pairs) of one protocol and
    method (``uncalibrated`` for p): ``reports/calibration_bins/<benchmark>/<model>.json`` is a list."""

    protocol: Literal["split", "crossfit"]
    method: CalibrationBinMethod


CalibrationBinsReport = TypeAdapter(list[CalibrationBinRecord])
