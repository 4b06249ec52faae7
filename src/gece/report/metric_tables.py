"""The metric tables: the metric table's columns and the per-benchmark tables of the metrics JSON.

The column specs (:func:`metric_columns`) and the notes on intervals and marks are shared with the ablation
and calibration tables (:mod:`gece.report.ablation_tables`, :mod:`gece.report.calibration_tables`); the
overall, paper, human-gender and grouped tables are one table per benchmark with one row per model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gece.catalog.metric_defs import METRIC, SYNTH_LABELS
from gece.io.paths import report_layout
from gece.report.cells import (
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    mark_worst,
    metric_cell,
)
from gece.report.protocol import claimed
from gece.report.readings import bench_heading, reading_of
from gece.report.stat_tables import TRUE_BRIER, brier_ranking_tables


def metric_columns(
    keys: Iterable[str], ci: Iterable[str] = (), labels: Mapping[str, str] | None = None
) -> list[tuple[str, str, str | None, bool]]:
    """(key, label, worst end, show the interval) per metric, from the metric table; ``labels``
    overrides a label in one table."""
    ci, labels = set(ci), labels or {}
    return [(k, labels.get(k, METRIC[k].label), METRIC[k].worse, k in ci) for k in keys]


# the metrics whose interval the tables show
WITH_CI = ("ece", "gender_ece", "brier", "accuracy")
OVERALL = metric_columns(
    (
        "n",
        "ece",
        "ece_toplabel",
        "mce",
        "macro_ce",
        "ice",
        "brier",
        "gender_ece",
        "ece_male",
        "ece_female",
        "bias_gap",
        "accuracy",
        "pct_stereotype",
    ),
    ci=(*WITH_CI, "pct_stereotype"),
)
# the paper's metric set, its accuracy as the paper names it, and the Brier score beside the paper's "Brier"
PAPER = metric_columns(
    ("ece", "macro_ce", "ice", "brier_paper", "brier", "accuracy", "gender_ece", "bias_gap", "ece_male", "ece_female"),
    labels={"accuracy": "accuracy", "brier": TRUE_BRIER},
)
HUMAN_GENDER = metric_columns(("ece_true_male", "ece_true_female", "cc_ece"))
GROUPED = metric_columns(
    ("ece", "macro_ce", "cc_ece", "gender_ece", "bias_gap", "n_ties"),
    ci=("ece", "gender_ece"),
    labels={"ece": "ECE (ungrouped)"},
)


def _metrics_doc(
    data: ReportData,
    name: str,
    title: str,
    caption: str,
    spec,
    runs_filter=None,
    digits: int = 3,
) -> TableDoc:
    """One table per benchmark of the ``spec`` columns of the metrics JSON, as the benchmark's reading shows the
    table called ``name`` (:attr:`gece.report.readings.Reading.columns`: no table where it shows none)."""
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.metrics and (runs_filter is None or runs_filter(m))]
        if not models:
            continue
        spec_b = reading_of(data, b).columns(name, spec)
        if spec_b is None:
            continue
        protocol = claimed(data).get(b)  # SynthBias's y is no human judgement: its mode's or protocol's labels
        names = SYNTH_LABELS.get(data.synthbias.get(b, ""), {}) | (protocol.labels if protocol is not None else {})
        columns = [Column(key, names.get(key, label), worst, digits) for key, label, worst, *_ in spec_b]
        rows = []
        for m in models:
            obj = data.metrics[(b, m)]
            cells = [metric_cell(obj, key, ci=bool(rest and rest[0])) for key, _, _, *rest in spec_b]
            rows.append(Row([m], cells, report_layout.metrics_file(b, m)))
        tables.append(mark_worst(Table(bench_heading(data, b), ["model"], columns, rows), data.checks))
    return TableDoc(name, title, caption, tables, "" if tables else "no metrics reports found")


MARKS_NOTE = "✓: the best value of its column (lowest error, highest human alignment)."
CI_NOTE = (
    "Values with a 95% bias-corrected bootstrap interval in brackets (1000 resamples of clusters: the pairs, or "
    "the column params.yaml `benchmarks.<b>.cluster` names, WinoQueer's templates) where the "
    "metrics JSON has "
    "one. **Bold ▲**: the worst (highest) value of its column in that table; **bold ▼**: the worst (lowest) "
    f"human alignment; {MARKS_NOTE}"
)


def overall_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data,
        "overall",
        "Overall metrics per benchmark and model",
        "Calibration of the confidence p in sent_more against the human judgement, per benchmark and model "
        f"(`reports/metrics/<benchmark>/<model>.json`). ECE, MCE: paper convention; see the definitions. {CI_NOTE} "
        "On a benchmark with the same label for every pair (y = 1 under the identity protocol) no column is "
        "calibration: its table shows the stereotype share and 1 − mean p (the paper's identity ECE) instead, "
        "unranked (docs/metrics.md, Identity benchmarks)." + (SYNTH_NOTE if data.synthbias else ""),
        OVERALL,
    )


SYNTH_NOTE = (
    " On SynthBias y is no human judgement: on the pronoun protocol (type2) it is the labour-statistics majority "
    "gender of the occupation the pronoun refers to; a benchmark measured by a protocol of its own has its page, "
    "which says what y is there; the accuracy column is named accordingly."
)


def paper_table(data: ReportData) -> TableDoc:
    doc = _metrics_doc(
        data,
        "paper",
        "The paper's numbers, reproduced from the authors' released scores",
        "The authors' metric set, computed from their released per-pair scores (runs `paper-<model>`), to four "
        "decimals. They equal the authors' own `*.summary.txt` to 1e-9 (tests/test_golden.py), including the "
        "**paper's Brier**, mean ((1 − p) − y)², which squares the wrong column and is shown here for reproduction "
        "only (so it is not ranked); the Brier score, mean (p − y)², is beside it. **Bold ▲/▼**: the worst value of "
        "its column; ✓: the best.",
        PAPER,
        runs_filter=data.references.__contains__,
        digits=4,
    )
    ranking, lines = brier_ranking_tables(data)
    if ranking:
        doc.tables += ranking
        doc.caption += (
            " The Brier ranking tables rank the authors' runs by the paper's Brier and by the Brier "
            "score mean (p − y)² (1 = lowest = best); the ranking changes: " + "; ".join(lines) + "."
        )
    return doc


def human_gender_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data,
        "human_gender",
        "ECE by human gender",
        "Paper-convention ECE within the pairs whose human-preferred variant is the male one and within those "
        "where it is the female one; cc-ECE is their mean (class-conditioned ECE). A large difference means the "
        "confidence is calibrated for one gender's stereotype and not the other's. **Bold ▲**: the worst "
        "(highest) value of its column; ✓: the lowest. Benchmarks with the same label for every pair are left out "
        "(no calibration to measure; see the identity table).",
        HUMAN_GENDER,
    )


def grouped_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data,
        "grouped",
        "Grouped-ECE variants",
        "The ungrouped ECE next to the grouped variants: MacroCE (grouped by correct/wrong prediction), cc-ECE "
        "(grouped by the human-preferred gender) and Gender-ECE (grouped by the predicted gender, with the bias "
        f"gap |ECE male − ECE female|). Exact ties (p = 0.5) have no predicted gender and are left out. {CI_NOTE} "
        "Benchmarks with the same label for every pair are left out (no calibration to measure; see the identity "
        "table).",
        GROUPED,
    )
