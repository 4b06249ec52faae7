"""The first-screen figures as inline SVG (matplotlib, no scripts): a forest plot of ECE and Gender-ECE per
benchmark whose labels vary (of a protocol's numbers on its benchmarks), and a dumbbell plot of the stereotype share
under each scoring rule per identity benchmark (the points: :mod:`gece.report.forest`).

Each plotted value is an artist with an SVG id ``<figure>-<panel>-<row>-point`` (and ``-ci`` for its interval),
``<row>`` its row in the figure's CSV, so a test can read the drawn positions back. The SVG is deterministic:
``svg.hashsalt`` is the figure's name (its clip-path and marker ids are unique on the page), no date, text kept as
text (``svg.fonttype`` none: the browser's sans-serif draws it, and the page stays small).

Colours: the Okabe-Ito palette (M. Okabe and K. Ito, "Color Universal Design", 2008), safe under the common
colour-vision deficiencies; shapes differ as well (filled circle: scored here, open square: released scores;
circle and diamond for the two rules), so no mark relies on colour alone.
"""

from __future__ import annotations

import io
import re

from gece.report.forest import OVERALL, PANELS, PART_TITLES, Point
from gece.report.identity import FIRST_DIFF_GROUPS
from gece.report.plots import plt
from gece.report.protocol import Protocol

SCORED = "#0072B2"  # Okabe-Ito blue: runs scored here
RELEASED = "#E69F00"  # Okabe-Ito orange: the authors' released scores
RULE_COLORS = ("#0072B2", "#D55E00")  # the first and second rule (sentence, shared): blue, vermillion
RULE_MARKERS = ("o", "D")
PALETTE = (SCORED, RELEASED, *RULE_COLORS)  # every data colour (tests/test_answer_plots.py: colour-blind check)
LINE = "#555555"
WIDTH_IN = 9.2  # inches; SVG at 72 per inch: about 660 px, fits a laptop screen beside nothing else
ROW_IN = 0.25  # inches per run
# the SVG's fonts: matplotlib lays the text out in DejaVu Sans; Verdana has about its metrics where DejaVu is missing
FONTS = "'DejaVu Sans', Verdana, sans-serif"


def svg_id(figure: str, panel: str, row: int, part: str) -> str:
    """The SVG id of a plotted value (``part`` ``point`` or ``ci``)."""
    return f"{figure}-{panel}-{row}-{part}"


def _svg(fig, name: str) -> str:
    """The figure as an inline SVG element: no XML declaration or doctype, no date, ids salted by ``name``."""
    buf = io.StringIO()
    with plt.rc_context({"svg.hashsalt": name, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"^<\?xml[^>]*>\s*<!DOCTYPE[^>]*>\s*", "", text, flags=re.S)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r"font-family: [^;\"]*", f"font-family: {FONTS}", text)
    text = re.sub(r' id="(?:figure|patch|axes|matplotlib\.axis|[xy]tick|line2d|text|legend)_\d+"', "", text)
    text = re.sub(r' transform="rotate\(-?0 [^"]*\)"', "", text)  # the ticks' null rotation
    text = re.sub(r'\b(d|x|y|transform|points)="([^"]*)"', _short_numbers, text)
    text = re.sub(r"\s*\n\s*", "\n", text).replace("\nL ", " L ").replace("\nz\n", " z")
    return re.sub(r"<g>\n(<use [^>]*/>)\n</g>", r"\1", text)  # an unclipped marker's empty group


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


def calibration_svg(name: str, b: str, points: list[Point], protocol: Protocol | None = None) -> str:
    """Benchmark ``b``'s forest plot: one panel per metric of :data:`PANELS` (a ``protocol``'s panels, by their
    labels), one row per run (sorted by ECE, the lowest on top; by the protocol's first panel, the best on top), the
    value with its 95% interval, the compact letter display at the right of each panel. A panel where higher is
    better (a skill) draws its 0, the skill of a coin, dashed, and may go below it."""
    models = list(dict.fromkeys(p.model for p in points))
    panels = PANELS if protocol is None else {k: protocol.metric[k].label for k in protocol.panels}
    higher = set() if protocol is None else {k for k in protocol.panels if protocol.metric[k].worse == "low"}
    fig, axes = plt.subplots(
        1, len(panels), figsize=(WIDTH_IN, ROW_IN * len(models) + 0.95), sharey=True, layout="constrained"
    )
    for ax, key in zip(axes, panels, strict=True):
        for row, p in enumerate(points):
            if p.panel != key:
                continue
            color = RELEASED if p.released else SCORED
            y = models.index(p.model)
            _point(ax, name, key, row, p, y, color, "s" if p.released else "o", not p.released)
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
        better = "higher" if key in higher else "lower"
        ax.set_title(f"{panels[key]} ({better} is better)  · letters: Holm groups", fontsize=9, loc="left")
        if key in higher:
            ax.axvline(0, color=LINE, linewidth=1, linestyle="--", zorder=1)
        else:
            ax.set_xlim(left=0)
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
    fig.suptitle(
        f"{b}: {question}, and which are tied after Holm?",
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
