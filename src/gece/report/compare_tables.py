"""The model comparison tables: paired differences between two runs on the same pairs.

Per benchmark whose labels vary and metric of :data:`gece.report.forest.PANELS` (on a protocol's benchmark, per
number of its ``panels``: :mod:`gece.report.protocol`), a run × run matrix of
Δ = row − column (runs by ascending value of the metric), each cell marked by the pair's test after Holm
(``significant_holm`` of ``reports/compare/<benchmark>.json``): ▲ the row is significantly higher, ▼ lower, no mark
when not significant; coloured on the page, in bold in both. Markdown holds a matrix of at most
:data:`MATRIX_MARKDOWN_RUNS` runs. Then one table per benchmark listing every pair: the difference of each metric
with its interval, p-value and significance marks, and a note on the bootstrap and its power. A metric is headed by its
metric table's label as the benchmark's reading shows it (:attr:`gece.report.readings.Reading.shown`: with
constant y, what it measures there, the stereotype share, 1 − mean p), or on a protocol's benchmark by the
protocol's label; one that the reading leaves out (it needs a varying y and has no such name) is left out. Where Holm's
correction makes the verdict (†), the interval at Holm's level follows the 95% one. Two runs that give every pair
the same p (``identical``) are one row saying so.
"""

from __future__ import annotations

from gece.catalog import metric_defs
from gece.io.paths import report_layout
from gece.report.cells import (
    Cell,
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    format_bound,
    format_p,
    pair_sizes,
    ptr,
)
from gece.report.forest import PANELS, calibration_benchmarks
from gece.report.protocol import Protocol, claimed
from gece.report.readings import Reading, bench_title, reading_of
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


def matrix_table(data: ReportData, b: str, key: str, protocol: Protocol | None = None) -> Table | None:
    """Benchmark ``b``'s run × run matrix of Δ ``key`` (module docstring; a ``protocol``'s number, from its block);
    None without comparisons."""
    cells = _pair_cells(data.compare.get(b) or {}, key)
    reps = {m: data.metrics.get((b, m)) or {} for m in data.runs.get(b, [])}
    value = {m: (rep.get(protocol.name) or {} if protocol is not None else rep).get(key) for m, rep in reps.items()}
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
        rows.append(Row([m], row, report_layout.compare_file(b)))
    label = PANELS[key] if protocol is None else protocol.metric[key].label
    return Table(
        f"{bench_title(data, b)}: Δ {label}, row − column",
        ["run"],
        [Column(o, o, None) for o in models],
        rows,
        f"runs by ascending {label}; ▲ / ▼: the row's {label} is significantly higher / lower after Holm; "
        "no mark: not distinguishable",
        markdown=len(models) <= MATRIX_MARKDOWN_RUNS,
    )


def _labels(keys: list[str], reading: Reading, protocol: Protocol | None = None) -> dict[str, str]:
    """metric key -> its column label on this benchmark (those its reading leaves out are not in it; a
    protocol's: its labels)."""
    if protocol is not None:
        return {k: protocol.metric[k].label if k in protocol.metric else metric_defs.label(k) for k in keys}
    return {k: shown[0] for k in keys if (shown := reading.shown(k, metric_defs.label(k), None)) is not None}


def _cell(c: dict, base: tuple) -> Cell:
    holm = ""
    lo, hi = c.get("ci_low_holm"), c.get("ci_high_holm")
    if c["significant"] and lo is not None and hi is not None and (lo, hi) != (c["ci_low"], c["ci_high"]):
        holm = f"; Holm {c['level_holm']:.1%} [{format_bound(lo)}, {format_bound(hi)}]"
    return Cell(
        c["diff"],
        c["ci_low"],
        c["ci_high"],
        note=format_p(c["p_value"]) + holm,
        ref={"value": ptr(*base, "diff"), "low": ptr(*base, "ci_low"), "high": ptr(*base, "ci_high")},
        strong=bool(c["significant"]),
        mark="†" if c["significant_holm"] else "",
    )


