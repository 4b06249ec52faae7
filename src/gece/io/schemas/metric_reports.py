"""The metrics stage's reports: the flat metrics JSON of a run and its reliability bins.

``MetricsReport`` is also the shape of every metric set other reports embed (calibration, special tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model, model_serializer

from gece.catalog.metric_defs import GAP_HOLM, GAPS, METRIC, SCALARS, Metric
from gece.io.schemas.schema_base import Num

# a protocol's block in a run's metrics report: its numbers by key (gece.report.protocol; the protocol validates
# its own keys with block_model)
Block = dict[str, int | float | None]


def block_model(name: str, metrics: Sequence[Metric], counts: Sequence[str], doc: str) -> type[BaseModel]:
    """The strict schema of a protocol's block: one nullable float per number of ``metrics``, the ``counts`` as
    integers, and the interval bounds (``<key>_ci_low``, ``<key>_ci_high``) of those with one."""
    fields: dict[str, Any] = {m.key: ((int, Field(..., ge=0)) if m.key in counts else (Num, ...)) for m in metrics}
    fields |= {f"{m.key}_ci_{end}": (Num, ...) for m in metrics if m.interval for end in ("low", "high")}
    return create_model(name, __config__=ConfigDict(extra="forbid"), __doc__=doc, **fields)


class _MetricValues(BaseModel):
    """Beside the numbers every run has, a key of its own per protocol that measures the benchmark (its block,
    :data:`Block`; absent elsewhere): any other key that is not a block of numbers is refused."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Block] = Field(init=False)
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

    @model_serializer(mode="wrap")
    def _drop_empty(self, handler):
        data = handler(self)
        for key in ("null_reasons", *(f"{g}_{kind}" for g in GAPS for kind in GAP_HOLM)):
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
    fields |= {
        f"{g}_{kind}": (Num, Field(None, description=f"{g}: {kind} of Holm's correction over the benchmark's runs"))
        for g in GAPS
        for kind in GAP_HOLM
    }  # the metrics stage's reports only (gece.stats.gap.holm_over_runs); absent from the metric sets others embed
    return fields


MetricsReport = create_model(
    "MetricsReport",
    __base__=_MetricValues,
    __doc__="""``reports/metrics/<benchmark>/<model>.json``: flat, what ``dvc metrics`` reads.

    Every metric with an interval in ``registry.SCALARS``, ``<key>_ci_low``/``<key>_ci_high``
    (bias-corrected bootstrap interval) for each, and ``<gap>_p``/``<gap>_p_perm`` for the gender gaps, with, in the
    metrics stage's reports, their Holm correction over the benchmark's runs (``<gap>_p_holm``, ``_level_holm``,
    ``_ci_low_holm``, ``_ci_high_holm``; absent where the gap is undefined). Null
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
