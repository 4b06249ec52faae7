"""The section that opens index.html: the answers as figures (:mod:`gece.report.answer_plots`), each inline SVG
with a caption, alt text that states its finding, and a link to its CSV (:mod:`gece.report.forest`). The forest plots
answer two of the page's questions at once: which runs differ (the letters) and which gender gaps are real (the gap
panels beside them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gece.catalog.metric_defs import GAPS
from gece.report import prompt_answers
from gece.report.cells import ReportData, answered
from gece.report.forest import OVERALL, PANELS, PART_TITLES, SHARE, gap_titles
from gece.report.identity import SIDE_WORDS, side
from gece.report.markup import esc, href
from gece.report.points import Point
from gece.report.protocol import by_name

# index.html's size budget in bytes: about 135 KB of text and tables, and the inline figures made small
# (gece.report.answer_plots.compact): about 20 KB per forest plot of 9 runs with its gender gaps, 12 KB per smaller
# figure (11 in the repository's build: 6 calibration figures, a protocol's, 3 rule figures and the prompt ablation's,
# about 17 KB, for which the provenance section lists what every model shares once); tests/test_answer_plots.py
# holds the committed page to it
PAGE_BUDGET = 300_000


@dataclass(frozen=True)
class AnswerFigure:
    """One first-screen figure: its kind (``calibration`` or ``rules``), benchmark, name, points, SVG and the path
    of its CSV (relative to index.html)."""

    kind: str
    benchmark: str
    name: str
    points: list[Point]
    svg: str
    csv: str


def _interval(p: Point) -> str:
    return "" if p.low is None or p.high is None else f" [{p.low:.3f}, {p.high:.3f}]"


def calibration_finding(b: str, points: list[Point], groupings: Mapping[str, str] | None = None) -> str:
    """Per metric: the lowest run with its value and interval and the runs that share a letter with it (not
    distinguishable after Holm); per gender gap (``groupings``: what it groups by), the runs whose interval at Holm's
    level excludes 0, the largest first."""
    parts = []
    for key, label in PANELS.items():
        shown = [p for p in points if p.panel == key]
        if not shown:
            continue
        best = min(shown, key=lambda p: p.value)
        tied = [p.model for p in shown if p is not best and set(p.letters) & set(best.letters)]
        parts.append(
            f"lowest {label} {best.model} {best.value:.3f}{_interval(best)}, not distinguishable after Holm from "
            + (", ".join(tied) if tied else "no other run")
        )
    for gap in GAPS:
        shown = [p for p in points if p.panel == gap]
        away = sorted(
            (p for p in shown if p.low is not None and p.high is not None and (p.low > 0 or p.high < 0)),
            key=lambda p: (-abs(p.value), p.model),
        )
        if shown:
            named = ", ".join(f"{p.model} {p.value:+.3f}" for p in away[:3]) + (
                f" and {len(away) - 3} more" if len(away) > 3 else ""
            )
            parts.append(
                f"ECE female − male by {(groupings or {}).get(gap, gap)} away from 0 after Holm in {len(away)} of "
                f"{len(shown)} runs" + (f" ({named})" if away else "")
            )
    return f"{b}: " + "; ".join(parts) + "."


def rules_finding(data: ReportData, b: str, points: list[Point]) -> str:
    """Per rule: on which side of 0.5 each run's stereotype share lies, judged by its interval, over all pairs and
    (in brackets) over each first-word part."""
    parts = []
    for rule in dict.fromkeys(p.rule for p in points):
        shown = [p for p in points if p.panel == OVERALL and p.rule == rule]
        sides = [side(data.metrics.get((p.benchmark, p.model))) or "about" for p in shown]
        text = f"under the {rule} rule the stereotype share is {_side_counts(sides)}"
        within = []
        for part, title in PART_TITLES.items():
            inside = [p for p in points if p.panel == part and p.rule == rule]
            if part != OVERALL and inside:
                within.append(f"{title}: {_side_counts([_point_side(p) for p in inside])}")
        parts.append(text + (f" ({'; '.join(within)})" if within else ""))
    return f"{b}: " + "; ".join(parts) + "."


def _point_side(p: Point) -> str:
    """The side of 0.5 of a plotted stereotype share, judged by its interval (:func:`gece.report.identity.side`)."""
    return side({SHARE: p.value, f"{SHARE}_ci_low": p.low, f"{SHARE}_ci_high": p.high}) or "about"


def _side_counts(sides: list[str]) -> str:
    """``above 0.5 for 2 of 3 runs, not distinguishable from 0.5 for 1 of 3 runs``."""
    return ", ".join(f"{SIDE_WORDS[s]} for {sides.count(s)} of {len(sides)} runs" for s in sorted(set(sides)))


CAPTIONS = {
    prompt_answers.KIND: (
        "The model's change from the bare sentence under each prompt, on the first pairs of every benchmark "
        "(ablate.prompt_pairs), one row per benchmark: ECE and Gender-ECE where the labels vary, the stereotype "
        "share where y = 1 for every pair. Paired bootstrap over the same pairs (clusters where the benchmark sets "
        "them); each interval is at the level Holm's correction over the prompts holds its test to, so it excludes "
        "the dashed 0 exactly when the change survives Holm (filled marker). A change above 0 in ECE or Gender-ECE "
        "is worse calibration."
    ),
    "calibration": (
        "ECE and Gender-ECE per run with 95% bootstrap intervals, lowest ECE on top; runs that share a letter are "
        "not distinguishable after Holm's correction over all pairs of runs of the panel (compact letter display of "
        "the paired bootstrap tests, each metric its own family). Right: each run's gender gap, ECE female − ECE "
        "male by predicted and by human gender, with its interval at the level Holm's correction over the "
        "benchmark's runs holds it to, so that it excludes the dashed 0 exactly when the gap survives Holm (the † "
        "of the gender-gap table). Filled blue circles: scored here, open orange squares: the authors' released "
        "scores, which carry the authors' values: where a side differs in several words they add the words' "
        "probabilities (extract.side_prob: sum, which can exceed 1); the runs scored here take their joint "
        "probability (joint, the chain rule: the default)."
    ),
    "rules": (
        "Stereotype share per run under each scoring rule (joined by a grey bar), with 95% cluster-resampled "
        "intervals, over all pairs and over the pairs whose first word differs or that start alike; dashed: 0.5, "
        "no preference."
    ),
}


def finding(data: ReportData, f: AnswerFigure) -> str:
    """The figure's finding in one sentence (its alt text); a protocol's figure: the protocol's."""
    if f.kind == "calibration":
        return calibration_finding(f.benchmark, f.points, gap_titles(data, f.benchmark))
    if f.kind == "rules":
        return rules_finding(data, f.benchmark, f.points)
    if f.kind == prompt_answers.KIND:
        return prompt_answers.finding(f.benchmark, f.points)
    return by_name(data, f.kind).finding(data, f.benchmark, f.points)


