"""The summary stage's report: ``reports/summary.json``, the headline numbers ``dvc metrics`` shows."""

from __future__ import annotations

from pydantic import Field

from gece.io.schemas.schema_base import JsonReport, Num

Section = dict[str, dict[str, dict[str, Num]]]


class SummaryReport(JsonReport):
    """``reports/summary.json`` (:func:`gece.report.findings.summary`), the one file dvc.yaml declares as DVC metrics:
    headline metrics per run and a compact summary per calibration, ablation and comparison. On a benchmark with the
    same label for every pair a run carries ``stereotype_share``, ``shortfall`` (1 − mean p) and ``shortfall_gender``
    instead of ``ece``, ``gender_ece``, ``macro_ce`` and ``accuracy`` (:mod:`gece.report.identity`)."""

    runs: Section = Field(default_factory=dict)
    calibration: Section = Field(default_factory=dict)
    binning: Section = Field(default_factory=dict)
    neutral: Section = Field(default_factory=dict)
    special_tokens: Section = Field(default_factory=dict)
    prompts: Section = Field(
        default_factory=dict,
        description="per model and prompt: the median change from the bare sentence of ECE, Gender-ECE and the "
        "stereotype share over the benchmarks, and how many change significantly after Holm, up and down",
    )
    compare: dict[str, dict[str, int | None]] = Field(
        default_factory=dict,
        description="per benchmark: the pairs of runs that differ in each metric after Holm (<metric>_significant); "
        "null where no pair has a test of the metric (not defined on the benchmark), never 0",
    )
    groups: Section = Field(default_factory=dict)
    agreement: Section = Field(
        default_factory=dict,
        description="per benchmark and run with checked_against: n, max_abs_lld_diff, flips and the change of the "
        "ECE (ece_change) or stereotype share (stereotype_share_change) with its interval, run − against",
    )
    rules: Section = Field(
        default_factory=dict,
        description="per identity benchmark and run: stereotype share and 1 − mean p under each rule, differences",
    )
