"""The prompt ablation on the page and in ``reports/summary.json`` (docs/metrics.md, "Prompts"): from each model's
report (:class:`gece.io.schemas.prompt_reports.PromptAblationReport`), the figure's points, its finding and the
summary's keys.

The figure (:func:`prompt_points`, drawn by :func:`gece.report.answer_plots.prompts_svg`) has one panel per number
it answers for: the change of ECE and of Gender-ECE on the benchmarks whose labels vary (the pronoun-gender reading),
and of the stereotype share on those with y = 1 for every pair (the identity reading: accuracy is that share), one
row per benchmark and one marker per prompt, each with the interval at the level Holm holds its test to over the
prompts (it excludes 0 exactly when the change survives the correction; the marker is filled then). A protocol's
benchmark has numbers of its own: its changes are in the report and the table, not in the figure.

The summary (:func:`summary`), per model and prompt, a bounded number of keys whatever the number of benchmarks:
the median change of each number over the benchmarks it is drawn for (``<key>_change_median``) and how many of them
change significantly after Holm, upwards and downwards (``<key>_up_holm``, ``<key>_down_holm``), and ``benchmarks``,
how many were compared.
"""

from __future__ import annotations

import numpy as np

from gece.io.paths import report_layout
from gece.report.cells import ReportData, ptr
from gece.report.points import HOLM_CI, Point

# the figure's panels: the report's number -> (the reading of the benchmarks it is drawn for, its summary key, label)
PANELS: dict[str, tuple[str, str, str]] = {
    "ece": ("pronoun_gender", "ece", "ECE"),
    "gender_ece": ("pronoun_gender", "gender_ece", "Gender-ECE"),
    "accuracy": ("identity", "stereotype_share", "stereotype share"),
}
KIND = "prompts"  # the first-screen figure's kind


def prompt_points(data: ReportData, model: str) -> list[Point]:
    """The figure's points of ``model`` (module docstring), benchmarks in page order, prompts in params order."""
    rep = data.prompts[model]
    file = report_layout.prompts_file(model)
    out = []
    for b in [b for b in data.benchmarks if b in rep["benchmarks"]]:
        entry = rep["benchmarks"][b]
        for key, (reading, _, _) in PANELS.items():
            if entry["reading"] != reading or key not in entry["metrics"]:
                continue
            for prompt in rep["prompts"]:
                cell = entry["metrics"][key][prompt]
                if cell["change"] is None:
                    continue
                lo, hi = cell["change_ci_low_holm"], cell["change_ci_high_holm"]
                out.append(
                    Point(
                        b,
                        key,
                        model,
                        prompt,
                        float(cell["change"]),
                        None if lo is None else float(lo),
                        None if hi is None else float(hi),
                        "*" if cell["significant_holm"] else "",
                        False,
                        file,
                        ptr("benchmarks", b, "metrics", key, prompt, "change"),
                        HOLM_CI,
                    )
                )
    return out


def _moved(points: list[Point]) -> tuple[int, int]:
    """How many of ``points`` changed significantly after Holm: (up, down)."""
    real = [p for p in points if p.letters]
    return sum(p.value > 0 for p in real), sum(p.value < 0 for p in real)


def finding(model: str, points: list[Point]) -> str:
    """The figure's finding: per prompt and panel, the median change and how many benchmarks moved after Holm."""
    parts = []
    for prompt in dict.fromkeys(p.rule for p in points):
        said = []
        for key, (_, _, label) in PANELS.items():
            shown = [p for p in points if p.rule == prompt and p.panel == key]
            if shown:
                up, down = _moved(shown)
                median = float(np.median([p.value for p in shown]))
                said.append(f"{label} {median:+.3f} (median of {len(shown)}), up on {up} and down on {down} after Holm")
        parts.append(f"{prompt}: " + "; ".join(said))
    return f"{model} under each prompt vs the bare sentence: " + " | ".join(parts) + "."


def effect(data: ReportData) -> str | None:
    """The findings' line: each model's :func:`finding`; None without a prompt ablation."""
    return " ".join(finding(m, prompt_points(data, m)) for m in sorted(data.prompts)) or None


def summary(data: ReportData) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """``prompts.<model>.<prompt>`` of reports/summary.json (module docstring)."""
    out: dict = {}
    for model in sorted(data.prompts):
        points = prompt_points(data, model)
        rep = data.prompts[model]
        for prompt in rep["prompts"]:
            row: dict[str, float | int | None] = {"benchmarks": len(rep["benchmarks"])}
            for key, (_, name, _) in PANELS.items():
                shown = [p for p in points if p.rule == prompt and p.panel == key]
                up, down = _moved(shown)
                row[f"{name}_change_median"] = float(np.median([p.value for p in shown])) if shown else None
                row[f"{name}_up_holm"], row[f"{name}_down_holm"] = up, down
            out.setdefault(model, {})[prompt] = row
    return out