def compare_table(data: ReportData) -> TableDoc:
    protocols = claimed(data)
    tables = [t for b in calibration_benchmarks(data) for k in PANELS if (t := matrix_table(data, b, k))]
    tables += [t for b, p in protocols.items() for k in p.panels if (t := matrix_table(data, b, k, p))]
    alpha = None
    for b in data.benchmarks:
        rep = data.compare.get(b)
        if not rep or not rep.get("pairs"):
            continue
        alpha = rep.get("alpha")
        labels = _labels(list(rep["pairs"][0]["metrics"]), reading_of(data, b), protocols.get(b))
        columns = [Column("n", "pairs", None), *(Column(k, f"Δ {label}", None) for k, label in labels.items())]
        rows = []
        for i, pair in enumerate(rep["pairs"]):
            n = Cell(pair["n"], ref={"value": ptr("pairs", i, "n")})
            if pair.get("identical"):
                same = Cell(
                    "the same p on every pair: one run, scored twice", ref={"value": ptr("pairs", i, "identical")}
                )
                rest = [Cell() for _ in range(len(labels) - 1)]
                rows.append(Row([pair["a"], pair["b"]], [n, same, *rest], report_layout.compare_file(b)))
                continue
            cells = [_cell(pair["metrics"][k], ("pairs", i, "metrics", k)) for k in labels]
            rows.append(Row([pair["a"], pair["b"]], [n, *cells], report_layout.compare_file(b)))
        note = (
            f"{pair_sizes(rep)}, paired bootstrap of {'clusters' if rep.get('n_clusters') else 'pairs'} with "
            f"{rep['draws']} resamples (seed {rep['seed']}), "
            f"{rep['level']:.0%} bias-corrected intervals{power_note(rep, labels)}"
        )
        tables.append(Table(bench_title(data, b), ["A", "B"], columns, rows, note))
    return TableDoc(
        "compare",
        "Model comparison",
        "First, per benchmark whose labels vary, a run × run matrix of the difference in ECE and in Gender-ECE "
        "(on a benchmark a protocol measures, in the numbers its figure draws) "
        "(row − column; ▲ / ▼ and colour: significant after Holm; markdown holds matrices of at most "
        f"{MATRIX_MARKDOWN_RUNS} runs). Then every pair: "
        "paired differences A − B on the pairs both runs score, their number under pairs "
        "(`reports/compare/<benchmark>.json`): point difference, "
        "bias-corrected percentile interval and two-sided p-value. The minimum detectable difference in each "
        "table's note is the smallest true difference the paired test finds with 80% power at α = 0.05, from the "
        "spread of the paired bootstrap differences (docs/statistics.md), over the pairs of distinct runs: "
        "differences below it are likely to go unnoticed on this benchmark. For the error metrics a negative "
        "difference means A is better calibrated; for human alignment, positive means A agrees more with the "
        "human judgements. On a benchmark with the same label for every pair (y = 1, the identity protocol) no "
        "column is calibration: Δ stereotype share is how much more often A prefers the stereotypical sentence, "
        "Δ 1 − mean p how much further A is from always preferring it; neither end is better in itself, a share "
        "nearer 0.5 is less biased. On a benchmark a protocol measures, the columns are the protocol's own numbers "
        "(its page says which end is better). "
        f"**Bold**: significant at α = {alpha if alpha is not None else 0.05}; †: still significant after Holm's "
        "correction over the metrics compared for the pair (four; a protocol's own); beside a bold difference, the "
        "interval at the level Holm's "
        "correction tests it at (Holm x% [l, h]), which excludes 0 exactly when † is there. No worst or best "
        "value is marked: a difference "
        "has no worse end.",
        tables,
        "" if tables else "no model comparison reports (reports/compare/) found",
    )


def agreement_table(data: ReportData) -> TableDoc | None:
    """The engine agreement of every run with ``checked_against`` (the ``agreement`` of
    ``reports/compare/<benchmark>.json``, :mod:`gece.stats.engine_agreement`); None when no run has one."""
    tables = []
    for b in data.benchmarks:
        entries = (data.compare.get(b) or {}).get("agreement") or []
        if not entries:
            continue
        columns = [
            Column("n", "pairs", None),
            Column("max_abs_lld_diff", "largest |Δ log-likelihood difference|", None, significant=2),
            Column("flips", "verdicts flipped (p > 0.5)", None),
            Column("diff", "Δ ECE or Δ stereotype share", None, significant=2),
        ]
        rows = []
        for i, e in enumerate(entries):
            base = ("agreement", i)
            cells = [Cell(e[k], ref={"value": ptr(*base, k)}) for k in ("n", "max_abs_lld_diff", "flips")]
            cells.append(
                Cell(
                    e["diff"],
                    e["ci_low"],
                    e["ci_high"],
                    note=f"{metric_defs.label(e['metric']) if e['metric'] == 'ece' else 'stereotype share'}, "
                    f"{format_p(e['p_value'])}",
                    ref={"value": ptr(*base, "diff"), "low": ptr(*base, "ci_low"), "high": ptr(*base, "ci_high")},
                )
            )
            rows.append(Row([e["run"], e["against"]], cells, report_layout.compare_file(b)))
        tables.append(Table(bench_title(data, b), ["run", "checked against"], columns, rows))
    if not tables:
        return None
    return TableDoc(
        "agreement",
        "Engine agreement",
        "Each run whose registry entry is `checked_against` another run of the same model (gece's exact engine "
        "and lm-eval, or two lm-eval settings), on the pairs both score: the largest change of one pair's "
        "log-likelihood difference, the pairs whose verdict (p > 0.5) flips, and the change run − against of the "
        "ECE (the stereotype share where every pair has the same label) with its paired bootstrap interval "
        "(docs/lmeval.md, 'Engine agreement'). All zero: the engines agree on every conclusion drawn from the pairs. "
        "The changes are written to two significant digits (1.2e-05 is 0.000012), to be read against the tolerance of "
        "1e-3 in a pair's log-likelihood difference.",
        tables,
    )
