"""Figures (matplotlib, Agg backend). Functions take report data and return a Figure; the
stages save them with ``gece.io.files.readers.write_figure``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

# text.parse_math off: a name with '$' in it (data) is drawn as the text it is, never as mathtext
plt.rcParams.update({"figure.max_open_warning": 0, "svg.hashsalt": "gece", "text.parse_math": False})


def sample_size_figure(report: dict, title: str) -> Figure:
    """Mean ± std of ECE, Gender-ECE and smooth ECE over random subsets against the subset size N,
    with the full-data values as dashed lines."""
    fig, ax = plt.subplots(figsize=(5.2, 3.6), layout="constrained")
    sizes = report["sizes"]
    ns = [r["n"] for r in sizes]
    for key, label, color in (
        ("ece", "ECE", "tab:blue"),
        ("gender_ece", "Gender-ECE", "tab:orange"),
        ("ece_smooth", "smooth ECE", "tab:green"),
    ):
        rows = [(r["n"], r[f"{key}_mean"], r[f"{key}_std"]) for r in sizes if r[f"{key}_mean"] is not None]
        if rows:
            x, m, s = zip(*rows, strict=True)
            ax.errorbar(x, m, yerr=s, marker="o", capsize=3, color=color, label=f"{label} (mean ± std)")
        full = report["full"][key]
        if full is not None:
            ax.axhline(full, color=color, linestyle="--", linewidth=1, label=f"{label}, all {report['full']['n']}")
    ax.set_xlabel("pairs in the subset (N)")
    ax.set_ylabel("calibration error")
    ax.set_xticks(ns)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    return fig


# ------------------------------------------------------------------ reliability diagrams
# The authors' style (as in their published figures): blue per-bin accuracy
# bars ("Outputs"), pink hatched bars from the accuracy to the diagonal at the bin centre
# ("Calibration Gap", drawn over the blue bar where the accuracy is above the centre), a dashed
# diagonal ("Perfect Calibration"). Colours sampled from their PNGs.
OUTPUT_COLOR = "#5B8FA8"
GAP_COLOR = "#FF9898"
GAP_ALPHA = 0.8
DIAGONAL_COLOR = "#444444"
COUNT_COLOR = "#A9B4BC"
# the legend's words (diagonal, bars, gap) by the metric the diagram shows: on a benchmark with constant y
# (y = 1) the bars are all 1 and the gap is 1 − p, no calibration
LEGENDS = {
    "ECE": ("Perfect Calibration", "Outputs", "Calibration Gap"),
    "1 − mean p": ("mean p = share with y = 1", "share with y = 1 (all)", "1 − p (gap to y = 1)"),
}


@dataclass(frozen=True)
class Bars:
    """The bars of one reliability diagram, derived from its bin records (``reports/bins``).

    ``accuracy`` is the bar height, 0 for an empty bin (``filled`` false), which gets no bar;
    the gap bar of a filled bin spans from ``accuracy`` to ``center`` (the diagonal at the
    bin centre, as the paper draws it).
    """

    left: np.ndarray
    right: np.ndarray
    count: np.ndarray
    accuracy: np.ndarray
    filled: np.ndarray

    @property
    def width(self) -> np.ndarray:
        return self.right - self.left

    @property
    def center(self) -> np.ndarray:
        return (self.left + self.right) / 2


def reliability_bars(bins: list[dict]) -> Bars:
    rows = sorted(bins, key=lambda r: r["bin"])
    count = np.array([r["count"] for r in rows], dtype=np.int64)
    filled = np.array([r["count"] > 0 and r["accuracy"] is not None for r in rows], dtype=bool)
    return Bars(
        left=np.array([r["lower"] for r in rows], dtype=np.float64),
        right=np.array([r["upper"] for r in rows], dtype=np.float64),
        count=count,
        accuracy=np.array([r["accuracy"] if f else 0.0 for r, f in zip(rows, filled, strict=True)], dtype=np.float64),
        filled=filled,
    )


def bins_ece(bins: list[dict]) -> float | None:
    """Σ |B_m|/n · |acc_m − conf_m| over the bin records (the ECE the diagram shows). The sum is ``math.fsum``
    (correctly rounded): the built-in ``sum`` of floats is compensated from Python 3.12 on, so its last bits
    depend on the Python version."""
    n = sum(r["count"] for r in bins)
    if n == 0:
        return None
    return math.fsum(r["count"] * abs(r["gap"]) for r in bins if r["count"] > 0 and r["gap"] is not None) / n


def draw_reliability(
    ax: Axes,
    bins: list[dict],
    *,
    title: str | None = None,
    legend: bool = True,
    fontsize: float = 9,
    hist_ax: Axes | None = None,
    count_labels: bool = False,
    metric: str = "ECE",
) -> Bars:
    """Draw one paper-style reliability diagram on ``ax`` (and the bin counts on ``hist_ax``); the legend's words
    are those of ``metric`` (:data:`LEGENDS`)."""
    diagonal, outputs, gap = LEGENDS[metric]
    b = reliability_bars(bins)
    f = b.filled
    ax.bar(
        b.left[f],
        b.accuracy[f],
        width=b.width[f],
        align="edge",
        color=OUTPUT_COLOR,
        edgecolor="black",
        linewidth=0.8,
        label=outputs,
        gid="outputs",
        zorder=2,
    )
    ax.bar(
        b.left[f],
        (b.center - b.accuracy)[f],
        bottom=b.accuracy[f],
        width=b.width[f],
        align="edge",
        color=GAP_COLOR,
        alpha=GAP_ALPHA,
        hatch="//",
        edgecolor="black",
        linewidth=0.8,
        label=gap,
        gid="gap",
        zorder=3,
    )
    ax.plot([0, 1], [0, 1], linestyle="--", color=DIAGONAL_COLOR, linewidth=1.6, label=diagonal, zorder=4)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(0, 1.05)
    ax.grid(linestyle="--", alpha=0.35, zorder=0)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=fontsize * 0.9)
    if title:
        ax.set_title(title, fontsize=fontsize)
    if legend:
        handles, labels = ax.get_legend_handles_labels()
        order = [labels.index(x) for x in (diagonal, outputs, gap) if x in labels]
        ax.legend(
            [handles[i] for i in order],
            [labels[i] for i in order],
            loc="upper left",
            fontsize=fontsize * 0.8,
            framealpha=0.9,
        )
    if hist_ax is not None:
        hist_ax.bar(
            b.left,
            b.count,
            width=b.width,
            align="edge",
            color=COUNT_COLOR,
            edgecolor="black",
            linewidth=0.5,
            gid="count",
            zorder=2,
        )
        hist_ax.set_xlim(ax.get_xlim())
        if count_labels:
            for x, c in zip(b.center, b.count, strict=True):
                hist_ax.text(x, c, str(int(c)), ha="center", va="bottom", fontsize=fontsize * 0.65, color="#333333")
        hist_ax.set_ylim(0, max(int(b.count.max()) if b.count.size else 0, 1) * (1.3 if count_labels else 1.1))
        hist_ax.grid(axis="y", linestyle="--", alpha=0.35, zorder=0)
        hist_ax.set_ylabel("pairs", fontsize=fontsize * 0.85)
        hist_ax.set_xlabel("Confidence", fontsize=fontsize)
        hist_ax.tick_params(labelsize=fontsize * 0.8)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel("Confidence", fontsize=fontsize)
    return b


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def reliability_title(model: str, ece: float | None, n: int | None = None, metric: str = "ECE") -> str:
    """``model``, then ``metric`` and its value (``"1 − mean p"`` where y is constant: no calibration is shown)."""
    return f"{model}\n{metric} {_fmt(ece)}" + (f" · n = {n}" if n is not None else "")


def reliability_figure(
    bins: list[dict], model: str, ece: float | None, subtitle: str = "", metric: str = "ECE"
) -> Figure:
    """One diagram with the count histogram under it; the title names the model and its ``metric`` (ECE, or
    1 − mean p on a benchmark with constant y)."""
    fig = plt.figure(figsize=(4.6, 5.4), layout="constrained")
    gs = fig.add_gridspec(2, 1, height_ratios=[4, 1])
    ax = fig.add_subplot(gs[0])
    hist = fig.add_subplot(gs[1], sharex=ax)
    n = sum(r["count"] for r in bins)
    draw_reliability(
        ax,
        bins,
        title=reliability_title(model, ece, n, metric),
        hist_ax=hist,
        fontsize=10,
        count_labels=True,
        metric=metric,
    )
    ax.set_ylabel("Accuracy (share of pairs with y = 1)", fontsize=8.5)
    if subtitle:
        fig.suptitle(subtitle, fontsize=8, color="#555555")
    return fig


def reliability_grid(
    panels: list[tuple[str, list[dict], float | None]], title: str, ncols: int = 5, metric: str = "ECE"
) -> Figure:
    """All models of one benchmark side by side: (model, bins, ``metric``) per panel, counts under each."""
    n = max(len(panels), 1)
    nrows = -(-n // ncols)
    ncols = -(-n // nrows)  # balanced rows: 6 panels as 2 x 3, not 5 + 1
    fig = plt.figure(figsize=(3.0 * ncols, 3.7 * nrows + 0.4), layout="constrained")
    outer = fig.add_gridspec(nrows, ncols)
    for i, (model, bins, ece) in enumerate(panels):
        inner = outer[i // ncols, i % ncols].subgridspec(2, 1, height_ratios=[4, 1])
        ax = fig.add_subplot(inner[0])
        hist = fig.add_subplot(inner[1], sharex=ax)
        draw_reliability(
            ax,
            bins,
            title=reliability_title(model, ece, metric=metric),
            legend=i == 0,
            fontsize=8,
            hist_ax=hist,
            metric=metric,
        )
    fig.suptitle(title, fontsize=11)
    return fig


def calibration_grid(
    models: list[str],
    methods: list[str],
    panels: dict[tuple[str, str], tuple[list[dict] | None, float | None, str]],
    title: str,
) -> Figure:
    """Uncalibrated vs calibrated: one column per model, the first row before calibration and one
    row per method after it. ``panels[(model, method)] = (bins, ECE, status)``; ``method`` is
    ``uncalibrated`` for the first row; a panel without bins says why (its status)."""
    rows = ["uncalibrated", *methods]
    fig, axes = plt.subplots(
        len(rows),
        len(models),
        figsize=(2.2 * len(models) + 0.6, 2.2 * len(rows) + 0.5),
        layout="constrained",
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    for j, model in enumerate(models):
        for i, method in enumerate(rows):
            ax = axes[i][j]
            bins, ece, status = panels.get((model, method), (None, None, "missing"))
            head = f"{model}\n" if i == 0 else ""
            if bins:
                draw_reliability(ax, bins, legend=i == 0 and j == 0, fontsize=7)
                extra = "" if status in ("ok", "") else f" ({status})"
                ax.set_title(f"{head}ECE {_fmt(ece)}{extra}", fontsize=7)
            else:
                ax.set_xlim(-0.05, 1.05)
                ax.set_ylim(0, 1.05)
                ax.text(
                    0.5,
                    0.5,
                    status or "missing",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="#aa0000",
                    transform=ax.transAxes,
                )
                ax.set_title(head.rstrip("\n") or " ", fontsize=7)
            if i < len(rows) - 1:
                ax.set_xlabel("")
            if j == 0:
                ax.set_ylabel("before" if method == "uncalibrated" else f"after: {method}", fontsize=8)
            ax.tick_params(labelsize=6)
    fig.suptitle(title, fontsize=10)
    return fig
