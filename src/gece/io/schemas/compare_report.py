"""The model comparison's report: the paired bootstrap between every two runs of a benchmark."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gece.io.schemas.schema_base import JsonReport, Num


class CompareCell(JsonReport):
    a: Num
    b: Num
    diff: Num = Field(description="a - b")
    ci_low: Num
    ci_high: Num
    p_value: Num
    mde: Num = Field(description="minimum difference detected with the configured power at alpha")
    p_holm: Num
    level_holm: Num = Field(
        None, description="the level of the Holm interval: 1 − alpha · p_value / p_holm (the level Holm tests at)"
    )
    ci_low_holm: Num = Field(None, description="the interval at level_holm: it excludes 0 iff significant_holm")
    ci_high_holm: Num = None
    significant: bool
    significant_holm: bool


class ComparePair(JsonReport):
    """Two runs compared on the pairs both score: ``n`` of them (with their counts where the benchmark has them)."""

    a: str
    b: str
    n: int = Field(ge=1, description="the pairs both runs score: the pairs compared")
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(None, ge=0, description="clusters among the n: the unit the bootstrap resamples")
    identical: bool = Field(False, description="a and b give every pair the same p: one run, scored twice")
    metrics: dict[str, CompareCell]


class MdeSummary(JsonReport):
    median: Num
    min: Num
    max: Num


# the runs a power line summarizes: the authors' runs of the benchmark, or every run (gece.report.cells.POWER_RUNS
# says them in words)
PowerRuns = Literal["paper", "all"]


class ComparePower(JsonReport):
    """Minimum detectable differences (``mde``) summarized per metric over the pairs of ``runs``
    (``paper``: the authors' runs of the benchmark; ``all``: every run)."""

    level: float = Field(gt=0, lt=1)
    runs: PowerRuns
    pairs: int = Field(ge=0)
    mde: dict[str, MdeSummary]


class Agreement(JsonReport):
    """A run against the run its registry entry is ``checked_against`` (:mod:`gece.stats.engine_agreement`), on the
    pairs both score: ``diff`` = run − against."""

    run: str
    against: str
    n: int = Field(ge=1)
    n_distinct: int | None = Field(None, ge=0)
    n_clusters: int | None = Field(None, ge=0)
    max_abs_lld_diff: float = Field(ge=0, description="largest |Δ (logprob_more − logprob_less)| over the n pairs")
    flips: int = Field(ge=0, description="pairs whose verdict p > 0.5 differs between the runs")
    metric: Literal["ece", "stereotype_share"] = Field(
        description="ece where y varies; stereotype_share (mean p > 0.5) where every pair has the same label"
    )
    diff: Num
    ci_low: Num
    ci_high: Num
    p_value: Num


class CompareReport(JsonReport):
    """``reports/compare/<benchmark>.json``: paired bootstrap between every two runs, each two on the pairs both
    score; ``agreement`` (absent when empty): each run with ``checked_against`` against that run."""

    benchmark: str
    n: int = Field(description="the pairs any run scores")
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(None, ge=0, description="clusters among the n: the unit the bootstrap resamples")
    draws: int
    seed: int
    level: float
    alpha: float
    n_bins: int
    binning: Literal["equal_width", "equal_mass"]
    pairs: list[ComparePair]
    power: ComparePower
    agreement: list[Agreement] = Field(default_factory=list)
