"""The metrics stage's reports: the flat metrics JSON of a run and its reliability bins.

``MetricsReport`` is also the shape of every metric set other reports embed (calibration, special tokens).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model, model_serializer

from gece.catalog.metric_defs import GAPS, METRIC, REFERENT_METRICS, SCALARS
from gece.io.schemas.schema_base import Num


def _referent_fields() -> dict[str, Any]:
    """One nullable float per quantity of the referent protocol (gece.catalog.metric_defs.REFERENT_METRICS), the
    counts as
    integers, and the interval bounds of those with one."""
    counts = ("n", "n_pairs", "n_unpaired")
    fields: dict[str, Any] = {
        m.key: ((int, Field(..., ge=0)) if m.key in counts else (Num, ...)) for m in REFERENT_METRICS
    }
    fields |= {f"{m.key}_ci_{end}": (Num, ...) for m in REFERENT_METRICS if m.interval for end in ("low", "high")}
    return fields


ReferentReport = create_model(
    "ReferentReport",
    __config__=ConfigDict(extra="forbid"),
    __doc__="""The ``referent`` block of a run's metrics report on a ``synthbias: referent`` benchmark
    (:func:`gece.stats.referent.referent_report`): top-label ECE by pronoun gender, stereotype and referent position,
    the two baselines, UCerF and Equalized Odds, on complete sentence pairs, intervals resampling them.""",
    **_referent_fields(),
)


class _MetricValues(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=0)
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(
        None, ge=0, description="clusters the intervals resample (benchmarks.<b>.cluster; docs/metrics.md)"
    )
    pct_stereotype_se_rows: float | None = Field(
        None, ge=0.0, description="standard error of pct_stereotype with every row independent"
    )
    pct_stereotype_se_clustered: float | None = Field(
        None, ge=0.0, description="its clustered standard error (Miller 2024): the repeats counted once"
    )
    n_punct_only: int | None = Field(
        None, ge=0, description="pairs whose rule scored only punctuation tokens (score files' scored_punct_only)"
    )
    n_ties: int = Field(ge=0)
    n_bins: int = Field(ge=1)
    binning: Literal["equal_width", "equal_mass"]
    null_reasons: str | None = None
    referent: ReferentReport | None = Field(  # type: ignore[valid-type]
        None, description="SynthBias's referent protocol only (benchmarks.<b>.synthbias: referent); absent elsewhere"
    )

    @model_serializer(mode="wrap")
    def _drop_empty(self, handler):
        data = handler(self)
        for key in ("null_reasons", "referent"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


def _metric_fields() -> dict[str, Any]:
    """One nullable float per scalar with an interval in the metric table (its definition as the
    field's description), its interval bounds, and the gaps' bootstrap and permutation p-values
    (names written once, in gece.catalog.metric_defs and gece.stats.gap)."""
    fields: dict[str, Any] = {k: (Num, Field(..., description=METRIC[k].definition)) for k in SCALARS}
    fields |= {
        f"{k}_ci_{end}": (Num, Field(..., description=f"{end} end of the bootstrap interval of {k}"))
        for k in SCALARS
        for end in ("low", "high")
    }
    fields |= {f"{g}_{kind}": (Num, ...) for g in GAPS for kind in ("p", "p_perm")}
    return fields


MetricsReport = create_model(
    "MetricsReport",
    __base__=_MetricValues,
    __doc__="""``reports/metrics/<benchmark>/<model>.json``: flat, what ``dvc metrics`` reads.

    Every metric with an interval in ``registry.SCALARS``, ``<key>_ci_low``/``<key>_ci_high``
    (bias-corrected bootstrap interval) for each, and ``<gap>_p``/``<gap>_p_perm`` for the gender gaps. Null
    values are undefined metrics (e.g. no pair was predicted female); ``null_reasons`` then says
    why, and is absent otherwise.
    """,
    **_metric_fields(),
)


class BinRecord(BaseModel):
    """One bin of a reliability diagram (``reports/bins/<benchmark>/<model>.json`` is a list)."""

    model_config = ConfigDict(extra="forbid")
    bin: int = Field(ge=0)
    lower: float
    upper: float
    count: int = Field(ge=0)
    confidence: Num
    accuracy: Num
    gap: Num


BinsReport = TypeAdapter(list[BinRecord])
