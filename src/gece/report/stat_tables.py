"""Report tables for the statistics (issue 19): the within-model gender-gap test, the Brier
ranking, the small-sample bias and RMSE of every estimator, and the power of comparisons.

Pure builders like those of :mod:`gece.report.metric_tables` (:mod:`gece.report.tables` calls them):
cells keep the JSON pointer of every number they show; derived numbers (ranks, Holm-adjusted p-values) are computed here
from the values they cite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from gece.catalog.metric_defs import ESTIMATORS, GAPS, METRIC
from gece.io.paths import report_layout
from gece.report.cells import (
    POWER_RUNS,
    Cell,
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    format_p,
    mark_worst,
    metric_cell,
    ptr,
)
from gece.report.readings import bench_heading, calibrated
from gece.stats.gap import ALPHA  # the level of the gap tables' marks (Holm over the runs of a benchmark)

TRUE_BRIER = "Brier (p − y)²"  # the Brier score's label where the paper's Brier is beside it
# (key, label, worst end): the metric table's, the groups' ECE labelled by their grouping here
_GAP_LABELS = {
    "ece_male": "ECE male (predicted)",
    "ece_female": "ECE female (predicted)",
    "ece_true_male": "ECE male (human)",
    "ece_true_female": "ECE female (human)",
}
GAP_COLUMNS = [
    (k, _GAP_LABELS.get(k, METRIC[k].label), METRIC[k].worse)
    for k in ("ece_male", "ece_female", "gap_pred", "ece_true_male", "ece_true_female", "gap_true")
]
# the metric table's labels; the binned estimators say so here
ESTIMATOR_LABELS = {k: METRIC[k].label for k in ESTIMATORS} | {
    "ece": "ECE (binned)",
    "gender_ece": "Gender-ECE (binned)",
}


# --------------------------------------------------------------------------- gender gap
def gap_agreement(data: ReportData, runs: Callable[[str], bool] | None = None, alpha: float = ALPHA) -> dict:
    """Bootstrap vs permutation p-values of every gap of the selected runs (default: the reference runs):
    how many tests, how many reach the same decision at ``alpha``, and the largest and median |difference|."""
    selected = runs or data.references.__contains__
    pairs = []
    for (b, m), obj in sorted(data.metrics.items()):
        if not selected(m):
            continue
        for gap in GAPS:
            p, q = obj.get(f"{gap}_p"), obj.get(f"{gap}_p_perm")
            if p is not None and q is not None:
                pairs.append((gap, b, m, p, q))
    out: dict = {"tests": len(pairs)}
    for gap in (None, *GAPS):
        sel = [(p, q) for g, _, _, p, q in pairs if gap is None or g == gap]
        diffs = [abs(p - q) for p, q in sel]
        out[gap or "all"] = {
            "tests": len(sel),
            "agree": sum((p < alpha) == (q < alpha) for p, q in sel),
            "max_diff": max(diffs, default=None),
            "median_diff": float(np.median(diffs)) if diffs else None,
        }
    out["disagree"] = [(g, b, m) for g, b, m, p, q in pairs if (p < alpha) != (q < alpha)]
    return out


def gap_holm(data: ReportData, b: str) -> tuple[list[str], dict[str, list[float | None]]]:
    """The runs of ``b`` with metrics and, per gender gap of :data:`gece.catalog.metric_defs.GAPS`, each run's bootstrap
    p-value adjusted by Holm's method over the benchmark's runs, as its metrics report has it (``<gap>_p_holm``,
    :func:`gece.stats.gap.holm_over_runs`: the † of the gender-gap table; the page's first screen)."""
    models = [m for m in data.runs.get(b, []) if (b, m) in data.metrics]
    return models, {gap: [data.metrics[(b, m)].get(f"{gap}_p_holm") for m in models] for gap in GAPS}


def gender_gap_table(data: ReportData) -> TableDoc:
    tables = []
    for b in calibrated(data):
        models, adjusted = gap_holm(data, b)
        if not models:
            continue
        rows, survivors = [], 0
        for i, m in enumerate(models):
            obj = data.metrics[(b, m)]
            cells = []
            for key, _, _ in GAP_COLUMNS:
                cell = metric_cell(obj, key)
                if key in GAPS:
                    p, perm, adj = obj.get(f"{key}_p"), obj.get(f"{key}_p_perm"), adjusted[key][i]
                    cell.note = f"{format_p(p)}, Holm {format_p(adj)}, perm. {format_p(perm)}"  # format_p says "p = "
                    cell.strong = p is not None and p < ALPHA
                    if adj is not None and adj < ALPHA:
                        cell.mark = "†"
                        survivors += 1
                cells.append(cell)
            rows.append(Row([m], cells, report_layout.metrics_file(b, m)))
        note = (
            f"{survivors} of {2 * len(models)} gaps survive Holm's correction over the {len(models)} runs "
            f"(per grouping) at α = {ALPHA}"
        )
        # the p-values under each gap: the table fits a 1366-px window
        columns = [Column(k, label, worst, note_below=k in GAPS) for k, label, worst in GAP_COLUMNS]
        tables.append(mark_worst(Table(bench_heading(data, b), ["model"], columns, rows, note), data.checks))
    agree = gap_agreement(data)
    summary = ""
    if agree["tests"]:
        a = agree["all"]
        summary = (
            f" On the paper runs the permutation test reaches the bootstrap test's decision at α = {ALPHA} in "
            f"{a['agree']} of {a['tests']} gaps (predicted grouping: {agree['gap_pred']['agree']} of "
            f"{agree['gap_pred']['tests']}; human grouping: {agree['gap_true']['agree']} of "
            f"{agree['gap_true']['tests']}); the p-values differ by {a['median_diff']:.3f} in the median and "
            f"by at most {a['max_diff']:.3f}. Disagreements: "
            + (
                ", ".join(
                    f"{m} on {b} ({'predicted' if g == 'gap_pred' else 'human'})" for g, b, m in agree["disagree"]
                )
                or "none"
            )
            + ". They arise where the predicted groups differ much in size: binned ECE is inflated more in "
            "the smaller group, which the permutation null includes and the bootstrap test does not "
            "(docs/statistics.md)."
        )
    return TableDoc(
        "gender_gap",
        "Gender gap within each model (Table 3 with a test)",
        "ECE within the pairs predicted male and predicted female (the parts of Gender-ECE) and within the pairs "
        "whose human-preferred variant is male or female (the parts of cc-ECE), each with its 95% bias-corrected "
        "bootstrap interval, and the signed gap ECE female − ECE male with its interval and two-sided p-values: "
        "the bootstrap test (p), the same adjusted by Holm's method over the runs of the table for that grouping "
        f"(Holm) and the permutation test that shuffles the gender groups (perm.). **Bold**: p < {ALPHA}; †: the "
        f"gap survives Holm's correction. **Bold ▲**: the worst value of its column. Benchmarks with the same label "
        "for every pair (y = 1, the identity protocol) are left out: their groups' numbers are 1 − mean p, no "
        f"calibration (the identity table splits them).{summary}",
        tables,
        "" if tables else "no metrics reports found",
    )


# ------------------------------------------------------------------------- Brier ranking
def _ranks(values: list[float | None]) -> list[int | None]:
    """1 = lowest (best); ties share the better rank; None stays None."""
    nums = sorted(v for v in values if v is not None)
    return [None if v is None else 1 + nums.index(v) for v in values]


def brier_ranking_tables(data: ReportData) -> tuple[list[Table], list[str]]:
    """Per paper benchmark: the paper runs ranked by the paper's Brier and by the Brier score;
    and one line per benchmark naming the runs whose rank changes."""
    tables, lines = [], []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if m in data.references and (b, m) in data.metrics]
        if len(models) < 2:
            continue
        paper = [data.metrics[(b, m)].get("brier_paper") for m in models]
        right = [data.metrics[(b, m)].get("brier") for m in models]
        r_paper, r_right = _ranks(paper), _ranks(right)
        rows, moved = [], []
        for m, rp, rr in zip(models, r_paper, r_right, strict=True):
            obj = data.metrics[(b, m)]
            change = "–" if rp is None or rr is None else "same" if rp == rr else f"{rp} → {rr}"
            if rp is not None and rr is not None and rp != rr:
                moved.append(f"{m} {rp} → {rr}")
            rows.append(
                Row(
                    [m],
                    [
                        Cell(obj.get("brier_paper"), ref={"value": ptr("brier_paper")}),
                        Cell(str(rp)),
                        Cell(obj.get("brier"), ref={"value": ptr("brier")}),
                        Cell(str(rr)),
                        Cell(change),
                    ],
                    report_layout.metrics_file(b, m),
                )
            )
        columns = [
            Column("brier_paper", METRIC["brier_paper"].label, None, 4),
            Column("rank_paper", "rank", None),
            Column("brier", TRUE_BRIER, None, 4),
            Column("rank", "rank", None),
            Column("change", "rank change", None),
        ]
        note = f"rank changes: {'; '.join(moved) if moved else 'none'}"
        tables.append(Table(f"{b}: Brier ranking (1 = best)", ["model"], columns, rows, note))
        lines.append(f"{b}: {'; '.join(moved) if moved else 'no rank changes'}")
    return tables, lines


