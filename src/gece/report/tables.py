"""The report's tables: the table builders and the numbers they show.

The table builders turn the JSON reports (a :class:`ReportData`) into rows of cells that remember
where each number came from (file and JSON pointer); :mod:`gece.report.markdown` and
:mod:`gece.report.html` both render those rows, so the two never disagree and a test can check
every value against its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from gece import registry
from gece.io import layout
from gece.io.readers import flatten
from gece.registry import METRIC, ONE_LABEL
from gece.report.annotations import annotations_doc
from gece.report.cells import (
    IDENTITY_HEADING,
    Cell,
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    bench_heading,
    constant_y,
    format_p,
    mark_worst,
    metric_cell,
    pair_sizes,
    ptr,
    shown_text,
)
from gece.report.group_tables import groups_doc
from gece.report.identity import LABEL as IDENTITY_LABEL
from gece.report.identity import OVERALL_COLUMNS, identity_doc
from gece.report.stat_tables import brier_ranking_tables, estimator_table, gender_gap_table, power_note

# Everything here is pure: the report stage (:mod:`gece.pipeline.report`) reads the JSON files into a
# ``ReportData``, draws the figures, and writes what these functions return. A row's source is relative to
# the reports directory (:mod:`gece.io.layout`), the same string the stage reads from (so a test can check
# every value against its file).

PROTOCOLS = {"split": "held-out split", "crossfit": "cross-fitting"}


# ------------------------------------------------------------------ the table builders
def _columns(
    keys: Iterable[str], ci: Iterable[str] = (), labels: Mapping[str, str] | None = None
) -> list[tuple[str, str, str | None, bool]]:
    """(key, label, worst end, show the interval) per metric, from the metric registry; ``labels``
    overrides a label in one table."""
    ci, labels = set(ci), labels or {}
    return [(k, labels.get(k, METRIC[k].label), METRIC[k].worse, k in ci) for k in keys]


# the metrics whose interval the tables show
WITH_CI = ("ece", "gender_ece", "brier", "accuracy")
OVERALL = _columns(
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
# the paper's metric set, its accuracy as the paper names it
PAPER = _columns(
    ("ece", "macro_ce", "ice", "brier_paper", "accuracy", "gender_ece", "bias_gap", "ece_male", "ece_female"),
    labels={"accuracy": "accuracy"},
)
# the overall table's columns on a benchmark with constant y (gece.report.identity: its ECE is 1 − mean p)
IDENTITY_OVERALL = [(k, label, None, ci) for k, label, ci in OVERALL_COLUMNS]
HUMAN_GENDER = _columns(("ece_true_male", "ece_true_female", "cc_ece"))
GROUPED = _columns(
    ("ece", "macro_ce", "cc_ece", "gender_ece", "bias_gap", "n_ties"),
    ci=("ece", "gender_ece"),
    labels={"ece": "ECE (ungrouped)"},
)
NEUTRAL = _columns(("ece", "gender_ece", "ece_male", "ece_female", "macro_ce", "ice", "brier", "accuracy", "n"))
CALIBRATION = _columns(("ece", "ece_toplabel", "gender_ece", "ece_male", "ece_female", "brier", "accuracy"), ci=WITH_CI)
SPECIAL = _columns(
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


# the compare table's column labels: its accuracy as in the paper's set
def _metrics_doc(
    data: ReportData,
    name: str,
    title: str,
    caption: str,
    spec,
    runs_filter=None,
    digits: int = 3,
    identity_spec=None,
) -> TableDoc:
    """One table per benchmark of the ``spec`` columns of the metrics JSON; on a benchmark with constant y the
    ``identity_spec`` columns instead, or no table when there is none."""
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.metrics and (runs_filter is None or runs_filter(m))]
        if not models:
            continue
        if constant_y(data, b):
            if identity_spec is None:
                continue
            spec_b = identity_spec
        else:
            spec_b = spec
        columns = [Column(key, label, worst, digits) for key, label, worst, *_ in spec_b]
        rows = []
        for m in models:
            obj = data.metrics[(b, m)]
            cells = [metric_cell(obj, key, ci=bool(rest and rest[0])) for key, _, _, *rest in spec_b]
            rows.append(Row([m], cells, layout.metrics_file(b, m)))
        tables.append(mark_worst(Table(bench_heading(data, b), ["model"], columns, rows)))
    return TableDoc(name, title, caption, tables, "" if tables else "no metrics reports found")


MARKS_NOTE = "✓: the best value of its column (lowest error, highest human alignment)."
CI_NOTE = (
    "Values with a 95% bias-corrected bootstrap interval in brackets (1000 resamples of pairs) where the "
    "metrics JSON has "
    "one. **Bold ▲**: the worst (highest) value of its column in that table; **bold ▼**: the worst (lowest) "
    f"human alignment; {MARKS_NOTE}"
)


def _heading(data: ReportData, b: str, *parts: str) -> str:
    """``b: parts``; on a benchmark with constant y followed by what its ECE is there."""
    head = ": ".join((b, *parts))
    return f"{head}; {IDENTITY_HEADING}" if constant_y(data, b) else head


def overall_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data,
        "overall",
        "Overall metrics per benchmark and model",
        "Calibration of the confidence p in sent_more against the human judgement, per benchmark and model "
        f"(`reports/metrics/<benchmark>/<model>.json`). ECE, MCE: paper convention; see the definitions. {CI_NOTE} "
        "On a benchmark with the same label for every pair (y = 1 under the identity protocol) no column is "
        "calibration: its table shows the stereotype share and 1 − mean p (the paper's identity ECE) instead, "
        "unranked (docs/metrics.md, Identity benchmarks).",
        OVERALL,
        identity_spec=IDENTITY_OVERALL,
    )


def paper_table(data: ReportData) -> TableDoc:
    doc = _metrics_doc(
        data,
        "paper",
        "The paper's numbers, reproduced from the authors' released scores",
        "The authors' metric set, computed from their released per-pair scores (runs `paper-<model>`), to four "
        "decimals. They equal the authors' own `*.summary.txt` to 1e-9 (tests/test_golden.py), including "
        "**Brier (paper)**, which squares the wrong column and is shown here for reproduction only (so it is not "
        "ranked). **Bold ▲/▼**: the worst value of its column; ✓: the best.",
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


def neutral_table(data: ReportData) -> TableDoc:
    tables = []
    for m in sorted(data.neutral):
        rep = data.neutral[m]
        columns = [Column(k, label, worst) for k, label, worst, _ in NEUTRAL]
        rows = [
            Row([b], [metric_cell(row, k, b, ci=False) for k, _, _, _ in NEUTRAL], layout.neutral_file(m))
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
        honest = {"ece": IDENTITY_LABEL["shortfall"], "gender_ece": IDENTITY_LABEL["shortfall_gender"]}
        labels = honest if constant_y(data, b) else {k: METRIC[k].label for k in honest}
        for key, label in labels.items():
            if not models:
                continue
            sizes = sorted({r["n"] for m in models for r in data.sample_size[(b, m)]["sizes"]})
            columns = [Column("full", "all pairs")] + [Column(f"n{n}", f"N = {n}") for n in sizes]
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
                rows.append(Row([m], cells, layout.sample_size_file(b, m)))
            tables.append(mark_worst(Table(f"{b}: {label}", ["model"], columns, rows)))
    return TableDoc(
        "sample_size",
        "Sample size",
        "Mean ± standard deviation of the metric over random subsets of N pairs drawn without replacement "
        "(`reports/ablation/sample_size/<benchmark>/<model>.json`), next to its value on all pairs. Small "
        "benchmarks give noisy and upward-biased ECE: compare models only where the spread is small against "
        "their difference. Sizes above a benchmark's n are skipped. **Bold ▲**: the highest mean of its column; ✓: the "
        "lowest.",
        tables,
        "" if tables else "no sample-size ablation reports found",
    )


def binning_table(data: ReportData) -> TableDoc:
    tables = []
    for b in data.benchmarks:
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
            rows.append(Row([m], cells, layout.binning_file(b, m)))
        tables.append(mark_worst(Table(_heading(data, b), ["model"], columns, rows)))
    return TableDoc(
        "binning",
        "ECE by number and kind of bins",
        "Paper-convention ECE with M equal-width or equal-mass bins "
        "(`reports/ablation/binning/<benchmark>/<model>.json`, which also has Gender-ECE and its parts). "
        "**Bold ▲**: the highest value of its column; ✓: the lowest.",
        tables,
        "" if tables else "no binning ablation reports found",
    )


def calibration_table(data: ReportData) -> TableDoc:
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.calibration]
        for protocol, protocol_label in PROTOCOLS.items():
            present = [m for m in models if protocol in data.calibration[(b, m)]]
            if not present:
                continue
            columns = [Column("status", "status", None)] + [Column(k, label, w) for k, label, w, _ in CALIBRATION]
            rows, sizes = [], set()
            for m in present:
                rep = data.calibration[(b, m)][protocol]
                sizes.add((rep.get("n_fit"), rep.get("n_eval"), rep.get("folds")))
                unc = rep.get("uncalibrated")
                rows.append(
                    Row(
                        [m, "uncalibrated"],
                        [Cell("–")]
                        + [metric_cell(unc, k, protocol, "uncalibrated", ci=ci) for k, _, _, ci in CALIBRATION],
                        layout.calibration_file(b, m),
                    )
                )
                for method, mrep in rep.get("methods", {}).items():
                    status = Cell(mrep.get("status"), ref={"value": ptr(protocol, "methods", method, "status")})
                    met = mrep.get("metrics")
                    rows.append(
                        Row(
                            [m, method],
                            [status]
                            + [
                                metric_cell(met, k, protocol, "methods", method, "metrics", ci=ci)
                                for k, _, _, ci in CALIBRATION
                            ],
                            layout.calibration_file(b, m),
                        )
                    )
            note = "; ".join(
                (f"{k} folds, " if k else "")
                + f"fitted on {f} and evaluated on {e} pairs"
                + (" (summed over the folds)" if k else "")
                for f, e, k in sorted(sizes, key=str)
            )
            reasons = {
                mr.get("reason") or ""
                for m in present
                for mr in data.calibration[(b, m)][protocol].get("methods", {}).values()
            }
            if reasons and all(ONE_LABEL in r for r in reasons):
                note += (
                    "; every pair has one label (y = 1 under the identity protocol), so no method can be "
                    "fitted: only the uncalibrated scores are evaluated"
                )
            tables.append(
                mark_worst(Table(_heading(data, b, protocol_label), ["model", "method"], columns, rows, note))
            )
    return TableDoc(
        "calibration",
        "Calibration before and after",
        "Metrics of the uncalibrated scores and of each post-hoc calibration method on held-out pairs "
        "(`reports/calibration/<benchmark>/<model>.json`): the held-out split fits on one half and evaluates on "
        "the other; cross-fitting evaluates every pair out of fold. Status `degenerate`: the fit collapsed (e.g. "
        f"a constant map); `failed`: no scores (metrics null). {CI_NOTE}",
        tables,
        "" if tables else "no calibration reports (reports/calibration/) found",
    )


def special_tokens_table(data: ReportData) -> TableDoc:
    tables = []
    for m in sorted(data.special_tokens):
        rep = data.special_tokens[m]
        without = data.special_pairs.get(m, "without special tokens")
        columns = [Column(k, label, w) for k, label, w, _ in SPECIAL]
        rows = []
        for b, sides in rep.items():
            for side, name in (("with", m), ("without", without)):
                if side in sides:
                    rows.append(
                        Row(
                            [b, f"{side} ({name})"],
                            [metric_cell(sides[side], k, b, side, ci=ci) for k, _, _, ci in SPECIAL],
                            layout.special_tokens_file(m),
                        )
                    )
        tables.append(mark_worst(Table(f"{m} vs {without}", ["benchmark", "special tokens"], columns, rows)))
    return TableDoc(
        "special_tokens",
        "Special tokens",
        "The same model scored with the special tokens its tokenizer adds (a BOS token) and without them "
        "(`reports/ablation/special_tokens/<model>.json`); mean confidence is the mean of max(p, 1 − p). "
        f"{CI_NOTE}",
        tables,
        "" if tables else "no special-token ablation reports (reports/ablation/special_tokens/) found",
    )


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
            rows.append(Row([pair["a"], pair["b"]], cells, layout.compare_file(b)))
        note = (
            f"{pair_sizes(rep)}, paired bootstrap of {'clusters' if rep.get('n_clusters') else 'pairs'} with "
            f"{rep['draws']} resamples (seed {rep['seed']}), "
            f"{rep['level']:.0%} bias-corrected intervals{power_note(rep)}"
        )
        tables.append(Table(_heading(data, b), ["A", "B"], columns, rows, note))
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


def build_tables(data: ReportData) -> list[TableDoc]:
    """Every table of the report, in page order."""

    return [
        identity_doc(data),
        overall_table(data),
        paper_table(data),
        gender_gap_table(data),
        human_gender_table(data),
        grouped_table(data),
        neutral_table(data),
        sample_size_table(data),
        estimator_table(data),
        binning_table(data),
        calibration_table(data),
        special_tokens_table(data),
        compare_table(data),
        groups_doc(data.groups, {b for b in data.groups if constant_y(data, b)}),
        annotations_doc(data.annotations),
    ]


# ---------------------------------------------------------------------- the examples
EXAMPLES_PER_RUN = 5
EXAMPLE_COLUMNS = ("pair_id", "sent_more", "sent_less", "targets_more", "targets_less", "y", "p")


def confident_mistakes(rows: Iterable[Mapping], k: int | None = None) -> list[dict]:
    """The ``k`` pairs (default ``EXAMPLES_PER_RUN``) of one run where the model is most confident
    in the variant people did not prefer: the prediction (``p > 0.5``: ``sent_more``) disagrees with ``y``;
    ranked by the confidence in it, max(p, 1 − p), highest first, ties by ``pair_id``. Exact ties (p = 0.5) predict
    nothing and are left out. ``rows``: score rows (at least ``EXAMPLE_COLUMNS``)."""
    wrong = []
    for r in rows:
        p, y = float(r["p"]), int(r["y"])
        if p == 0.5 or (p > 0.5) == (y == 1):
            continue
        wrong.append(
            {
                "pair_id": str(r["pair_id"]),
                "sent_more": str(r["sent_more"]),
                "sent_less": str(r["sent_less"]),
                "targets_more": [str(t) for t in r["targets_more"]],
                "targets_less": [str(t) for t in r["targets_less"]],
                "y": y,
                "p": p,
                "confidence": max(p, 1.0 - p),
            }
        )
    wrong.sort(key=lambda r: (-r["confidence"], r["pair_id"]))
    return wrong[: EXAMPLES_PER_RUN if k is None else k]


def examples_docs(data: ReportData) -> list[TableDoc]:
    """One ``examples_<benchmark>`` table per benchmark with score files: each run's most
    confidently wrong pairs (:func:`confident_mistakes`), the runs in display order."""
    docs = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if data.examples.get((b, m))]
        if not models:
            continue
        columns = [
            Column("sent_more", "sent_more", None, text=True),
            Column("sent_less", "sent_less", None, text=True),
            Column("targets", "targets", None, text=True),
            Column("y", "y", None),
            Column("p", "p", None, digits=4),
        ]
        rows, seen = [], {}
        for m in models:
            for ex in data.examples[(b, m)]:
                targets = f"{', '.join(ex['targets_more'])} / {', '.join(ex['targets_less'])}"
                rows.append(
                    Row(
                        [m, ex["pair_id"]],
                        [
                            Cell(shown_text(ex["sent_more"]).strip(" ")),
                            Cell(shown_text(ex["sent_less"]).strip(" ")),
                            Cell(shown_text(targets).strip(" ")),
                            Cell(ex["y"]),
                            Cell(ex["p"]),
                        ],
                    )
                )
                seen.setdefault(ex["pair_id"], []).append(m)
        shared = sorted(((pid, ms) for pid, ms in seen.items() if len(ms) > 1), key=lambda x: (-len(x[1]), x[0]))
        note = f"{len(models)} model{'s' if len(models) > 1 else ''}, up to {EXAMPLES_PER_RUN} pairs each. " + (
            "In the lists of several models: "
            + ", ".join(f"{pid} ({len(ms)} models)" for pid, ms in shared[:8])
            + (f" and {len(shared) - 8} more" if len(shared) > 8 else "")
            + "."
            if shared
            else "No pair is in the lists of two models."
        )
        docs.append(
            TableDoc(
                f"examples_{b}",
                f"Confidently wrong pairs: {b}",
                f"For each model, the {EXAMPLES_PER_RUN} pairs where it is most confident in the variant people "
                "did not prefer (from `artifacts/scores/<benchmark>/<model>.parquet`): y = 1 when people prefer "
                "sent_more (the male variant in the gender benchmarks, the stereotypical sentence in the "
                "CrowS-Pairs-format "
                "ones) and p is the model's confidence in it, so each row's model prefers the "
                "other variant with confidence max(p, 1 − p). Ranked by that confidence, ties by pair; exact ties "
                "(p = 0.5) are left out. A pair that many models get confidently wrong is worth checking for a "
                "doubtful human label before reading it as model bias. Sentences are shown as one line.",
                [Table(b, ["model", "pair"], columns, rows, note)],
            )
        )
    return docs


def _flatten(obj: object) -> dict[str, str]:
    """:func:`flatten`, each leaf as text (lists as JSON, None as null)."""
    return {
        k: json.dumps(v) if isinstance(v, list) else "null" if v is None else str(v) for k, v in flatten(obj).items()
    }


def model_provenance(data: ReportData) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per model: (key, value) rows from the extract metadata (``ExtractMeta``: no timings); a value
    that differs between benchmarks is listed per benchmark."""
    models: dict[str, dict[str, dict[str, str]]] = {}
    for b in data.benchmarks:
        for m in data.runs.get(b, []):
            if (b, m) in data.meta:
                models.setdefault(m, {})[b] = _flatten(data.meta[(b, m)])
    out = []
    for m, per_bench in models.items():
        keys = list(dict.fromkeys(k for flat in per_bench.values() for k in flat))
        rows = []
        for k in keys:
            values = {b: flat.get(k, "–") for b, flat in per_bench.items()}
            distinct = set(values.values())
            rows.append(
                (k, distinct.pop() if len(distinct) == 1 else "; ".join(f"{b}: {v}" for b, v in values.items()))
            )
        out.append((m, rows))
    return out
