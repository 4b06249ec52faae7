"""The first-screen figures as inline SVG (matplotlib, no scripts): a forest plot of ECE, Gender-ECE and the gender
gaps per benchmark whose labels vary (of a protocol's numbers on its benchmarks), and a dumbbell plot of the
stereotype share under each scoring rule per identity benchmark (the points: :mod:`gece.report.forest`), and per
model of the prompt ablation the change under each prompt (:mod:`gece.report.prompt_answers`).

Each plotted value is an artist with an SVG id ``<figure>-<panel>-<row>-point`` (and ``-ci`` for its interval),
``<row>`` its row in the figure's CSV, so a test can read the drawn positions back. The SVG is deterministic:
``svg.hashsalt`` is the figure's name (its marker ids are unique on the page), no date, text kept as text
(``svg.fonttype`` none: the browser's sans-serif draws it, and the page stays small), then made small
(:func:`compact`).

Colours: the Okabe-Ito palette (M. Okabe and K. Ito, "Color Universal Design", 2008), safe under the common
colour-vision deficiencies; shapes differ as well (filled circle: scored here, open square: released scores;
circle and diamond for the two rules, circle, diamond, square and triangle for the prompts in turn), so no mark
relies on colour alone.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Mapping

from gece.catalog.metric_defs import GAPS
from gece.report import prompt_answers
from gece.report.forest import OVERALL, PANELS, PART_TITLES
from gece.report.identity import FIRST_DIFF_GROUPS
from gece.report.plots import plt
from gece.report.points import Point
from gece.report.protocol import Protocol

SCORED = "#0072B2"  # Okabe-Ito blue: runs scored here
RELEASED = "#E69F00"  # Okabe-Ito orange: the authors' released scores
RULE_COLORS = ("#0072B2", "#D55E00")  # the first and second rule (sentence, shared): blue, vermillion
RULE_MARKERS = ("o", "D")
PROMPT_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")  # Okabe-Ito: one per prompt, in turn
PROMPT_MARKERS = ("o", "D", "s", "^")
PROMPT_PANELS = {key: label for key, (_, _, label) in prompt_answers.PANELS.items()}
PALETTE = (
    SCORED,
    RELEASED,
    *RULE_COLORS,
    *PROMPT_COLORS,
)  # every data colour (tests/test_answer_plots.py: colour-blind check)
LINE = "#555555"
WIDTH_IN = 9.2  # inches; SVG at 72 per inch: about 660 px, fits a laptop screen beside nothing else
GAP_IN = 1.6  # inches more per gender-gap panel of a forest plot: 12.4 with both, about 890 px
ROW_IN = 0.25  # inches per run


def svg_id(figure: str, panel: str, row: int, part: str) -> str:
    """The SVG id of a plotted value (``part`` ``point`` or ``ci``)."""
    return f"{figure}-{panel}-{row}-{part}"


def _svg(fig, name: str) -> str:
    """The figure as an inline SVG element: no XML declaration or doctype, no date, ids salted by ``name``, made
    small (:func:`compact`)."""
    buf = io.StringIO()
    with plt.rc_context({"svg.hashsalt": name, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"^<\?xml[^>]*>\s*<!DOCTYPE[^>]*>\s*", "", text, flags=re.S)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r' id="(?:figure|patch|axes|matplotlib\.axis|[xy]tick|line2d|text|legend)_\d+"', "", text)
    text = re.sub(r' transform="rotate\(-?0 [^"]*\)"', "", text)  # the ticks' null rotation
    text = re.sub(r'\b(d|x|y|transform|points)="([^"]*)"', _short_numbers, text)
    text = re.sub(r"\s*\n\s*", "\n", text).replace("\nL ", " L ").replace("\nz\n", " z")
    return compact(text)


BARE_GROUP = re.compile(r"<g>\n((?:<(?!/?g[ >])[^\n]*\n)*?)</g>\n")  # a group without attributes, no group inside


def compact(text: str) -> str:
    """An SVG of matplotlib's, drawing the same at about 60% of its bytes (the page's budget,
    :data:`gece.report.first_screen.PAGE_BUDGET`): the font is the page's (``figure.answer svg text`` in page.css:
    DejaVu Sans, in which matplotlib lays the text out, or Verdana, which has about its metrics), not repeated in every
    text; each distinct ``style`` is one class, defined once in the SVG's own style sheet and named by the style's
    hash (the same on every figure, so the page's rules never disagree); groups without attributes are unwrapped; no
    clip paths (every mark is drawn inside its axes: the x limits hold every interval); ``href`` instead of
    ``xlink:href`` (SVG 2)."""
    text = re.sub(r"font-family: [^;\"]*;? ?", "", text)
    text = re.sub(r' clip-path="url\(#[^)]*\)"', "", text)
    text = re.sub(r"<defs>\n(?:<clipPath [^>]*>\n<rect [^>]*/>\n</clipPath>\n)+</defs>\n", "", text)
    text = text.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "").replace("xlink:href=", "href=")
    classes: dict[str, str] = {}

    def as_class(match: re.Match) -> str:
        style = match.group(1).strip().rstrip(";")
        name = classes.setdefault(style, "s" + hashlib.sha1(style.encode()).hexdigest()[:6])
        return f'class="{name}"'

    text = re.sub(r'style="([^"]*)"', as_class, text)
    rules = "".join(
        f".{name}{{{style.replace(': ', ':').replace('; ', ';')}}}"
        for style, name in sorted(classes.items(), key=lambda kv: kv[1])
    )
    text = text.replace("</style>", rules + "</style>", 1)
    while True:
        shorter = BARE_GROUP.sub(r"\1", text)
        if shorter == text:
            return text
        text = shorter


def _short_numbers(match: re.Match) -> str:
    """An attribute of coordinates with at most 2 decimals (1/100 of a point) and no line breaks."""
    value = re.sub(r"(\d+\.\d\d)\d+", r"\1", " ".join(match.group(2).split()))
    return f'{match.group(1)}="{value}"'


def _point(ax, name: str, panel: str, row: int, p: Point, y: float, color: str, marker: str, filled: bool) -> None:
    if p.low is not None and p.high is not None:
        ax.plot(
            [p.low, p.high],
            [y, y],
            color=color,
            linewidth=1.6,
            solid_capstyle="butt",
            gid=svg_id(name, panel, row, "ci"),
            clip_on=False,  # within the axes' limits: no clip path to write (the page's budget)
        )
    ax.plot(
        [p.value],
        [y],
        marker=marker,
        markersize=6,
        color=color,
        markerfacecolor=color if filled else "white",
        markeredgewidth=1.4,
        linestyle="none",
        gid=svg_id(name, panel, row, "point"),
        zorder=3,
        clip_on=False,
    )


def calibration_svg(
    name: str,
    b: str,
    points: list[Point],
    protocol: Protocol | None = None,
    groupings: Mapping[str, str] | None = None,
) -> str:
    """Benchmark ``b``'s forest plot: one panel per metric of :data:`PANELS` (a ``protocol``'s panels, by their
    labels; the value with its 95% interval, the compact letter display at the right), then one per gender gap of
    ``points`` (ECE female − ECE male with its interval at Holm's level, the dashed line 0; ``groupings``: what each
    gap groups by, its panel's title), one row per run (sorted by ECE, the lowest on top; by the protocol's first
    panel, the best on top). A panel where higher is better (a skill) draws its 0, the skill of a coin, dashed, and
    may go below it."""
    models = list(dict.fromkeys(p.model for p in points))
    metrics = PANELS if protocol is None else {k: protocol.metric[k].label for k in protocol.panels}
    higher = set() if protocol is None else {k for k in protocol.panels if protocol.metric[k].worse == "low"}
    panels = [k for k in (*metrics, *GAPS) if any(p.panel == k for p in points)]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(WIDTH_IN + GAP_IN * (len(panels) - len(metrics)), ROW_IN * len(models) + 1.25),
        sharey=True,
        layout="constrained",
        width_ratios=[1.25 if k in metrics else 1 for k in panels],
        squeeze=False,
    )
    axes = axes[0]
    for ax, key in zip(axes, panels, strict=True):
        if key in GAPS or key in higher:
            ax.axvline(0, color=LINE, linewidth=1, linestyle="--", zorder=1)
        for row, p in enumerate(points):
            if p.panel != key:
                continue
            color = RELEASED if p.released else SCORED
            y = models.index(p.model)
            _point(ax, name, key, row, p, y, color, "s" if p.released else "o", not p.released)
            if p.letters:
                ax.annotate(
                    p.letters,
                    (1.0, y),
                    xycoords=("axes fraction", "data"),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=8,
                    color=LINE,
                )
        if key in metrics:
            better = "higher" if key in higher else "lower"
            ax.set_title(f"{metrics[key]} ({better} is better)\nletters: Holm groups", fontsize=9, loc="left")
            if key not in higher:
                ax.set_xlim(left=0)
        else:
            by = (groupings or {}).get(key, key)
            ax.set_title(f"ECE female − male\nby {by}", fontsize=9 if len(by) < 24 else 8, loc="left")
            ax.set_xlabel("interval at Holm's level; dashed: 0", fontsize=7.5)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(range(len(models)), models)
    axes[0].set_ylim(len(models) - 0.5, -0.5)
    released = {p.model for p in points if p.released}
    for label in axes[0].get_yticklabels():
        if label.get_text() in released:
            label.set_color("#8a5a00")
    handles = [
        plt.Line2D([], [], color=SCORED, marker="o", linestyle="-", label="scored here"),
        plt.Line2D(
            [], [], color=RELEASED, marker="s", markerfacecolor="white", linestyle="-", label="authors' released scores"
        ),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    question = "which runs have skill" if higher else "which runs are best calibrated"
    tied = (
        "which are tied after Holm, and which gender gaps are real"
        if set(GAPS) & set(panels)
        else ("and which are tied after Holm")
    )
    fig.suptitle(
        f"{b}: {question}, {tied}?",
        fontsize=10,
        fontweight="bold",
        x=0.005,
        ha="left",
    )
    return _svg(fig, name)


def rules_svg(name: str, b: str, points: list[Point]) -> str:
    """Identity benchmark ``b``'s dumbbell plot: per run, the stereotype share under each rule joined by a line,
    for every pair, the pairs whose first word differs and those that start alike, each with its 95% interval where
    its report has one; the 0.5 line."""
    models = list(dict.fromkeys(p.model for p in points))
    rules = list(dict.fromkeys(p.rule for p in points))
    parts = [x for x in (OVERALL, *FIRST_DIFF_GROUPS) if any(p.panel == x for p in points)]
    fig, axes = plt.subplots(
        1,
        len(parts),
        figsize=(WIDTH_IN, 0.4 * len(models) + 0.95),
        sharey=True,
        layout="constrained",
        width_ratios=[2] + [1] * (len(parts) - 1),
        squeeze=False,
    )
    offset = {r: (k - (len(rules) - 1) / 2) * 0.22 for k, r in enumerate(rules)}
    for ax, part in zip(axes[0], parts, strict=True):
        ax.axvline(0.5, color=LINE, linewidth=1, linestyle="--", zorder=1)
        for m in models:  # the dumbbell's bar: the run's values under each rule, joined
            pts = [p for p in points if p.panel == part and p.model == m]
            if len(pts) > 1:
                y = models.index(m)
                ax.plot(
                    [p.value for p in pts], [y + offset[p.rule] for p in pts], color="#bbbbbb", linewidth=3, zorder=2
                )
        for row, p in enumerate(points):
            if p.panel != part:
                continue
            k = rules.index(p.rule)
            _point(
                ax,
                name,
                part,
                row,
                p,
                models.index(p.model) + offset[p.rule],
                RULE_COLORS[k % 2],
                RULE_MARKERS[k % 2],
                True,
            )
        ax.set_title(PART_TITLES[part], fontsize=9, loc="left")
        ax.set_xlim(0, 1)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0][0].set_yticks(range(len(models)), models)
    axes[0][0].set_ylim(len(models) - 0.5, -0.5)
    axes[0][0].set_xlabel("stereotype share (p > 0.5), 95% intervals; dashed: 0.5", fontsize=8)
    handles = [
        plt.Line2D([], [], color=RULE_COLORS[k % 2], marker=RULE_MARKERS[k % 2], linestyle="-", label=f"rule: {r}")
        for k, r in enumerate(rules)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(rules), fontsize=8, frameon=False)
    fig.suptitle(
        f"{b}: does the stereotype share stay on its side of 0.5 under each rule?",
        fontsize=10,
        fontweight="bold",
        x=0.005,
        ha="left",
    )
    return _svg(fig, name)


def prompts_svg(name: str, model: str, points: list[Point]) -> str:
    """``model``'s prompt ablation (:mod:`gece.report.prompt_answers`): one panel per number drawn, one row per
    benchmark, one marker per prompt (filled: the change survives Holm's correction over the prompts) with its
    interval at Holm's level; the dashed line 0, no change."""
    panels = [k for k in PROMPT_PANELS if any(p.panel == k for p in points)]
    prompts = list(dict.fromkeys(p.rule for p in points))
    rows = {k: list(dict.fromkeys(p.benchmark for p in points if p.panel == k)) for k in panels}
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(WIDTH_IN, ROW_IN * max(len(r) for r in rows.values()) * max(1, len(prompts) / 2) + 1.3),
        layout="constrained",
        squeeze=False,
    )
    offset = {r: (k - (len(prompts) - 1) / 2) * 0.25 for k, r in enumerate(prompts)}
    for ax, key in zip(axes[0], panels, strict=True):
        ax.axvline(0, color=LINE, linewidth=1, linestyle="--", zorder=1)
        for row, p in enumerate(points):
            if p.panel != key:
                continue
            k = prompts.index(p.rule)
            y = rows[key].index(p.benchmark) + offset[p.rule]
            color, marker = PROMPT_COLORS[k % len(PROMPT_COLORS)], PROMPT_MARKERS[k % len(PROMPT_MARKERS)]
            _point(ax, name, key, row, p, y, color, marker, bool(p.letters))
        ax.set_yticks(range(len(rows[key])), rows[key])
        ax.set_ylim(len(rows[key]) - 0.5, -0.5)
        ax.set_title(f"{PROMPT_PANELS[key]}: change", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0][0].set_xlabel("interval at Holm's level; dashed: 0", fontsize=7.5)
    handles = [
        plt.Line2D(
            [],
            [],
            color=PROMPT_COLORS[k % len(PROMPT_COLORS)],
            marker=PROMPT_MARKERS[k % len(PROMPT_MARKERS)],
            linestyle="-",
            label=f"prompt: {r}",
        )
        for k, r in enumerate(prompts)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(prompts), fontsize=8, frameon=False)
    fig.suptitle(
        f"{model}: which prompt moves calibration and the gender gap, and is the change real?",
        fontsize=10,
        fontweight="bold",
        x=0.005,
        ha="left",
    )
    return _svg(fig, name)
