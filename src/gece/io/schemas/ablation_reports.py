"""The ablation reports: sample size, binning, gender-neutral wording and special tokens."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, create_model

from gece.catalog.metric_defs import ESTIMATORS
from gece.io.schemas.metric_reports import MetricsReport
from gece.io.schemas.schema_base import JsonReport, Num


def _sample_size_models() -> tuple[type[BaseModel], type[BaseModel]]:
    """The full-data values and the per-size statistics of every ``registry.ESTIMATORS``."""
    full = create_model(
        "SampleSizeFull", __base__=JsonReport, n=(int, Field(ge=0)), **{k: (Num, ...) for k in ESTIMATORS}
    )
    stats: dict[str, Any] = {"n": (int, Field(ge=1)), "draws": (int, Field(ge=1))}
    for k in ESTIMATORS:
        stats |= {
            f"{k}_mean": (Num, ...),
            f"{k}_std": (Num, Field(ge=0)),
            f"{k}_bias": (Num, ...),
            f"{k}_rmse": (Num, Field(ge=0)),
            f"{k}_defined": (int, Field(ge=0, description="subsets where the estimator is defined")),
        }
    return full, create_model("SampleSizeRow", __base__=JsonReport, **stats)


SampleSizeFull, SampleSizeRow = _sample_size_models()


class SampleSizeReport(JsonReport):
    """``reports/ablation/sample_size/<benchmark>/<model>.json``."""

    full: SampleSizeFull  # type: ignore[valid-type]
    sizes: list[SampleSizeRow]  # type: ignore[valid-type]


class BinningCell(JsonReport):
    ece: Num
    gender_ece: Num
    ece_male: Num
    ece_female: Num


# ``reports/ablation/binning/<benchmark>/<model>.json``: {binning: {n_bins: cell}}
BinningReport = TypeAdapter(dict[Literal["equal_width", "equal_mass"], dict[str, BinningCell]])

NEUTRAL_KEYS = ("ece", "gender_ece", "ece_male", "ece_female", "macro_ce", "ice", "brier", "accuracy")


class NeutralRow(JsonReport):
    ece: Num
    gender_ece: Num
    ece_male: Num
    ece_female: Num
    macro_ce: Num
    ice: Num
    brier: Num
    accuracy: Num
    n: int = Field(ge=0)


# ``reports/ablation/neutral/<model>.json``: {benchmark: row}
NeutralReport = TypeAdapter(dict[str, NeutralRow])


class SpecialTokensSide(MetricsReport):
    """The metrics JSON plus the confidence profile."""

    mean_confidence: Num
    share_confidence_over_0_9: Num


# ``reports/ablation/special_tokens/<model>.json``: {benchmark: {"with": .., "without": ..}}
SpecialTokensReport = TypeAdapter(dict[str, dict[Literal["with", "without"], SpecialTokensSide]])
