"""The groups stage's report: calibration by group, per run, grouping and protocol."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gece.groupings import GroupingName, GroupProtocol
from gece.io.schema_base import JsonReport, Num

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
    ece: Err
    ci_low: Err
    ci_high: Err
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