# ---------------------------------------------------------------- estimators at small N
def estimator_table(data: ReportData) -> TableDoc:
    tables = []
    for b in calibrated(data):
        models = [m for m in data.runs.get(b, []) if (b, m) in data.sample_size]
        if not models:
            continue
        sizes = sorted({r["n"] for m in models for r in data.sample_size[(b, m)]["sizes"]})
        if not sizes:
            continue
        n = sizes[0]
        columns = [Column(k, ESTIMATOR_LABELS[k]) for k in ESTIMATORS]
        rows = []
        for m in models:
            rep = data.sample_size[(b, m)]
            by_n = {r["n"]: i for i, r in enumerate(rep["sizes"])}
            if n not in by_n:
                continue
            i = by_n[n]
            r = rep["sizes"][i]
            cells = []
            for k in ESTIMATORS:
                bias, std = r.get(f"{k}_bias"), r.get(f"{k}_std")
                note = "" if bias is None or std is None else f"(bias {bias:+.3f}, sd {std:.3f})"
                cells.append(Cell(r.get(f"{k}_rmse"), note=note, ref={"value": ptr("sizes", i, f"{k}_rmse")}))
            rows.append(Row([m], cells, report_layout.sample_size_file(b, m)))
        if rows:
            tables.append(
                mark_worst(Table(f"{b}: N = {n} of {rep['full']['n']} pairs", ["model"], columns, rows), data.checks)
            )
    return TableDoc(
        "estimators",
        "Small-sample error of each estimator",
        "Root mean squared error of each calibration-error estimator on random subsets of the smallest sample "
        "size, against the same estimator on all pairs of the run (`<key>_rmse` in "
        "`reports/ablation/sample_size/<benchmark>/<model>.json`), with its bias (mean − full-data value) and "
        "standard deviation over the subsets: RMSE² = bias² + sd². Binned ECE and Gender-ECE are inflated on "
        "small samples (positive bias); the debiased L2 estimator (Kumar et al. 2019) removes most of the bias "
        "but spreads more; smooth ECE (Błasiok & Nakkiran 2023) sits between. **Bold ▲**: the worst (highest) "
        "RMSE of its column. Benchmarks with the same label for every pair (y = 1, the identity protocol) are left "
        "out: there each estimator measures 1 − mean p or a transform of it, no calibration error.",
        tables,
        "" if tables else "no sample-size ablation reports found",
    )


