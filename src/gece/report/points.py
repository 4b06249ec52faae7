"""A plotted value of a first-screen figure and where it comes from (:mod:`gece.report.forest`,
:mod:`gece.report.prompt_answers`): what the figures draw, their CSVs hold and the tests read back."""

from __future__ import annotations

from dataclasses import dataclass

HOLM_CI = "_holm"  # an interval at Holm's level: the report's <key>_ci_low_holm / _ci_high_holm


@dataclass(frozen=True)
class Point:
    """One plotted value: its benchmark (a rule variant's own name), ``panel`` (a metric key, or a part of the
    pairs), its run (and rule), the value and interval, and where they come from: ``file`` (relative to the
    reports directory) and ``pointer`` (the JSON pointer of the value; the interval's keys are
    ``<pointer>_ci_low<ci_suffix>`` / ``_ci_high<ci_suffix>``, or none)."""

    benchmark: str
    panel: str
    model: str
    rule: str
    value: float
    low: float | None
    high: float | None
    letters: str
    released: bool
    file: str
    pointer: str
    ci_suffix: str = ""  # the interval's keys: <pointer>_ci_low<ci_suffix> / _ci_high<ci_suffix> (HOLM_CI, or "")
