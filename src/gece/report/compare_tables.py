"""The model comparison table: paired differences between two runs on the same pairs.

One table per benchmark of ``reports/compare/<benchmark>.json``: the difference of each metric with its
interval, p-value and significance marks, and a note on the bootstrap and its power.
"""

from __future__ import annotations

from gece import registry
from gece.io import report_layout
from gece.report.cells import Cell, Column, ReportData, Row, Table, TableDoc, bench_title, format_p, pair_sizes, ptr
from gece.report.stat_tables import power_note


def compare_table(data: ReportData) -> TableDoc:
    tables = []
    alpha = None
    for b in data.benchmarks:
        rep = data.compare.get(b)
        if not rep or not rep.get("pairs"):
            continue
        alpha = rep.get("alpha")
        keys = list(rep["pairs"][0]["metrics"])
        columns = [Column(k, f"Δ {registry.label(k)}", None) for k in keys]
        rows = []
        for i, pair in enumerate(rep["pairs"]):
            cells = []
            for k in keys:
                c = pair["metrics"][k]
                base = ("pairs", i, "metrics", k)
                cells.append(
                    Cell(
                        c["diff"],
                        c["ci_low"],
                        c["ci_high"],
                        note=format_p(c["p_value"]),
                        ref={"value": ptr(*base, "diff"), "low": ptr(*base, "ci_low"), "high": ptr(*base, "ci_high")},
                        strong=bool(c["significant"]),
                        mark="†" if c["significant_holm"] else "",
                    )
                )
            rows.append(Row([pair["a"], pair["b"]], cells, report_layout.compare_file(b)))
        note = (
            f"{pair_sizes(rep)}, paired bootstrap of {'clusters' if rep.get('n_clusters') else 'pairs'} with "
            f"{rep['draws']} resamples (seed {rep['seed']}), "
            f"{rep['level']:.0%} bias-corrected intervals{power_note(rep)}"
        )
        tables.append(Table(bench_title(data, b), ["A", "B"], columns, rows, note))
    return TableDoc(
        "compare",
        "Model comparison",
        "Paired differences A − B on the same pairs (`reports/compare/<benchmark>.json`): point difference, "
        "bias-corrected percentile interval and two-sided p-value. The minimum detectable difference in each "
        "table's note is the smallest true difference the paired test finds with 80% power at α = 0.05, from the "
        "spread of the paired bootstrap differences (docs/statistics.md): differences below it are likely to go "
        "unnoticed on this benchmark. For the error metrics a negative difference means A is "
        "better calibrated; for human alignment, positive means A agrees more with the human judgements. "
        f"**Bold**: significant at α = {alpha if alpha is not None else 0.05}; †: still significant after Holm's "
        "correction over the four metrics of the pair. No worst or best value is marked: a difference has no worse "
        "end.",
        tables,
        "" if tables else "no model comparison reports (reports/compare/) found",
    )