def first_screen_html(data: ReportData, figures: list[AnswerFigure]) -> str:
    """The "Answers" section: each figure with its caption, its finding and a link to its CSV (the checks left
    out, :func:`gece.report.cells.answered`, as in the figures)."""
    if not figures:
        return ""
    data = answered(data)
    out = ['<section id="answers-figures"><h2>Answers</h2>']
    for f in figures:
        text = finding(data, f)
        caption = CAPTIONS.get(f.kind) or by_name(data, f.kind).caption
        out.append(
            f'<figure class="answer" id="{esc(f.name)}" data-csv="{href(f.csv)}">'
            f'<div class="svg" role="img" aria-label="{esc(text)}">{f.svg}</div>'
            f"<figcaption><strong>{esc(f.benchmark)}</strong>: {esc(caption)} "
            f'<a class="md" href="{href(f.csv)}">CSV</a><br><span class="finding">{esc(text)}</span>'
            "</figcaption></figure>"
        )
    out.append("</section>")
    return "\n".join(out)


def checks_html(data: ReportData) -> list[str]:
    """The "Checks" section: each check (:attr:`gece.report.cells.ReportData.checks`), what makes it one, and the
    benchmarks where it was not calibrated (its slice too small for calibrate.folds); none without checks."""
    if not data.checks:
        return []
    items = []
    for m, why in data.checks.items():
        scored = [b for b in data.benchmarks if (b, m) in data.metrics]
        skipped = [b for b in scored if (b, m) not in data.calibration]
        items.append(
            f"<li><strong>{esc(m)}</strong> ({esc(why)}): {len(scored)} benchmarks"
            + (
                f"; not calibrated on {esc(', '.join(skipped))}, whose slice holds fewer than calibrate.folds pairs "
                "of a label (the calibrate stage says how many)"
                if skipped
                else ""
            )
            + "</li>"
        )
    return [
        '<section id="checks"><h2>Checks</h2><p class="caption">A run whose registry entry sets <code>limit</code> '
        "(a slice) or <code>checked_against</code> (another engine or setting of a model scored already) is a "
        "check: it has its own rows in the tables and its line on the Engine agreement page, and is left out of "
        "the answers, the letters, the findings and the counts of this page and of reports/summary.json.</p><ul>"
        + "".join(items)
        + "</ul></section>"
    ]


