"""The groups stage's report: calibration by group, per run, grouping and protocol."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gece.catalog.groupings import GroupingName, GroupProtocol
from gece.catalog.metric_defs import TestVariance
from gece.io.schemas.schema_base import JsonReport, Num

Err = Annotated[float, Field(ge=0.0, le=1.0)] | None


class GroupCell(JsonReport):
    """One group of a grouping: its pairs, its ECE and bias-corrected interval; ``reason`` says why they are null."""

    group: str
    n: int = Field(ge=0)
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(
        None, ge=0, description="clusters among the n (benchmarks.<b>.cluster): the unit the interval resamples"
    )
    pct_stereotype: float | None = Field(
        None, ge=0.0, le=1.0, description="share of the group's pairs with p > 0.5 (identity protocol)"
    )
    pct_stereotype_ci_low: Err = Field(
        None,
        description="its bias-corrected bootstrap interval, the same resamples (clusters) as the ECE's; null below "
        "min_size (gece.stats.by_group)",
    )
    pct_stereotype_ci_high: Err = Field(None, description="the interval's upper end")
    ece: Err
    ci_low: Err
    ci_high: Err
    reason: str | None
    z: Num = Field(None, description="Spiegelhalter's z of the group (gece.stats.calibration_tests)")
    p_z: Num = Field(None, ge=0.0, le=1.0, description="its two-sided p-value")
    p_z_holm: Num = Field(None, ge=0.0, le=1.0, description="Holm-corrected over the groups of the grouping")
    p_consistency: Num = Field(
        None, ge=0.0, le=1.0, description="consistency-resampling p-value of the group's ECE (y* ~ Bernoulli(p))"
    )
    p_consistency_holm: Num = Field(None, ge=0.0, le=1.0, description="Holm-corrected over the groups")


class CalibrationTestReport(JsonReport):
    """The calibration tests of every pair of a run (identity protocol, y varying); ``reason``: why none."""

    n: int = Field(ge=0)
    z: Num = Field(description="Spiegelhalter's z")
    p_z: Num = Field(ge=0.0, le=1.0, description="its two-sided p-value")
    ece: Num = Field(ge=0.0, le=1.0, description="the binned ECE, the consistency test's statistic")
    p_consistency: Num = Field(ge=0.0, le=1.0, description="consistency-resampling p-value (one-sided)")
    variance: TestVariance | None = Field(
        description="the variance of z (gece.stats.calibration_tests): expected under calibration with exact repeats "
        "merged where the pair is the unit, the cluster sums' where clusters group distinct pairs"
    )
    reason: str | None


class GroupGapReport(JsonReport):
    """max ECE − min ECE over the groups with at least ``min_size`` pairs, its interval, and the two groups."""

    gap: Err
    ci_low: Err
    ci_high: Err
    high: str | None = Field(description="the group with the largest ECE")
    low: str | None = Field(description="the group with the smallest ECE")
    n_groups: int = Field(ge=0, description="groups compared")
    reason: str | None
    p_perm: Num = Field(ge=0.0, le=1.0, description="one-sided permutation p-value (group labels shuffled)")


class GroupingReport(JsonReport):
    """Calibration of one run by one grouping under one protocol (``reason``: why it was not computed)."""

    grouping: GroupingName  # type: ignore[valid-type]
    protocol: GroupProtocol
    n: int = Field(ge=0, description="pairs in some group (with a soft label, under the soft protocol)")
    n_left_out: int = Field(ge=0)
    left_out: str | None = Field(description="why pairs were left out")
    groups: list[GroupCell]
    gap: GroupGapReport | None
    reason: str | None
    variance: TestVariance | None = Field(
        None, description="the variance of the groups' z, as the run's tests' (None: not tested, see tests_reason)"
    )
    tests_reason: str | None = Field(None, description="why the groups carry no calibration tests")


class GroupsReport(JsonReport):
    """``reports/groups/<benchmark>.json``: per run, every grouping and protocol of params.yaml's ``groups``."""

    benchmark: str
    n_bins: int = Field(ge=1)
    binning: Literal["equal_width", "equal_mass"]
    draws: int = Field(ge=1)
    seed: int = Field(ge=0)
    level: float = Field(gt=0, lt=1)
    min_size: int = Field(ge=1)
    runs: dict[str, list[GroupingReport]]
    tests: dict[str, CalibrationTestReport] = Field(
        default_factory=dict, description="per run: the calibration tests of all its pairs (identity protocol)"
    )