def mean_rmse(data: ReportData, runs: Callable[[str], bool] | None = None) -> dict[str, float | None]:
    """Mean RMSE of each estimator at each run's smallest subset size, over the selected runs (default: the
    reference runs)."""
    selected = runs or data.references.__contains__
    out = {}
    for k in ESTIMATORS:
        vals = []
        for (_b, m), rep in data.sample_size.items():
            if selected(m) and rep["sizes"]:
                v = min(rep["sizes"], key=lambda r: r["n"]).get(f"{k}_rmse")
                if v is not None:
                    vals.append(v)
        out[k] = float(np.mean(vals)) if vals else None
    return out


# ------------------------------------------------------------------------------- power
def power_note(rep: dict, labels: Mapping[str, str] | None = None) -> str:
    """The compare table's line on power: the minimum detectable difference per metric, each under its label in
    ``labels`` (the column's)."""
    pw = rep.get("power")
    if not pw:
        return ""
    labels = labels or {}
    parts = [
        f"{labels.get(k, k)} {v['median']:.3f} ({v['min']:.3f}–{v['max']:.3f})"
        for k, v in pw["mde"].items()
        if v.get("median") is not None
    ]
    return (
        f"; minimum detectable difference at {pw['level']:.0%} power, α = {rep['alpha']} (median and range "
        f"over {pw['pairs']} pairs of {POWER_RUNS[pw['runs']]}): " + ", ".join(parts)
    )
