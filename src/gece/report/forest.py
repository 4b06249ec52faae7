"""The numbers the first-screen figures plot (:mod:`gece.report.answer_plots` draws them), each with the JSON
pointer it came from, and their CSV (``reports/figures/<figure>.csv``, beside the figure).

- **Calibration figure** (:func:`calibration_points`), per benchmark whose labels vary: ECE and Gender-ECE of every
  run with its 95% interval (the metrics JSON's ``<key>_ci_low`` / ``_high``), runs sorted by ECE (lowest first;
  the Gender-ECE panel keeps that order). On a benchmark of a protocol (:mod:`gece.report.protocol`) the same
  figure of the numbers it declares (``panels``, from its block of the metrics JSON), runs sorted by the first,
  best first. The letters are a compact letter display (:mod:`gece.stats.letters`) of
  the compare report's paired tests of that metric (``p_value``), Holm-corrected over every pair of runs the panel
  shows (:func:`differ_matrix`): runs sharing a letter are not distinguishable with the family-wise error of the
  whole panel controlled, which is what a reader comparing any two rows asks. (The compare report's own
  ``significant_holm`` corrects over the metrics of one pair of runs; its tables say so.) ``released`` marks
  the authors' released scores (registry ``reference:``), drawn apart from the runs scored here.
  Beside them, per run, the gender gaps ECE female − ECE male by predicted and by human gender (``gap_pred``,
  ``gap_true``) with the interval that agrees with their Holm verdict over the benchmark's runs (the metrics report's
  ``<gap>_ci_low_holm`` / ``_ci_high_holm``, :func:`gece.stats.gap.holm_over_runs`): it excludes 0 exactly when the
  gap survives Holm's correction, the † of the gender-gap table. The CSV says which interval each point has
  (``ci_suffix``: its keys are ``<pointer>_ci_low<ci_suffix>`` / ``_ci_high<ci_suffix>``).
- **Rule figure** (:func:`rule_points`), per identity benchmark (y = 1 for every pair): the stereotype share
  (``pct_stereotype``, its cluster-resampled interval) of every run under each scoring rule of the same pairs
  (sentence, shared), and the share among the pairs that differ in their first word (``initial``) and those that
  start alike (``later``), from the groups report (``pct_stereotype`` of the ``first_diff`` grouping under the
  identity protocol, with its interval from the same cluster resamples as the group's ECE; none in a groups
  report written before it had one, or for a part under ``groups.min_size`` pairs).
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import numpy as np

from gece.catalog.metric_defs import GAPS
from gece.io.paths import report_layout
from gece.report.answers import gap_grouping
from gece.report.cells import ReportData, answered, ptr
from gece.report.identity import FIRST_DIFF_GROUPS, first_diff_result, identity_benchmarks, members
from gece.report.points import HOLM_CI, Point
from gece.report.protocol import Protocol, claimed
from gece.report.readings import reading_of
from gece.stats.intervals import holm
from gece.stats.letters import compact_letters

PANELS = {"ece": "ECE", "gender_ece": "Gender-ECE"}  # the calibration figure's panels: metrics JSON key -> label
SHARE = "pct_stereotype"  # the rule figure's quantity (the stereotype share)
OVERALL = "all"  # the rule figure's part holding every pair (beside FIRST_DIFF_GROUPS)
PART_TITLES = {OVERALL: "all pairs", "initial": "first word differs", "later": "start alike"}  # its panels' titles
CSV_COLUMNS = (
    "benchmark",
    "panel",
    "model",
    "rule",
    "value",
    "ci_low",
    "ci_high",
    "letters",
    "released",
    "file",
    "pointer",
    "ci_suffix",
)


def calibration_benchmarks(data: ReportData) -> list[str]:
    """The benchmarks with a calibration figure: labels vary and some run has an ECE. Not a protocol's benchmark:
    its figure draws the protocol's own numbers (an ECE of p beside them would give each run two ECEs)."""
    protocols = claimed(data)
    return [
        b
        for b in data.benchmarks
        if reading_of(data, b).calibration
        and any(_finite((data.metrics.get((b, m)) or {}).get("ece")) for m in data.runs[b])
        and b not in protocols
    ]


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and bool(np.isfinite(x))


def differ_matrix(data: ReportData, b: str, models: list[str], key: str) -> np.ndarray:
    """``differ[i, j]``: the ``key`` test of models i and j is significant after Holm's correction over every pair
    of ``models`` that the compare report tests (its ``p_value``, at its ``alpha``): the family of one panel. A pair
    it lacks, or one run scored twice (``identical``), counts as not differing and is not in the family."""
    rep = data.compare.get(b) or {}
    index = {m: i for i, m in enumerate(models)}
    tested = [
        (index[pair["a"]], index[pair["b"]], (pair["metrics"].get(key) or {}).get("p_value"))
        for pair in rep.get("pairs", [])
        if pair["a"] in index and pair["b"] in index and not pair.get("identical")
    ]
    tested = [(i, j, p) for i, j, p in tested if p is not None]
    differ = np.zeros((len(models), len(models)), dtype=bool)
    for (i, j, _), adjusted in zip(tested, holm([p for _, _, p in tested]), strict=True):
        differ[i, j] = differ[j, i] = adjusted < rep["alpha"]
    return differ


