"""The ablation tables: gender-neutral wording, sample size, binning and special tokens.

One table per model (neutral wording, special tokens) or per benchmark (sample size, binning) of the ablation
reports under ``reports/ablation/``; pure builders like :mod:`gece.report.metric_tables`, whose metric columns
they use.
"""

from __future__ import annotations

from gece.catalog.metric_defs import METRIC
from gece.io.paths import report_layout
from gece.report.cells import (
    Cell,
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    mark_worst,
    metric_cell,
    ptr,
)
from gece.report.metric_tables import CI_NOTE, WITH_CI, metric_columns
from gece.report.readings import READINGS, bench_title, calibrated, reading_of

NEUTRAL = metric_columns(("ece", "gender_ece", "ece_male", "ece_female", "macro_ce", "ice", "brier", "accuracy", "n"))
SPECIAL = metric_columns(
    (
        "ece",
        "ece_toplabel",
        "gender_ece",
        "ece_male",
        "ece_female",
        "brier",
        "accuracy",
        "mean_confidence",
        "share_confidence_over_0_9",
    ),
    ci=WITH_CI,
)


def neutral_table(data: ReportData) -> TableDoc:
    tables = []
    for m in sorted(data.neutral):
        rep = data.neutral[m]
        columns = [Column(k, label, worst) for k, label, worst, _ in NEUTRAL]
        rows = [
            Row([b], [metric_cell(row, k, b, ci=False) for k, _, _, _ in NEUTRAL], report_layout.neutral_file(m))
            for b, row in rep.items()
        ]
        tables.append(mark_worst(Table(m, ["benchmark"], columns, rows)))
    return TableDoc(
        "neutral",
        "Gender-neutral wording",
        "The same model on genderlex (an occupation: *The nurse ...*) and its gender-neutral rewrites "
        "(*The person ...*, *Someone ...*): how much of the miscalibration follows the occupation word "
        "(`reports/ablation/neutral/<model>.json`). **Bold ▲/▼**: the worst value of its column; ✓: the best.",
        tables,
        "" if tables else "no gender-neutral ablation reports (reports/ablation/neutral/) found",
    )


def sample_size_table(data: ReportData) -> TableDoc:
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.sample_size]
        shown = reading_of(data, b).shown  # 1 − mean p, where y is constant, has no worse end
        for key, (label, worst) in ((k, shown(k, METRIC[k].label, METRIC[k].worse)) for k in ("ece", "gender_ece")):
            if not models:
                continue
            sizes = sorted({r["n"] for m in models for r in data.sample_size[(b, m)]["sizes"]})
            columns = [Column("full", "all pairs", worst)] + [Column(f"n{n}", f"N = {n}", worst) for n in sizes]
            rows = []
            for m in models:
                rep = data.sample_size[(b, m)]
                cells = [Cell(rep["full"][key], ref={"value": ptr("full", key)}, note=f"(n = {rep['full']['n']})")]
                by_n = {r["n"]: i for i, r in enumerate(rep["sizes"])}
                for n in sizes:
                    if n not in by_n:
                        cells.append(Cell())
                        continue
                    i = by_n[n]
                    r = rep["sizes"][i]
                    cells.append(
                        Cell(
                            r[f"{key}_mean"],
                            spread=r[f"{key}_std"],
                            ref={"value": ptr("sizes", i, f"{key}_mean"), "spread": ptr("sizes", i, f"{key}_std")},
                        )
                    )
                rows.append(Row([m], cells, report_layout.sample_size_file(b, m)))
            tables.append(mark_worst(Table(f"{b}: {label}", ["model"], columns, rows), data.checks))
    return TableDoc(
        "sample_size",
        "Sample size",
        "Mean ± standard deviation of the metric over random subsets of N pairs drawn without replacement "
        "(`reports/ablation/sample_size/<benchmark>/<model>.json`), next to its value on all pairs. Small "
        "benchmarks give noisy and upward-biased ECE: compare models only where the spread is small against "
        "their difference. Sizes above a benchmark's n are skipped. **Bold ▲**: the highest mean of its column; ✓: the "
        "lowest (not marked on a benchmark with the same label for every pair, whose 1 − mean p has no worse end).",
        tables,
        "" if tables else "no sample-size ablation reports found",
    )


def binning_table(data: ReportData) -> TableDoc:
    tables = []
    for b in calibrated(data):
        models = [m for m in data.runs.get(b, []) if (b, m) in data.binning]
        if not models:
            continue
        keys = [
            (binning, k)
            for binning in ("equal_width", "equal_mass")
            for k in sorted({k for m in models for k in data.binning[(b, m)].get(binning, {})}, key=int)
        ]
        columns = [
            Column(f"{bn}_{k}", f"{'equal-width' if bn == 'equal_width' else 'equal-mass'} M = {k}") for bn, k in keys
        ]
        rows = []
        for m in models:
            rep = data.binning[(b, m)]
            cells = [
                (metric_cell(rep[bn][k], "ece", bn, k, ci=False) if k in rep.get(bn, {}) else Cell()) for bn, k in keys
            ]
            rows.append(Row([m], cells, report_layout.binning_file(b, m)))
        tables.append(mark_worst(Table(bench_title(data, b), ["model"], columns, rows), data.checks))
    return TableDoc(
        "binning",
        "ECE by number and kind of bins",
        "Paper-convention ECE with M equal-width or equal-mass bins "
        "(`reports/ablation/binning/<benchmark>/<model>.json`, which also has Gender-ECE and its parts). "
        "**Bold ▲**: the highest value of its column; ✓: the lowest. Benchmarks with the same label for every pair "
        "(y = 1, the identity protocol) are left out: there every binning gives 1 − mean p.",
        tables,
        "" if tables else "no binning ablation reports found",
    )


def special_tokens_table(data: ReportData) -> TableDoc:
    tables = []
    for m in sorted(data.special_tokens):
        rep = data.special_tokens[m]
        without = data.special_pairs.get(m, "without special tokens")
        for reading in READINGS:
            spec = reading.spec(SPECIAL)
            shown = {b: sides for b, sides in rep.items() if reading_of(data, b) is reading}
            if not shown:
                continue
            columns = [Column(k, label, w) for k, label, w, _ in spec]
            rows, same = [], []
            for b, sides in shown.items():
                if sides.get("with") is not None and sides.get("with") == sides.get("without"):
                    same.append(b)
                for side, name in (("with", m), ("without", without)):
                    if side in sides:
                        rows.append(
                            Row(
                                [b, f"{side} ({name})"],
                                [metric_cell(sides[side], k, b, side, ci=ci) for k, _, _, ci in spec],
                                report_layout.special_tokens_file(m),
                            )
                        )
            heading = f"{m} vs {without}" + (f": {reading.ablation_heading}" if reading.ablation_heading else "")
            note = f"the same metrics with and without on {', '.join(same)}: one run, scored twice" if same else ""
            table = Table(heading, ["benchmark", "special tokens"], columns, rows, note)
            tables.append(mark_worst(table) if reading.calibration else table)
    return TableDoc(
        "special_tokens",
        "Special tokens",
        "The same model scored with the special tokens its tokenizer adds (a BOS token) and without them "
        "(`reports/ablation/special_tokens/<model>.json`); mean confidence is the mean of max(p, 1 − p). "
        f"{CI_NOTE} The benchmarks with the same label for every pair (y = 1, the identity protocol) have a table "
        "of their own: the stereotype share and 1 − mean p, unranked (a share nearer 0.5 is less biased; "
        "neither is calibration or human alignment).",
        tables,
        "" if tables else "no special-token ablation reports (reports/ablation/special_tokens/) found",
    )
