"""Figures (matplotlib, Agg backend). Functions take report data and return a Figure; the
stages save them with ``schemas.write_figure``."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

plt.rcParams.update({"figure.max_open_warning": 0, "svg.hashsalt": "gece"})


def sample_size_figure(report: dict, title: str) -> Figure:
    """Mean ± std of ECE and Gender-ECE over random subsets against the subset size N,
    with the full-data values as dashed lines."""
    fig, ax = plt.subplots(figsize=(5.2, 3.6), layout="constrained")
    sizes = report["sizes"]
    ns = [r["n"] for r in sizes]
    for key, label, color in (("ece", "ECE", "tab:blue"), ("gender_ece", "Gender-ECE", "tab:orange")):
        rows = [(r["n"], r[f"{key}_mean"], r[f"{key}_std"]) for r in sizes if r[f"{key}_mean"] is not None]
        if rows:
            x, m, s = zip(*rows)
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
