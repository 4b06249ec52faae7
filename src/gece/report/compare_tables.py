"""The model comparison tables: paired differences between two runs on the same pairs.

Per benchmark whose labels vary and metric of :data:`gece.report.forest.PANELS`, a run × run matrix of
Δ = row − column (runs by ascending value of the metric), each cell marked by the pair's test after Holm
(``significant_holm`` of ``reports/compare/<benchmark>.json``): ▲ the row is significantly higher, ▼ lower, no mark
when not significant; coloured on the page, in bold in both. Markdown holds a matrix of at most
:data:`MATRIX_MARKDOWN_RUNS` runs. Then one table per benchmark listing every pair: the difference of each metric
with its interval, p-value and significance marks, and a note on the bootstrap and its power.
"""

from __future__ import annotations

from gece import registry
from gece.io import layout
from gece.report.cells import Cell, Column, ReportData, Row, Table, TableDoc, bench_title, format_p, pair_sizes, ptr
from gece.report.forest import PANELS, calibration_benchmarks
from gece.report.stat_tables import power_note

MATRIX_MARKDOWN_RUNS = 6  # a wider matrix is on the detail page only
TONES = {"higher": "▲", "lower": "▼"}


def _pair_cells(rep: dict, key: str) -> dict[tuple[str, str], tuple[float, bool, str]]:
    """(row, column) -> (Δ = row − column, significant after Holm, JSON pointer of the diff), both orders; the
    pointer only in the report's own order (A − B), whose value the JSON holds."""
    out = {}
    for i, pair in enumerate(rep.get("pairs", [])):
        c = pair["metrics"].get(key) or {}
        if not isinstance(c.get("diff"), int | float):
            continue
        out[(pair["a"], pair["b"])] = (
            c["diff"],
            bool(c.get("significant_holm")),
            ptr("pairs", i, "metrics", key, "diff"),
        )
        out[(pair["b"], pair["a"])] = (-c["diff"], bool(c.get("significant_holm")), "")
    return out


def matrix_table(data: ReportData, b: str, key: str) -> Table | None:
    """Benchmark ``b``'s run × run matrix of Δ ``key`` (module docstring); None without comparisons."""
    cells = _pair_cells(data.compare.get(b) or {}, key)
    value = {m: (data.metrics.get((b, m)) or {}).get(key) for m in data.runs.get(b, [])}
    models = sorted((m for m in value if isinstance(value[m], int | float)), key=lambda m: (value[m], m))
    models = [m for m in models if any((m, o) in cells for o in models)]
    if len(models) < 2:
        return None
    rows = []
    for m in models:
        row = []
        for o in models:
            if (m, o) not in cells:
                row.append(Cell("·" if m == o else None))
                continue
            d, significant, where = cells[(m, o)]
            tone = ("higher" if d > 0 else "lower") if significant else ""
            ref = {"value": where} if where else {}
            row.append(Cell(d, ref=ref, strong=significant, mark=TONES.get(tone, ""), tone=tone))
        rows.append(Row([m], row, layout.compare_file(b)))
    label = PANELS[key]
    return Table(
        f"{bench_title(data, b)}: Δ {label}, row − column",
        ["run"],
        [Column(o, o, None) for o in models],
        rows,
        f"runs by ascending {label}; ▲ / ▼: the row's {label} is significantly higher / lower after Holm; "
        "no mark: not distinguishable",
        markdown=len(models) <= MATRIX_MARKDOWN_RUNS,
    )


def compare_table(data: ReportData) -> TableDoc:
    tables = [t for b in calibration_benchmarks(data) for k in PANELS if (t := matrix_table(data, b, k))]
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
            rows.append(Row([pair["a"], pair["b"]], cells, layout.compare_file(b)))
        note = (
            f"{pair_sizes(rep)}, paired bootstrap of {'clusters' if rep.get('n_clusters') else 'pairs'} with "
            f"{rep['draws']} resamples (seed {rep['seed']}), "
            f"{rep['level']:.0%} bias-corrected intervals{power_note(rep)}"
        )
        tables.append(Table(bench_title(data, b), ["A", "B"], columns, rows, note))
    return TableDoc(
        "compare",
        "Model comparison",
        "First, per benchmark whose labels vary, a run × run matrix of the difference in ECE and in Gender-ECE "
        "(row − column; ▲ / ▼ and colour: significant after Holm; markdown holds matrices of at most "
        f"{MATRIX_MARKDOWN_RUNS} runs). Then every pair: "
        "paired differences A − B on the same pairs (`reports/compare/<benchmark>.json`): point difference, "
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
