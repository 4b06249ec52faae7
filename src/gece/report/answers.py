"""The answers that open the page: which models differ, which gender gaps are real, what calibration changes.

Three questions, answered per benchmark whose labels vary (on a benchmark with y = 1 for every pair ECE is
1 − mean p, not calibration: :attr:`gece.report.readings.Reading.calibration`), each answer with its 95% interval:

- **Model differences** (``reports/compare/<b>.json``): a pair of models differs in ECE when the paired
  bootstrap test is significant after Holm's correction over the metrics compared for the pair
  (``significant_holm``). Shown are the pairs a user asks about (:func:`asked`): those of the model with the
  lowest ECE and those between two scored models (params.yaml ``models``, not the authors' released runs);
  the others are counted. The pairs asked about that do not differ are stated too ("no difference").
  Each difference is oriented lower ECE first: ``A below B by d [l, h]`` with d = ECE_B − ECE_A, and its
  interval is the one at the level Holm's correction tests it at (``ci_low_holm``/``ci_high_holm``,
  :func:`gece.stats.intervals.holm_alpha`), built to exclude 0 exactly when the pair differs. Two runs
  that give every pair the same p (``identical``) are one run scored twice: their pair is not counted.
- **Gender gaps** (``reports/metrics/<b>/<m>.json``): the gap ECE female − ECE male, grouped by predicted and
  by human gender (:data:`gece.catalog.metric_defs.GAPS`), is a finding when its bootstrap p-value, adjusted by Holm's
  method over the runs of the benchmark (:func:`gece.report.stat_tables.gap_holm`, the † of the gender-gap table),
  is below :data:`gece.report.stat_tables.ALPHA` and its interval is at most :data:`gece.report.gaps.GAP_MAX_WIDTH`
  wide (the width rule of the gaps between groups; the metrics reports carry no per-gender distinct counts, so
  the size rule cannot be applied here).
- **Calibration changes** (``reports/calibration/<b>/<m>.json``, held-out split): per run the change
  Δ = ECE after − ECE before of the method params.yaml fixes in advance (``calibrate.headline``; the best of
  several methods, chosen on the held-out pairs it is then evaluated on, would flatter it), where its fit is
  ``ok``; per benchmark the run with the largest drop, both ECEs with their intervals and the pairs it is fitted
  and evaluated on.
- **A protocol's answers** (:attr:`gece.report.protocol.Protocol.answers`): per run of each of its benchmarks, its
  own sentence.

Pure functions of a :class:`gece.report.cells.ReportData`; the HTML is :func:`gece.report.html.answers_html`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gece.catalog.metric_defs import GAPS
from gece.report.cells import ReportData, answered, format_bound, format_p
from gece.report.findings import ranking
from gece.report.gaps import GAP_MAX_WIDTH
from gece.report.readings import calibrated, reading_of
from gece.report.stat_tables import ALPHA, gap_holm

COMPARED = "ece"  # the metric the model differences are stated in
GAP_GROUPING = {"gap_pred": "predicted gender", "gap_true": "human gender"}
# SynthBias type2's y is the labour-statistics majority of the occupation the pronoun refers to, not a human judgement
SYNTH_GAP_GROUPING = {"type2": {"gap_true": "labour-statistics majority gender"}}
PROTOCOL = "split"  # the calibration protocol of the changes (the page's calibration figures use it too)


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{format_bound(low)}, {format_bound(high)}]"


# ------------------------------------------------------------------------------ model differences
@dataclass
class Difference:
    """One compared pair, lower ECE first: ``by`` = ECE_high − ECE_low ≥ 0 with its interval [low, high]."""

    lower: str
    higher: str
    by: float
    low: float | None
    high: float | None
    p: float | None
    p_holm: float | None
    significant: bool  # after Holm's correction
    level: float | None = None  # the level of [low, high]: Holm's for this test

    def text(self) -> str:
        """``gemma-3-270m-nobos +0.335 [0.293, 0.372]``: the higher model and how much higher."""
        return f"{self.higher} +{self.by:.3f}{_ci(self.low, self.high)}{self.level_text()}"

    def same_text(self) -> str:
        """``smollm2-135m ≈ gemma-3-270m +0.042 [0.004, 0.075] (p = 0.036, Holm p = 0.072)``: the p-values only
        when the test alone is significant (Holm's correction is what makes it no difference)."""
        alone = self.p is not None and self.p < ALPHA
        ps = f" ({format_p(self.p)}, Holm {format_p(self.p_holm)})" if alone else ""
        return f"{self.lower} ≈ {self.higher} +{self.by:.3f}{_ci(self.low, self.high)}{self.level_text()}{ps}"

    def level_text(self) -> str:
        """`` (98.8%)``, the level of the interval, where Holm's is not 95%."""
        if self.level is None or round(self.level, 3) == 0.95:
            return ""
        return f" ({self.level:.1%})"


@dataclass
class Comparisons:
    """The model differences of one benchmark."""

    benchmark: str
    pairs: int  # compared pairs
    significant: int  # of them, significant after Holm
    best: str
    differ: list[Difference] = field(default_factory=list)  # asked about, significant
    same: list[Difference] = field(default_factory=list)  # asked about, not significant
    other_differ: int = 0  # not asked about
    other_same: int = 0


def asked(data: ReportData, best: str, a: str, b: str) -> bool:
    """Whether a user asks about the pair (a, b): it holds the model with the lowest ECE, or both are scored
    models (not released runs)."""
    return best in (a, b) or (a not in data.references and b not in data.references)


def _difference(pair: dict, key: str) -> Difference | None:
    cell = pair["metrics"].get(key) or {}
    diff, lo, hi = (_num(cell.get(k)) for k in ("diff", "ci_low_holm", "ci_high_holm"))
    if diff is None:
        return None
    a, b = pair["a"], pair["b"]
    if diff <= 0:  # diff = a − b: a is lower; the difference is b − a = −diff, its interval [−hi, −lo]
        lower, higher, by = a, b, -diff
        low, high = (None, None) if lo is None or hi is None else (-hi, -lo)
    else:
        lower, higher, by, low, high = b, a, diff, lo, hi
    return Difference(
        lower,
        higher,
        by,
        low,
        high,
        _num(cell.get("p_value")),
        _num(cell.get("p_holm")),
        bool(cell.get("significant_holm")),
        _num(cell.get("level_holm")),
    )


def comparisons(data: ReportData, key: str = COMPARED) -> list[Comparisons]:
    """Per benchmark whose labels vary and that has a comparison of ``key``: its differences (module docstring)."""
    out = []
    for b in data.benchmarks:
        rep = data.compare.get(b) or {}
        ranked = ranking(data, b, key)
        if not reading_of(data, b).calibration or not ranked or not rep.get("pairs"):
            continue
        diffs = [d for d in (_difference(p, key) for p in rep["pairs"] if not p.get("identical")) if d is not None]
        if not diffs:
            continue
        c = Comparisons(b, len(diffs), sum(d.significant for d in diffs), ranked[0].model)
        for d in diffs:
            if asked(data, c.best, d.lower, d.higher):
                (c.differ if d.significant else c.same).append(d)
            elif d.significant:
                c.other_differ += 1
            else:
                c.other_same += 1
        # the best model's pairs first, then by size (largest first), then by name
        c.differ.sort(key=lambda d: (c.best != d.lower, -d.by, d.lower, d.higher))
        c.same.sort(key=lambda d: (c.best not in (d.lower, d.higher), d.by, d.lower, d.higher))
        out.append(c)
    return out


# ------------------------------------------------------------------------------ gender gaps
@dataclass
class Gap:
    model: str
    gap: float
    low: float
    high: float
    p_holm: float

    def text(self) -> str:
        return f"{self.model} {self.gap:+.3f}{_ci(self.low, self.high)}"


@dataclass
class GenderGaps:
    """The gender gaps of one benchmark and grouping that are findings."""

    benchmark: str
    grouping: str  # a key of GAPS
    runs: int  # runs with a p-value
    found: list[Gap] = field(default_factory=list)
    wide: int = 0  # significant after Holm, but the interval is wider than GAP_MAX_WIDTH
    by: str = ""  # what the grouping is, as the page says it (GAP_GROUPING, SYNTH_GAP_GROUPING)


def gap_grouping(data: ReportData, b: str, gap: str) -> str:
    """What benchmark ``b``'s pairs are grouped by for ``gap``, as the page says it (:data:`GAP_GROUPING`, on
    SynthBias :data:`SYNTH_GAP_GROUPING`)."""
    return SYNTH_GAP_GROUPING.get(data.synthbias.get(b, ""), {}).get(gap, GAP_GROUPING[gap])


def gender_gaps(data: ReportData) -> list[GenderGaps]:
    """Per benchmark whose labels vary and per grouping: the gaps significant after Holm whose interval is at
    most :data:`GAP_MAX_WIDTH` wide, largest |gap| first."""
    out = []
    for b in calibrated(data):
        models, adjusted = gap_holm(data, b)
        for gap in GAPS:
            g = GenderGaps(b, gap, sum(adj is not None for adj in adjusted[gap]), by=gap_grouping(data, b, gap))
            for m, adj in zip(models, adjusted[gap], strict=True):
                rep = data.metrics[(b, m)]
                value, lo, hi = (_num(rep.get(k)) for k in (gap, f"{gap}_ci_low", f"{gap}_ci_high"))
                if adj is None or adj >= ALPHA or value is None or lo is None or hi is None:
                    continue
                if round(hi - lo, 12) > GAP_MAX_WIDTH:
                    g.wide += 1
                else:
                    g.found.append(Gap(m, value, lo, hi, adj))
            g.found.sort(key=lambda x: (-abs(x.gap), x.model))
            if g.runs:
                out.append(g)
    return out


# ------------------------------------------------------------------------------ calibration changes
@dataclass
class CalibrationChange:
    benchmark: str
    model: str
    method: str
    before: float
    before_ci: tuple[float | None, float | None]
    after: float
    after_ci: tuple[float | None, float | None]
    lowered: int  # runs of the benchmark whose held-out ECE the method lowers
    runs: int  # runs with a calibration report that fits the method
    n_fit: int | None = None  # pairs the map is fitted on, and evaluated on (the run's split)
    n_eval: int | None = None

    def text(self) -> str:
        sizes = f"; fitted on {self.n_fit}, evaluated on {self.n_eval} other pairs" if self.n_eval else ""
        return (
            f"{self.model} {self.before:.3f}{_ci(*self.before_ci)} → {self.after:.3f}{_ci(*self.after_ci)} with "
            f"{self.method} (Δ {self.after - self.before:+.3f}; lowered in {self.lowered} of {self.runs} runs{sizes})"
        )


def calibration_changes(data: ReportData) -> list[CalibrationChange]:
    """Per benchmark whose labels vary: the run whose held-out ECE the headline method (params.yaml
    ``calibrate.headline``, fixed before any result is seen: no method is chosen on the pairs it is evaluated on)
    changes most (largest drop; the smallest rise when it lowers none)."""
    method = data.headline_method
    out = []
    for b in calibrated(data):
        found = []
        for m in data.runs.get(b, []):
            split = (data.calibration.get((b, m)) or {}).get(PROTOCOL) or {}
            before = split.get("uncalibrated") or {}
            fit = (split.get("methods") or {}).get(method) or {}
            after = fit.get("metrics") or {}
            if _num(before.get("ece")) is None or fit.get("status") != "ok" or _num(after.get("ece")) is None:
                continue

            def ci(rep: dict) -> tuple[float | None, float | None]:
                return _num(rep.get("ece_ci_low")), _num(rep.get("ece_ci_high"))

            sizes = (split.get("n_fit"), split.get("n_eval"))
            found.append((after["ece"] - before["ece"], m, before["ece"], ci(before), after["ece"], ci(after), sizes))
        if found:
            _, m, before, before_ci, after, after_ci, (n_fit, n_eval) = min(found, key=lambda x: (x[0], x[1]))
            lowered = sum(x[0] < 0 for x in found)
            out.append(
                CalibrationChange(b, m, method, before, before_ci, after, after_ci, lowered, len(found), n_fit, n_eval)
            )
    return out


# ------------------------------------------------------------------------------ all of it
@dataclass
class Answers:
    comparisons: list[Comparisons]
    gaps: list[GenderGaps]
    calibration: list[CalibrationChange]
    scored: set[str] = field(default_factory=set)  # the runs scored here (not released): shown one by one
    headline: str = ""  # the calibration method of the changes (params.yaml calibrate.headline)
    # per protocol with answers: its title, its page, the note above its answers and its (label, sentence) rows
    protocols: list[tuple[str, str, str, list[tuple[str, str]]]] = field(default_factory=list)


def answers(data: ReportData) -> Answers:
    """The answers in words, the checks left out (:func:`gece.report.cells.answered`)."""
    data = answered(data)
    scored = {m for b in data.benchmarks for m in data.runs.get(b, []) if m not in data.references}
    found = [(p.title, p.name, p.note, rows) for p in data.protocols if (rows := p.answers(data))]
    return Answers(comparisons(data), gender_gaps(data), calibration_changes(data), scored, data.headline_method, found)


def differ_line(c: Comparisons) -> str:
    """``33 of 36 pairs differ. smollm2-135m (lowest ECE) is below paper-gemma-2-9b +0.364 [0.320, 0.401], ...;
    gemma-3-270m below gemma-3-270m-nobos +0.293 [0.267, 0.318]; 25 more among the other runs``."""
    parts = []
    for lower in dict.fromkeys(d.lower for d in c.differ):
        who = f"{lower} (lowest ECE) is" if lower == c.best else lower
        parts.append(f"{who} below " + ", ".join(d.text() for d in c.differ if d.lower == lower))
    if c.other_differ:
        parts.append(f"{c.other_differ} more among the other runs")
    return f"{c.significant} of {c.pairs} pairs differ" + (". " + "; ".join(parts) if parts else "")


def same_line(c: Comparisons) -> str:
    """``smollm2-135m ≈ gemma-3-270m +0.042 [0.004, 0.075] (Holm p = 0.072); 2 more among the other runs``."""
    parts = [d.same_text() for d in c.same]
    if c.other_same:
        parts.append(f"{c.other_same} more among the other runs")
    return "; ".join(parts)


def gap_line(g: GenderGaps, scored: set[str] | None = None) -> str:
    """``8 of 9 runs: gemma-3-270m-nobos +0.764 [0.728, 0.795], gemma-3-270m +0.197 [0.169, 0.226]; 6 released
    runs +0.287 to +0.841``: the runs of ``scored`` each with its interval, the others as a range (each with its
    interval in the gender-gap table); every run with its interval when ``scored`` is None or holds none."""
    own = [x for x in g.found if scored is None or x.model in scored]
    rest = [x for x in g.found if x not in own] if own else []
    own = own or g.found
    parts = [", ".join(x.text() for x in own)] if own else []
    if rest:
        low, high = min(x.gap for x in rest), max(x.gap for x in rest)
        parts.append(f"{len(rest)} released {'run' if len(rest) == 1 else 'runs'} {low:+.3f} to {high:+.3f}")
    text = f"{len(g.found)} of {g.runs} runs" + (": " + "; ".join(parts) if parts else "")
    return text + (f"; {g.wide} more significant but wider than {GAP_MAX_WIDTH}" if g.wide else "")


def answer_lines(a: Answers) -> list[str]:
    """The answers as plain lines (tests, the terminal)."""
    lines = [f"model differences, {c.benchmark}: {differ_line(c)}" for c in a.comparisons]
    lines += [f"no difference, {c.benchmark}: {same_line(c)}" for c in a.comparisons if c.same or c.other_same]
    lines += [f"gender gap, {g.benchmark} by {g.by}: {gap_line(g, a.scored)}" for g in a.gaps]
    lines += [f"calibration, {x.benchmark}: {x.text()}" for x in a.calibration]
    return lines