def calibration_points(data: ReportData, b: str, protocol: Protocol | None = None) -> list[Point]:
    """Benchmark ``b``'s ECE and Gender-ECE points with their letters, then its gender gaps with their intervals at
    Holm's level, runs by ascending ECE (module docstring); with ``protocol``, its panels' points from its block,
    runs by the first panel, best first."""
    panels, base = (protocol.panels, (protocol.name,)) if protocol is not None else ((*PANELS, *GAPS), ())
    reps = {}
    for m in data.runs[b]:
        rep = data.metrics.get((b, m)) or {}
        rep = (rep.get(protocol.name) or {}) if protocol is not None else rep
        if _finite(rep.get(panels[0])):
            reps[m] = rep
    sign = -1 if protocol is not None and protocol.metric[panels[0]].worse == "low" else 1
    models = sorted(reps, key=lambda m: (sign * reps[m][panels[0]], m))
    out = []
    for key in panels:
        shown = [m for m in models if _finite(reps[m].get(key))]
        if not shown:  # no run has it
            continue
        gap = protocol is None and key in GAPS  # a gender gap: its interval at Holm's level, no letters
        letters = [""] * len(shown) if gap else compact_letters(differ_matrix(data, b, shown, key))
        suffix = HOLM_CI if gap else ""
        for m, letter in zip(shown, letters, strict=True):
            rep = reps[m]
            lo, hi = rep.get(f"{key}_ci_low{suffix}"), rep.get(f"{key}_ci_high{suffix}")
            out.append(
                Point(
                    b,
                    key,
                    m,
                    data.rules.get(b, ""),
                    float(rep[key]),
                    float(lo) if _finite(lo) else None,
                    float(hi) if _finite(hi) else None,
                    letter,
                    m in data.references,
                    report_layout.metrics_file(b, m),
                    ptr(*base, key),
                    suffix,
                )
            )
    return out


def gap_titles(data: ReportData, b: str) -> dict[str, str]:
    """The gap panels' groupings on benchmark ``b`` (:func:`gece.report.answers.gap_grouping`)."""
    return {gap: gap_grouping(data, b, gap) for gap in GAPS}


def rule_points(data: ReportData, first: str) -> list[Point]:
    """Identity benchmark ``first``'s stereotype shares: per run and rule, every pair and the first-word parts,
    each with its interval where its report has one."""
    out = []
    for m in data.runs.get(first, []):
        for v, rule in members(data, first).items():
            rep = data.metrics.get((v, m)) or {}
            if _finite(rep.get(SHARE)):
                out.append(
                    _share_point(rep, v, OVERALL, m, rule, m in data.references, report_layout.metrics_file(v, m))
                )
            found = first_diff_result(data.groups.get(v), m)
            if found is None:
                continue
            i, result = found
            for j, cell in enumerate(result["groups"]):
                if cell["group"] in FIRST_DIFF_GROUPS and _finite(cell.get(SHARE)):
                    point = _share_point(
                        cell, v, cell["group"], m, rule, m in data.references, report_layout.groups_file(v)
                    )
                    out.append(replace(point, pointer=ptr("runs", m, i, "groups", j, SHARE)))
    return out


def _share_point(obj: dict, b: str, panel: str, m: str, rule: str, released: bool, file: str) -> Point:
    """The stereotype share at ``obj[SHARE]`` and its interval (``<SHARE>_ci_low`` / ``_high``, None where the
    report has none) as a point of ``file`` (pointer: the top-level key)."""
    lo, hi = obj.get(f"{SHARE}_ci_low"), obj.get(f"{SHARE}_ci_high")
    interval = (float(lo), float(hi)) if _finite(lo) and _finite(hi) else (None, None)
    return Point(b, panel, m, rule, float(obj[SHARE]), *interval, "", released, file, ptr(SHARE))


def figure_name(kind: str, b: str) -> str:
    """The figure's name (its CSV is ``reports/figures/<name>.csv``; the inline SVG's id)."""
    return f"{kind}_{b}"


def first_screen(data: ReportData) -> list[tuple[str, str, list[Point]]]:
    """The first screen's figures in page order: (kind, benchmark, points); kind ``calibration``, a protocol's name
    (its figure, after the calibration figures) or ``rules``. The checks are not drawn: they are no answer, and
    would change the other runs' letters (:func:`gece.report.cells.answered`)."""
    data = answered(data)
    out = [("calibration", b, calibration_points(data, b)) for b in calibration_benchmarks(data)]
    out += [(p.name, b, pts) for b, p in claimed(data).items() if (pts := calibration_points(data, b, p))]
    out += [("rules", b, pts) for b in identity_benchmarks(data) if (pts := rule_points(data, b))]
    return out


def points_csv(points: list[Point]) -> str:
    """The CSV of a figure's points (:data:`CSV_COLUMNS`; numbers with 17 significant digits, empty when none)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def num(x: float | None) -> str:
        return "" if x is None else repr(x)

    for p in points:
        w.writerow(
            [
                p.benchmark,
                p.panel,
                p.model,
                p.rule,
                num(p.value),
                num(p.low),
                num(p.high),
                p.letters,
                int(p.released),
                p.file,
                p.pointer,
                p.ci_suffix,
            ]
        )
    return buf.getvalue()