@dataclass(frozen=True)
class Headline:
    """One benchmark's answer in one line of the terminal (``gece summary``): the best run and those tied with it
    after Holm, the largest gender gap that is a finding, or, on an identity benchmark, the verdict per rule, or, on
    a protocol's benchmark, the protocol's answer (:attr:`gece.report.protocol.Protocol.headline`)."""

    benchmark: str
    best: str
    tied: str
    gap: str
    rules: str
    protocol: str = "–"


def _best_and_tied(points: list[Point]) -> tuple[str, str]:
    shown = [p for p in points if p.panel == "ece"]
    best = min(shown, key=lambda p: p.value)
    tied = [p.model for p in shown if p is not best and set(p.letters) & set(best.letters)]
    return f"{best.model} {best.value:.3f}{_interval(best)}", ", ".join(tied) or "none"


def headlines(data: ReportData) -> list[Headline]:
    """Per first-screen figure (:func:`gece.report.forest.first_screen`), its headline; the checks left out
    (:func:`gece.report.cells.answered`)."""
    from gece.report.answers import gender_gaps
    from gece.report.forest import first_screen

    data = answered(data)

    largest: dict[str, tuple[float, str]] = {}
    for g in gender_gaps(data):
        for x in g.found[:1]:
            if abs(x.gap) > largest.get(g.benchmark, (0.0, ""))[0]:
                largest[g.benchmark] = (abs(x.gap), f"{x.text()} by {g.by}")
    out = []
    for kind, b, points in first_screen(data):
        if kind == "calibration":
            best, tied = _best_and_tied(points)
            out.append(Headline(b, best, tied, largest.get(b, (0.0, "none"))[1], "–"))
        elif kind == "rules":
            out.append(Headline(b, "–", "–", "–", _rule_counts(data, points)))
        else:
            out.append(Headline(b, "–", "–", "–", "–", by_name(data, kind).headline(data, b)))
    return out


SIDE_SIGNS = {"above": "> 0.5", "below": "< 0.5", "about": "≈ 0.5"}  # judged by the interval (identity.side)


def _rule_counts(data: ReportData, points: list[Point]) -> str:
    """``sentence: > 0.5 in 3/3; shared: ≈ 0.5 in 1/3, > 0.5 in 2/3``: per rule, the runs on each side of 0.5."""
    parts = []
    for rule in dict.fromkeys(p.rule for p in points):
        shown = [p for p in points if p.panel == OVERALL and p.rule == rule]
        sides = [side(data.metrics.get((p.benchmark, p.model))) or "about" for p in shown]
        counts = ", ".join(f"{SIDE_SIGNS[x]} in {sides.count(x)}/{len(shown)}" for x in sorted(set(sides)))
        parts.append(f"{rule}: {counts}")
    return "; ".join(parts)
