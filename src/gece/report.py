"""Tables (markdown and HTML) and the HTML page, from the reports.

The table builders turn the JSON reports into rows of cells that remember where each number
came from (file and JSON pointer); the markdown files and the HTML page both render those
rows, so the two never disagree and a test can check every value against its JSON.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

LABELS = {"ece": "ECE", "gender_ece": "Gender-ECE", "brier": "Brier", "accuracy": "Accuracy"}


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _p(p: float | None) -> str:
    """A p-value as text: ``p = 0.028``, ``p < 0.001``, ``p –`` when undefined."""
    if p is None:
        return "p –"
    return f"p = {p:.3f}" if p >= 0.001 else "p < 0.001"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 pair``, ``2 pairs`` (``many`` for an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def compare_markdown(result: dict) -> str:
    """One row per model pair: A − B with its interval and p-value per metric; significant
    differences in bold (p < alpha), † where they survive Holm's correction over the pair's metrics.
    Names (benchmark, models) are escaped; the numbers are written here (``<0.001`` is no tag)."""
    keys = list(result["pairs"][0]["metrics"]) if result["pairs"] else []
    level = f"{result['level']:.0%}"
    lines = [
        f"# Paired model comparison: {_md_escape(result['benchmark'])}",
        "",
        (f"Difference A − B on the same {result['n']} pairs, paired bootstrap with {result['draws']} resamples "
        f"(seed {result['seed']}): point difference, {level} bias-corrected percentile interval and two-sided "
        "p-value. "
        f"**Bold**: significant at α = {result['alpha']}; †: still significant after Holm's correction "
        f"over the {len(keys)} metrics of the pair. The smallest p-value {result['draws']} resamples can give "
        f"is {2 / (result['draws'] + 1):.4f}; with {plural(len(result['pairs']), 'model pair')} and "
        f"{plural(len(result['pairs']) * len(keys), 'difference')} in the table, expect some to be significant "
        f"at α = {result['alpha']} by chance alone."),
        "",
        "| A | B | " + " | ".join(LABELS.get(k, k) for k in keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    for pair in result["pairs"]:
        cells = []
        for k in keys:
            c = pair["metrics"][k]
            text = f"{_num(c['diff'], 3)} [{_num(c['ci_low'])}, {_num(c['ci_high'])}], {_p(c['p_value'])}"
            if c["significant"]:
                text = f"**{text}**" + (" †" if c["significant_holm"] else "")
            cells.append(text)
        lines.append(f"| {_md_escape(pair['a'])} | {_md_escape(pair['b'])} | " + " | ".join(cells) + " |")
    n_sig = sum(c["significant"] for pair in result["pairs"] for c in pair["metrics"].values())
    total = len(result["pairs"]) * len(keys)
    lines += ["", (f"{n_sig} of {plural(total, 'difference')} {'is' if total == 1 else 'are'} significant at "
              f"α = {result['alpha']}.")]
    power = result.get("power")
    if power:
        lines += ["", (f"Power: the smallest true difference the paired test detects with {power['level']:.0%} power "
                  f"at α = {result['alpha']} (median and range over {power['pairs']} pairs of "
                  f"{'the authors' + chr(39) + ' runs' if power['runs'] == 'paper' else 'runs'}):"), "",
                  "| metric | minimum detectable difference | range |", "|---|--:|--:|"]
        lines += [f"| {LABELS.get(k, k)} | {_num(v['median'])} | {_num(v['min'])} – {_num(v['max'])} |"
                  for k, v in power["mde"].items()]
    return "\n".join(lines) + "\n"


# ============================================================================ the report
# Everything below is pure: the stage (``stages.report``) reads the JSON files into a
# ``ReportData``, draws the figures, and writes what these functions return.
#
# Paths are relative to the reports directory, the same strings the stage reads from and the
# tables name as their source (so a test can check every value against its file).
def src_metrics(b: str, m: str) -> str:
    return f"metrics/{b}/{m}.json"


def src_bins(b: str, m: str) -> str:
    return f"bins/{b}/{m}.json"


def src_sample_size(b: str, m: str) -> str:
    return f"ablation/sample_size/{b}/{m}.json"


def src_binning(b: str, m: str) -> str:
    return f"ablation/binning/{b}/{m}.json"


def src_neutral(m: str) -> str:
    return f"ablation/neutral/{m}.json"


def src_special_tokens(m: str) -> str:
    return f"ablation/special_tokens/{m}.json"


def src_calibration(b: str, m: str) -> str:
    return f"calibration/{b}/{m}.json"


def src_calibration_bins(b: str, m: str) -> str:
    return f"calibration_bins/{b}/{m}.json"


def src_compare(b: str) -> str:
    return f"compare/{b}.json"


# figures, relative to the directory of index.html
def fig_reliability(b: str, m: str, variant: str | None = None) -> str:
    return f"figures/reliability/{b}/{m}{'.' + variant if variant else ''}.png"


def fig_grid(b: str) -> str:
    return f"figures/grid_{b}.png"


def fig_calibration(b: str) -> str:
    return f"figures/calibration_{b}.png"


def fig_sample_size(b: str, m: str) -> str:
    """A copy of the sample-size figure (``reports/ablation/sample_size``) when the page is written elsewhere."""
    return f"figures/sample_size/{b}/{m}.png"


CALIBRATION_METHODS = ("beta", "isotonic", "temperature", "platt", "histogram")
PROTOCOLS = {"split": "held-out split", "crossfit": "cross-fitting"}


@dataclass
class ReportData:
    """What the report is built from: the JSON reports, keyed like their paths."""

    benchmarks: list[str]
    runs: dict[str, list[str]]  # benchmark -> models with metrics, in display order
    metrics: dict[tuple[str, str], dict] = field(default_factory=dict)
    bins: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    sample_size: dict[tuple[str, str], dict] = field(default_factory=dict)
    sample_size_figures: dict[tuple[str, str], str] = field(default_factory=dict)  # relative to index.html
    binning: dict[tuple[str, str], dict] = field(default_factory=dict)
    neutral: dict[str, dict] = field(default_factory=dict)
    special_tokens: dict[str, dict] = field(default_factory=dict)  # model with special tokens -> report
    special_pairs: dict[str, str] = field(default_factory=dict)  # model with -> model without
    calibration: dict[tuple[str, str], dict] = field(default_factory=dict)
    calibration_bins: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    compare: dict[str, dict] = field(default_factory=dict)
    meta: dict[tuple[str, str], dict] = field(default_factory=dict)  # extract metadata per run
    examples: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # confident_mistakes per run
    missing: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------ tables
@dataclass
class Cell:
    """One table value: a number with an optional interval [low, high] or spread (± std), or text.

    ``ref`` maps ``value``/``low``/``high``/``spread`` to the JSON pointer of the number in the
    row's source file. ``worst`` is ``high``/``low`` when this is the worst value of its column, ``best``
    likewise when it is the best (the other end).
    """

    value: float | int | str | None = None
    low: float | None = None
    high: float | None = None
    spread: float | None = None
    note: str = ""
    ref: dict[str, str] = field(default_factory=dict)
    worst: str = ""
    best: str = ""
    strong: bool = False
    mark: str = ""


@dataclass
class Column:
    key: str
    label: str
    worst: str | None = "high"  # which end is worst: high, low, or None (not ranked)
    digits: int = 3
    text: bool = False  # a text column (sentences): left-aligned, wraps on the page


@dataclass
class Row:
    label: list[str]
    cells: list[Cell]
    source: str | None = None  # JSON file, relative to the reports directory


@dataclass
class Table:
    heading: str
    label_columns: list[str]
    columns: list[Column]
    rows: list[Row]
    note: str = ""


@dataclass
class TableDoc:
    """One ``reports/tables/<name>.md`` and its section of the HTML page."""

    name: str
    title: str
    caption: str
    tables: list[Table]
    empty: str = ""  # why there is no table


WORST_MARK = {"high": "▲", "low": "▼"}
BEST_MARK = "✓"


def ptr(*parts: object) -> str:
    """A JSON pointer (RFC 6901)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(doc: object, pointer: str) -> object:
    """The value at a JSON pointer."""
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]  # type: ignore[index]
    return doc


def _metric_cell(obj: dict | None, key: str, *base: object, ci: bool = True) -> Cell:
    if obj is None:
        return Cell()
    cell = Cell(value=obj.get(key), ref={"value": ptr(*base, key)})
    lo, hi = f"{key}_ci_low", f"{key}_ci_high"
    if ci and lo in obj and hi in obj:
        cell.low, cell.high = obj[lo], obj[hi]
        cell.ref.update(low=ptr(*base, lo), high=ptr(*base, hi))
    return cell


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def mark_worst(table: Table) -> Table:
    """Mark the worst and the best number of every ranked column (ties: all of them; needs two
    different numbers)."""
    for j, col in enumerate(table.columns):
        if col.worst is None:
            continue
        cells = [r.cells[j] for r in table.rows]
        nums = [c.value for c in cells if _is_number(c.value)]
        if len(nums) < 2 or max(nums) == min(nums):
            continue
        worst, best = (max(nums), min(nums)) if col.worst == "high" else (min(nums), max(nums))
        for c in cells:
            if _is_number(c.value) and c.value == worst:
                c.worst = col.worst
            elif _is_number(c.value) and c.value == best:
                c.best = "low" if col.worst == "high" else "high"
    return table


def format_number(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}"


def format_cell(cell: Cell, col: Column) -> str:
    """The cell as plain text: ``0.158 [0.133, 0.188]``, ``0.197 ± 0.041``, ``–`` for null."""
    if isinstance(cell.value, str):
        text = cell.value
    else:
        text = format_number(cell.value, col.digits)
        if cell.value is not None and cell.low is not None and cell.high is not None:
            text += f" [{format_number(cell.low, col.digits)}, {format_number(cell.high, col.digits)}]"
        if cell.value is not None and cell.spread is not None:
            text += f" ± {format_number(cell.spread, col.digits)}"
    if cell.note:
        text += f" {cell.note}"
    return text


# ------------------------------------------------------------------ the table builders
OVERALL = [
    ("n", "n", None, True), ("ece", "ECE", "high", True), ("ece_toplabel", "ECE top-label", "high", False),
    ("mce", "MCE", "high", False), ("macro_ce", "MacroCE", "high", False), ("ice", "ICE", "high", False),
    ("brier", "Brier", "high", True), ("gender_ece", "Gender-ECE", "high", True),
    ("ece_male", "ECE male", "high", False), ("ece_female", "ECE female", "high", False),
    ("bias_gap", "bias gap", "high", False), ("accuracy", "human alignment", "low", True),
]
PAPER_KEYS = [
    ("ece", "ECE"), ("macro_ce", "MacroCE"), ("ice", "ICE"), ("brier_paper", "Brier (paper)"),
    ("accuracy", "accuracy"), ("gender_ece", "Gender-ECE"), ("bias_gap", "bias gap"),
    ("ece_male", "ECE male"), ("ece_female", "ECE female"),
]
HUMAN_GENDER = [
    ("ece_true_male", "ECE, human: male", "high"), ("ece_true_female", "ECE, human: female", "high"),
    ("cc_ece", "cc-ECE", "high"),
]
GROUPED = [
    ("ece", "ECE (ungrouped)", "high", True), ("macro_ce", "MacroCE", "high", False),
    ("cc_ece", "cc-ECE", "high", False), ("gender_ece", "Gender-ECE", "high", True),
    ("bias_gap", "bias gap", "high", False), ("n_ties", "ties left out", None, False),
]
NEUTRAL = [
    ("ece", "ECE", "high"), ("gender_ece", "Gender-ECE", "high"), ("ece_male", "ECE male", "high"),
    ("ece_female", "ECE female", "high"), ("macro_ce", "MacroCE", "high"), ("ice", "ICE", "high"),
    ("brier", "Brier", "high"), ("accuracy", "human alignment", "low"), ("n", "n", None),
]
CALIBRATION = [
    ("ece", "ECE", "high", True), ("ece_toplabel", "ECE top-label", "high", False),
    ("gender_ece", "Gender-ECE", "high", True), ("ece_male", "ECE male", "high", False),
    ("ece_female", "ECE female", "high", False), ("brier", "Brier", "high", True),
    ("accuracy", "human alignment", "low", True),
]
SPECIAL = [
    ("ece", "ECE", "high", True), ("ece_toplabel", "ECE top-label", "high", False),
    ("gender_ece", "Gender-ECE", "high", True), ("ece_male", "ECE male", "high", False),
    ("ece_female", "ECE female", "high", False), ("brier", "Brier", "high", True),
    ("accuracy", "human alignment", "low", True), ("mean_confidence", "mean confidence", None, False),
    ("share_confidence_over_0_9", "share conf. > 0.9", None, False),
]
METRIC_LABELS = {"ece": "ECE", "gender_ece": "Gender-ECE", "brier": "Brier", "accuracy": "accuracy",
                 "ece_toplabel": "ECE top-label", "macro_ce": "MacroCE", "ice": "ICE"}


def _bench_heading(data: ReportData, b: str) -> str:
    ns = sorted({data.metrics[(b, m)]["n"] for m in data.runs.get(b, []) if (b, m) in data.metrics})
    return f"{b} ({', '.join(map(str, ns))} pairs)" if ns else b


def _metrics_doc(data: ReportData, name: str, title: str, caption: str, spec, runs_filter=None,
                 digits: int = 3) -> TableDoc:
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.metrics and (runs_filter is None or runs_filter(m))]
        if not models:
            continue
        columns = [Column(key, label, worst, digits) for key, label, worst, *_ in spec]
        rows = []
        for m in models:
            obj = data.metrics[(b, m)]
            cells = [_metric_cell(obj, key, ci=bool(rest and rest[0])) for key, _, _, *rest in spec]
            rows.append(Row([m], cells, src_metrics(b, m)))
        tables.append(mark_worst(Table(_bench_heading(data, b), ["model"], columns, rows)))
    return TableDoc(name, title, caption, tables, "" if tables else "no metrics reports found")


MARKS_NOTE = "✓: the best value of its column (lowest error, highest human alignment)."
CI_NOTE = ("Values with a 95% bias-corrected bootstrap interval in brackets (1000 resamples of pairs) where the "
           "metrics JSON has "
           "one. **Bold ▲**: the worst (highest) value of its column in that table; **bold ▼**: the worst (lowest) "
           f"human alignment; {MARKS_NOTE}")


def overall_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data, "overall", "Overall metrics per benchmark and model",
        "Calibration of the male-variant confidence p against the human judgement, per benchmark and model "
        f"(`reports/metrics/<benchmark>/<model>.json`). ECE, MCE: paper convention; see the definitions. {CI_NOTE}",
        OVERALL)


def paper_table(data: ReportData) -> TableDoc:
    from gece.report_stats import brier_ranking_tables  # it builds on this module

    doc = _metrics_doc(
        data, "paper", "The paper's numbers, reproduced from the authors' released scores",
        "The authors' metric set, computed from their released per-pair scores (runs `paper-<model>`), to four "
        "decimals. They equal the authors' own `*.summary.txt` to 1e-9 (tests/test_golden.py), including "
        "**Brier (paper)**, which squares the wrong column and is shown here for reproduction only (so it is not "
        "ranked). **Bold ▲/▼**: the worst value of its column; ✓: the best.",
        [(k, label, {"accuracy": "low", "brier_paper": None}.get(k, "high")) for k, label in PAPER_KEYS],
        runs_filter=lambda m: m.startswith("paper-"), digits=4)
    ranking, lines = brier_ranking_tables(data)
    if ranking:
        doc.tables += ranking
        doc.caption += (" The Brier ranking tables rank the authors' runs by the paper's Brier and by the Brier "
                        "score mean (p − y)² (1 = lowest = best); the ranking changes: " + "; ".join(lines) + ".")
    return doc


def human_gender_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data, "human_gender", "ECE by human gender",
        "Paper-convention ECE within the pairs whose human-preferred variant is the male one and within those "
        "where it is the female one; cc-ECE is their mean (class-conditioned ECE). A large difference means the "
        "confidence is calibrated for one gender's stereotype and not the other's. **Bold ▲**: the worst "
        "(highest) value of its column; ✓: the lowest.",
        [(k, label, worst) for k, label, worst in HUMAN_GENDER])


def grouped_table(data: ReportData) -> TableDoc:
    return _metrics_doc(
        data, "grouped", "Grouped-ECE variants",
        "The ungrouped ECE next to the grouped variants: MacroCE (grouped by correct/wrong prediction), cc-ECE "
        "(grouped by the human-preferred gender) and Gender-ECE (grouped by the predicted gender, with the bias "
        f"gap |ECE male − ECE female|). Exact ties (p = 0.5) have no predicted gender and are left out. {CI_NOTE}",
        GROUPED)


def neutral_table(data: ReportData) -> TableDoc:
    tables = []
    for m in sorted(data.neutral):
        rep = data.neutral[m]
        columns = [Column(k, label, worst) for k, label, worst in NEUTRAL]
        rows = [Row([b], [_metric_cell(row, k, b, ci=False) for k, _, _ in NEUTRAL], src_neutral(m))
                for b, row in rep.items()]
        tables.append(mark_worst(Table(m, ["benchmark"], columns, rows)))
    return TableDoc(
        "neutral", "Gender-neutral wording",
        "The same model on genderlex (an occupation: *The nurse ...*) and its gender-neutral rewrites "
        "(*The person ...*, *Someone ...*): how much of the miscalibration follows the occupation word "
        "(`reports/ablation/neutral/<model>.json`). **Bold ▲/▼**: the worst value of its column; ✓: the best.",
        tables, "" if tables else "no gender-neutral ablation reports (reports/ablation/neutral/) found")


def sample_size_table(data: ReportData) -> TableDoc:
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.sample_size]
        for key, label in (("ece", "ECE"), ("gender_ece", "Gender-ECE")):
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
                    cells.append(Cell(r[f"{key}_mean"], spread=r[f"{key}_std"],
                                      ref={"value": ptr("sizes", i, f"{key}_mean"),
                                           "spread": ptr("sizes", i, f"{key}_std")}))
                rows.append(Row([m], cells, src_sample_size(b, m)))
            tables.append(mark_worst(Table(f"{b}: {label}", ["model"], columns, rows)))
    return TableDoc(
        "sample_size", "Sample size",
        "Mean ± standard deviation of the metric over random subsets of N pairs drawn without replacement "
        "(`reports/ablation/sample_size/<benchmark>/<model>.json`), next to its value on all pairs. Small "
        "benchmarks give noisy and upward-biased ECE: compare models only where the spread is small against "
        "their difference. Sizes above a benchmark's n are skipped. **Bold ▲**: the highest mean of its column; ✓: the "
        "lowest.",
        tables, "" if tables else "no sample-size ablation reports found")


def binning_table(data: ReportData) -> TableDoc:
    tables = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if (b, m) in data.binning]
        if not models:
            continue
        keys = [(binning, k) for binning in ("equal_width", "equal_mass")
                for k in sorted({k for m in models for k in data.binning[(b, m)].get(binning, {})}, key=int)]
        columns = [Column(f"{bn}_{k}", f"{'equal-width' if bn == 'equal_width' else 'equal-mass'} M = {k}")
                   for bn, k in keys]
        rows = []
        for m in models:
            rep = data.binning[(b, m)]
            cells = [(_metric_cell(rep[bn][k], "ece", bn, k, ci=False) if k in rep.get(bn, {}) else Cell())
                     for bn, k in keys]
            rows.append(Row([m], cells, src_binning(b, m)))
        tables.append(mark_worst(Table(b, ["model"], columns, rows)))
    return TableDoc(
        "binning", "ECE by number and kind of bins",
        "Paper-convention ECE with M equal-width or equal-mass bins "
        "(`reports/ablation/binning/<benchmark>/<model>.json`, which also has Gender-ECE and its parts). "
        "**Bold ▲**: the highest value of its column; ✓: the lowest.",
        tables, "" if tables else "no binning ablation reports found")


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
                rows.append(Row([m, "uncalibrated"], [Cell("–")] + [
                    _metric_cell(unc, k, protocol, "uncalibrated", ci=ci) for k, _, _, ci in CALIBRATION
                ], src_calibration(b, m)))
                for method, mrep in rep.get("methods", {}).items():
                    status = Cell(mrep.get("status"), ref={"value": ptr(protocol, "methods", method, "status")})
                    met = mrep.get("metrics")
                    rows.append(Row([m, method], [status] + [
                        _metric_cell(met, k, protocol, "methods", method, "metrics", ci=ci)
                        for k, _, _, ci in CALIBRATION
                    ], src_calibration(b, m)))
            note = "; ".join(
                (f"{k} folds, " if k else "") + f"fitted on {f} and evaluated on {e} pairs"
                + (" (summed over the folds)" if k else "")
                for f, e, k in sorted(sizes, key=str))
            tables.append(mark_worst(Table(f"{b}: {protocol_label}", ["model", "method"], columns, rows, note)))
    return TableDoc(
        "calibration", "Calibration before and after",
        "Metrics of the uncalibrated scores and of each post-hoc calibration method on held-out pairs "
        "(`reports/calibration/<benchmark>/<model>.json`): the held-out split fits on one half and evaluates on "
        "the other; cross-fitting evaluates every pair out of fold. Status `degenerate`: the fit collapsed (e.g. "
        f"a constant map); `failed`: no scores (metrics null). {CI_NOTE}",
        tables, "" if tables else "no calibration reports (reports/calibration/) found")


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
                    rows.append(Row([b, f"{side} ({name})"], [
                        _metric_cell(sides[side], k, b, side, ci=ci) for k, _, _, ci in SPECIAL
                    ], src_special_tokens(m)))
        tables.append(mark_worst(Table(f"{m} vs {without}", ["benchmark", "special tokens"], columns, rows)))
    return TableDoc(
        "special_tokens", "Special tokens",
        "The same model scored with the special tokens its tokenizer adds (a BOS token) and without them "
        "(`reports/ablation/special_tokens/<model>.json`); mean confidence is the mean of max(p, 1 − p). "
        f"{CI_NOTE}",
        tables, "" if tables else "no special-token ablation reports (reports/ablation/special_tokens/) found")


def compare_table(data: ReportData) -> TableDoc:
    from gece.report_stats import power_note  # it builds on this module

    tables = []
    alpha = None
    for b in data.benchmarks:
        rep = data.compare.get(b)
        if not rep or not rep.get("pairs"):
            continue
        alpha = rep.get("alpha")
        keys = list(rep["pairs"][0]["metrics"])
        columns = [Column(k, f"Δ {METRIC_LABELS.get(k, k)}", None) for k in keys]
        rows = []
        for i, pair in enumerate(rep["pairs"]):
            cells = []
            for k in keys:
                c = pair["metrics"][k]
                base = ("pairs", i, "metrics", k)
                cells.append(Cell(c["diff"], c["ci_low"], c["ci_high"], note=_p(c["p_value"]),
                                  ref={"value": ptr(*base, "diff"), "low": ptr(*base, "ci_low"),
                                       "high": ptr(*base, "ci_high")},
                                  strong=bool(c["significant"]), mark="†" if c["significant_holm"] else ""))
            rows.append(Row([pair["a"], pair["b"]], cells, src_compare(b)))
        note = (f"{rep['n']} pairs, paired bootstrap with {rep['draws']} resamples (seed {rep['seed']}), "
                f"{rep['level']:.0%} bias-corrected intervals{power_note(rep)}")
        tables.append(Table(b, ["A", "B"], columns, rows, note))
    return TableDoc(
        "compare", "Model comparison",
        "Paired differences A − B on the same pairs (`reports/compare/<benchmark>.json`): point difference, "
        "bias-corrected percentile interval and two-sided p-value. The minimum detectable difference in each "
        "table's note is the smallest true difference the paired test finds with 80% power at α = 0.05, from the "
        "spread of the paired bootstrap differences (docs/statistics.md): differences below it are likely to go "
        "unnoticed on this benchmark. For the error metrics a negative difference means A is "
        "better calibrated; for human alignment, positive means A agrees more with the human judgements. "
        f"**Bold**: significant at α = {alpha if alpha is not None else 0.05}; †: still significant after Holm's "
        "correction over the four metrics of the pair. No worst or best value is marked: a difference has no worse "
        "end.",
        tables, "" if tables else "no model comparison reports (reports/compare/) found")


def build_tables(data: ReportData) -> list[TableDoc]:
    """Every table of the report, in page order."""
    from gece.report_stats import estimator_table, gender_gap_table  # they build on this module

    return [
        overall_table(data), paper_table(data), gender_gap_table(data), human_gender_table(data),
        grouped_table(data), neutral_table(data), sample_size_table(data), estimator_table(data),
        binning_table(data), calibration_table(data), special_tokens_table(data), compare_table(data),
    ]


# ---------------------------------------------------------------------- the examples
EXAMPLES_PER_RUN = 5
EXAMPLE_COLUMNS = ("pair_id", "sent_more", "sent_less", "targets_more", "targets_less", "y", "p")


def confident_mistakes(rows: Iterable[Mapping], k: int | None = None) -> list[dict]:
    """The ``k`` pairs (default ``EXAMPLES_PER_RUN``) of one run where the model is most confident
    in the variant people did not prefer: the prediction (``p > 0.5``: the male variant,
    ``sent_more``) disagrees with ``y``; ranked by the confidence in it, max(p, 1 − p), highest
    first, ties by ``pair_id``. Exact ties (p = 0.5) predict nothing and are left out.
    ``rows``: score rows (at least ``EXAMPLE_COLUMNS``)."""
    wrong = []
    for r in rows:
        p, y = float(r["p"]), int(r["y"])
        if p == 0.5 or (p > 0.5) == (y == 1):
            continue
        wrong.append({"pair_id": str(r["pair_id"]), "sent_more": str(r["sent_more"]), "sent_less": str(r["sent_less"]),
                      "targets_more": [str(t) for t in r["targets_more"]],
                      "targets_less": [str(t) for t in r["targets_less"]], "y": y, "p": p,
                      "confidence": max(p, 1.0 - p)})
    wrong.sort(key=lambda r: (-r["confidence"], r["pair_id"]))
    return wrong[: EXAMPLES_PER_RUN if k is None else k]


_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def plain_text(text: object) -> str:
    """Data text as one line: control characters and line breaks (\\n, \\r, tab, U+2028, ...)
    become one space each run, and the ends are stripped; everything else (non-ASCII, combining
    marks, right-to-left text) is kept as it is."""
    return _LINE_BREAKS.sub(" ", str(text)).strip()


def examples_docs(data: ReportData) -> list[TableDoc]:
    """One ``examples_<benchmark>`` table per benchmark with score files: each run's most
    confidently wrong pairs (:func:`confident_mistakes`), the runs in display order."""
    docs = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if data.examples.get((b, m))]
        if not models:
            continue
        columns = [Column("sent_more", "sent_more (male)", None, text=True),
                   Column("sent_less", "sent_less", None, text=True),
                   Column("targets", "targets", None, text=True), Column("y", "y", None),
                   Column("p", "p", None, digits=4)]
        rows, seen = [], {}
        for m in models:
            for ex in data.examples[(b, m)]:
                targets = f"{', '.join(ex['targets_more'])} / {', '.join(ex['targets_less'])}"
                rows.append(Row([m, ex["pair_id"]], [
                    Cell(plain_text(ex["sent_more"])), Cell(plain_text(ex["sent_less"])), Cell(plain_text(targets)),
                    Cell(ex["y"]), Cell(ex["p"])]))
                seen.setdefault(ex["pair_id"], []).append(m)
        shared = sorted(((pid, ms) for pid, ms in seen.items() if len(ms) > 1), key=lambda x: (-len(x[1]), x[0]))
        note = (f"{len(models)} model{'s' if len(models) > 1 else ''}, up to {EXAMPLES_PER_RUN} pairs each. "
                + ("In the lists of several models: " + ", ".join(f"{pid} ({len(ms)} models)" for pid, ms in shared[:8])
                   + (f" and {len(shared) - 8} more" if len(shared) > 8 else "") + "."
                   if shared else "No pair is in the lists of two models."))
        docs.append(TableDoc(
            f"examples_{b}", f"Confidently wrong pairs: {b}",
            f"For each model, the {EXAMPLES_PER_RUN} pairs where it is most confident in the variant people "
            "did not prefer (from `artifacts/scores/<benchmark>/<model>.parquet`): y = 1 when people prefer "
            "sent_more, the male variant, and p is the model's confidence in it, so each row's model prefers the "
            "other variant with confidence max(p, 1 − p). Ranked by that confidence, ties by pair; exact ties "
            "(p = 0.5) are left out. A pair that many models get confidently wrong is worth checking for a "
            "doubtful human label before reading it as model bias. Sentences are shown as one line.",
            [Table(b, ["model", "pair"], columns, rows, note)]))
    return docs


# ------------------------------------------------------------------------- markdown
_MD_BACKSLASH = set("\\`*~|$")  # active anywhere in a line (code, emphasis, strike-through, cells, math)
_MD_AT_START = set("#+=")  # active at the start of a line (headings, list items, setext underlines)
_MD_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _md_escape(text: object) -> str:
    """Text as an inert markdown table cell (GitHub-flavoured markdown) that renders as the text.

    - control characters and line breaks (\\n, \\r, tab, U+2028/2029, ...) become a space and the
      ends are stripped (:func:`plain_text`): a row stays on one line, and a table cell trims
      its ends anyway;
    - ``&``, ``<`` and ``>`` become ``&amp;``, ``&lt;`` and ``&gt;``: markdown passes raw HTML
      through, so ``<script>`` must reach the renderer as text, and ``&amp;`` in the data shows
      as ``&amp;``, not ``&``;
    - a backslash, ``|`` (the cell separator), a backtick (code spans), ``*`` (emphasis), ``~``
      (strike-through) and ``$`` (math on GitHub) get a backslash, wherever they are; so does
      ``_`` unless it is inside a word (``genderlex_person``: intraword ``_`` emphasises
      nothing), ``]`` before ``(`` or ``[`` (links, images) and ``[`` before ``^`` (footnotes);
      other brackets stay (a table cell cannot hold the reference definition a bare ``[x]``
      would need), so an interval reads ``0.158 [0.133, 0.188]``;
    - ``#``, ``+`` and ``=`` at the start get a backslash (headings, list items, setext lines
      where the text starts a line);
    - bidirectional control characters (U+202A–U+202E, U+2066–U+2069, U+200E/200F, U+061C)
      become numeric character references: they still render, but cannot reorder the other
      cells of the row in the markdown source.

    Everything else, non-ASCII included (accents, CJK, emoji, right-to-left letters, combining
    marks), is kept unchanged. Undoing the backslashes and the character references gives
    back ``plain_text(text)``. Not made inert: bare URLs (GitHub links them) and ``:name:``
    emoji codes; neither can add markup.
    """
    text = plain_text(text)
    out = []
    for i, ch in enumerate(text):
        before, after = text[i - 1 : i], text[i + 1 : i + 2]
        if ch in _MD_ENTITY:
            out.append(_MD_ENTITY[ch])
        elif ch in _BIDI_CONTROLS:
            out.append(f"&#x{ord(ch):04X};")
        elif (ch in _MD_BACKSLASH or (i == 0 and ch in _MD_AT_START) or (ch == "[" and after == "^")
              or (ch == "]" and after in ("(", "[")) or (ch == "_" and not (before.isalnum() and after.isalnum()))):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _md_cell(cell: Cell, col: Column) -> str:
    text = _md_escape(format_cell(cell, col))
    if cell.worst:
        text = f"**{text}** {WORST_MARK[cell.worst]}"
    elif cell.best:
        text = f"{text} {BEST_MARK}"
    elif cell.strong:
        text = f"**{text}**"
    if cell.mark:
        text += f" {cell.mark}"
    return text


def table_markdown(table: Table) -> str:
    head = [*table.label_columns, *(c.label for c in table.columns)]
    align = ["---"] * len(table.label_columns) + ["---" if c.text else "--:" for c in table.columns]
    lines = ["| " + " | ".join(map(_md_escape, head)) + " |", "|" + "|".join(align) + "|"]
    for row in table.rows:
        cells = [_md_escape(x) for x in row.label] + [_md_cell(c, col) for c, col in zip(row.cells, table.columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def doc_markdown(doc: TableDoc) -> str:
    parts = [f"# {_md_escape(doc.title)}", "", doc.caption, ""]  # captions are markdown written here
    if not doc.tables:
        parts += [f"_Not available: {_md_escape(doc.empty)}._", ""]
    for t in doc.tables:
        parts += [f"## {_md_escape(t.heading)}", ""]
        if t.note:
            parts += [_md_escape(t.note), ""]
        parts += [table_markdown(t), ""]
    parts.append("_Generated by `gece report` from the JSON reports; do not edit._")
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- HTML
def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _url(path: str) -> str:
    """A relative path as an attribute value: percent-encoded (a ``#``, ``?`` or space in a name
    stays part of the path), then escaped."""
    return _e(quote(path, safe="/"))


def _md_inline(text: str) -> str:
    """The little markdown the captions use (`code`, **bold**, *italic*) as HTML, escaped."""
    out = _e(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", out)


def _html_cell(cell: Cell, col: Column) -> str:
    full = format_cell(cell, col)
    main = format_cell(Cell(cell.value), col)  # the value; the interval, spread and note follow it, muted
    rest = full[len(main):]
    text = _e(main) + (f'<span class="ci">{_e(rest)}</span>' if rest else "")
    classes = ["wrap"] if col.text else ["num"] if not isinstance(cell.value, str) else ["text"]
    title = ""
    if cell.worst:
        classes.append("worst")
        text = f"<strong>{text}</strong> <span class=\"mark\">{WORST_MARK[cell.worst]}</span>"
        title = f' title="worst ({cell.worst}est) in this column"'
    elif cell.best:
        classes.append("best")
        text = f"{text} <span class=\"mark\">{BEST_MARK}</span>"
        title = f' title="best ({cell.best}est) in this column"'
    elif cell.strong:
        classes.append("strong")
        text = f"<strong>{text}</strong>"
    if cell.mark:
        text += f" {_e(cell.mark)}"
    return f'<td class="{" ".join(classes)}"{title}>{text}</td>'


NUM_CLASS = ' class="num"'


def table_html(table: Table) -> str:
    head = "".join(f'<th scope="col">{_e(x)}</th>' for x in table.label_columns)
    head += "".join(f'<th scope="col"{"" if c.text else NUM_CLASS}>{_e(c.label)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        src = f' data-source="{_e(row.source)}"' if row.source else ""
        labels = "".join(f"<th scope=\"row\">{_e(x)}</th>" if i == 0 else f"<td class=\"text\">{_e(x)}</td>"
                         for i, x in enumerate(row.label))
        cells = "".join(_html_cell(c, col) for c, col in zip(row.cells, table.columns))
        body.append(f"<tr{src}>{labels}{cells}</tr>")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>")


def doc_html(doc: TableDoc) -> str:
    parts = [f'<section id="table-{_e(doc.name)}" class="tabledoc">',
             f"<h3>{_e(doc.title)} <a class=\"md\" href=\"{_url(f'tables/{doc.name}.md')}\">markdown</a></h3>",
             f'<p class="caption">{_md_inline(doc.caption)}</p>']
    if not doc.tables:
        parts.append(f'<p class="missing">Not available: {_e(doc.empty)}.</p>')
    for t in doc.tables:
        parts.append(f"<h4>{_e(t.heading)}</h4>")
        if t.note:
            parts.append(f'<p class="note">{_e(t.note)}</p>')
        parts.append(table_html(t))
    parts.append("</section>")
    return "\n".join(parts)


DEFINITIONS = [
    ("ECE (paper convention)", (
     "The pairs are binned by p, the model's confidence that the male (sent_more) variant is the human-preferred "
     "reading, into M equal-width bins (m/M, (m+1)/M] (the lowest also takes p = 0). In each bin the accuracy is "
     "the share of pairs whose human judgement prefers the male variant (mean y) and the confidence is the mean p; "
     "ECE = Σ |B_m|/n · |acc_m − conf_m|. This positive-class convention is the one the paper uses and reproduces "
     "its numbers: it asks whether p is a calibrated probability of the male reading. Unless a column says "
     "otherwise, every ECE in this report, grouped ones included, is of this kind.")),
    ("ECE top-label", (
     "The standard classifier ECE (Guo et al. 2017): the same binning over conf = max(p, 1 − p), the confidence "
     "of the variant the model prefers, against correct = 1 when that variant is the human-preferred one. It "
     "asks whether the model's confidence in its own choice matches how often the choice agrees with people.")),
    ("MCE", (
     "Maximum calibration error: the largest |acc_m − conf_m| over the non-empty bins (paper convention). "
     "It is driven by the emptiest bins and is noisy on small benchmarks.")),
    ("ICE", (
     "Instance-level calibration error: the mean of |correct − conf| over the pairs, with no binning, so no "
     "choice of bins can hide a gap.")),
    ("MacroCE", (
     "Macro-averaged calibration error: ½ (mean(1 − conf | correct) + mean(conf | wrong)). It weighs the "
     "under-confidence on correct predictions and the over-confidence on wrong ones equally, so a model cannot "
     "hide confident mistakes behind many correct answers.")),
    ("Brier and Brier (paper)", (
     "Brier = mean (p − y)², the squared error of p as a probability of the male reading (lower is better). "
     "The authors' code computes mean ((1 − p) − y)² instead, squaring the wrong column; that number is kept as "
     "brier_paper only to reproduce the paper's tables and should not be compared with anything.")),
    ("Human alignment (accuracy)", (
     "The share of pairs in which the variant the model prefers (p > 0.5) is the human-preferred one: mean(correct).")),
    ("Gender-ECE and bias gap", (
     "The pairs are grouped by the predicted gender, the gender of the variant with the larger probability "
     "(exact ties have none and are left out, counted as n_ties); ECE male and ECE female are the "
     "paper-convention ECE within each group, Gender-ECE = ½ (ECE male + ECE female) and the bias gap = "
     "|ECE male − ECE female|. A group no pair falls in makes them null, with a reason in the JSON.")),
    ("cc-ECE", (
     "Class-conditioned ECE: the same grouping by the human-preferred gender (y) instead of the predicted one; its "
     "parts are the ECE by human gender, and cc-ECE is their mean.")),
    ("Confidence intervals", (
     "Bias-corrected percentile bootstrap intervals (95%, 1000 resamples of pairs with a fixed seed, the same "
     "resamples for every metric of a run): the percentile interval of the draws moved by the median shift "
     "median(draws) − estimate, so that the extra upward bias a resample adds to binned errors does not push the "
     "interval off its estimate; every interval contains its estimate, and errors are cut to [0, 1]. Paired "
     "comparisons resample the pairs of both models together. docs/statistics.md explains why not BCa.")),
    ("Debiased and smooth ECE", (
     "ECE debiased (L2): Kumar, Liang & Ma (2019): with the same bins, Σ n_m/n [(ȳ_m − p̄_m)² − ȳ_m(1 − ȳ_m)/(n_m − 1)] "
     "removes the sampling noise from each squared bin gap; its square root estimates the L2 calibration error. "
     "Smooth ECE: Błasiok & Nakkiran (2023): the residuals y − p smoothed by a Gaussian kernel reflected at 0 and "
     "1, integrated; the width σ is the fixed point where the error equals σ. Gender-ECE debiased/smooth: the "
     "mean of the same within the predicted-male and predicted-female pairs.")),
    ("Gender gap test", (
     "gap_pred = ECE female − ECE male over the predicted-gender groups, gap_true the same over the "
     "human-preferred-gender groups, each with a bootstrap interval and p-value (from the bias-corrected draws) "
     "and a permutation p-value (the group labels shuffled 1000 times); Holm's correction over the runs of a "
     "table.")),
]


def special_tokens_statement(data: ReportData) -> str:
    """What the special-token ablation shows, in one paragraph (plain text)."""
    if not data.special_tokens:
        return ("No special-token ablation is in this build. The default scoring follows the tokenizer's own "
                "convention (a BOS token where the model family expects one: Llama-3, Gemma); the authors' code "
                "adds no special tokens, which is the reference-compatible setting. Without a BOS the first word "
                "of a sentence cannot be scored.")
    parts = []
    for m, rep in sorted(data.special_tokens.items()):
        without = data.special_pairs.get(m, f"{m} without special tokens")
        shown, details = 0, []
        for b, sides in rep.items():
            w, wo = sides.get("with"), sides.get("without")
            if not w or not wo or None in (w.get("mean_confidence"), wo.get("mean_confidence"), w.get("ece"),
                                           wo.get("ece")):
                continue
            worse = wo["mean_confidence"] > w["mean_confidence"] and wo["ece"] > w["ece"]
            shown += worse
            details.append(
                f"{b}: mean confidence {w['mean_confidence']:.2f} → {wo['mean_confidence']:.2f}, "
                f"share above 0.9 {format_number(w.get('share_confidence_over_0_9'), 2)} → "
                f"{format_number(wo.get('share_confidence_over_0_9'), 2)}, ECE {w['ece']:.3f} → {wo['ece']:.3f}, "
                f"human alignment {format_number(w.get('accuracy'))} → {format_number(wo.get('accuracy'))}")
        if not details:
            continue
        if shown * 2 > len(details):
            head = (f"Scored without the BOS token it expects ({without}), {m} looks grossly overconfident: its "
                    f"confidence rises and its calibration gets worse on {shown} of {len(details)} benchmarks")
        else:
            head = (f"Here the ablation does not show {m} becoming overconfident without its BOS token ({without}): "
                    f"confidence and ECE both rise on only {shown} of {len(details)} benchmarks")
        parts.append(head + " (" + "; ".join(details) + ").")
    text = " ".join(parts) if parts else "The special-token ablation has no usable rows."
    return (text + " A model scored without the special tokens it was trained with is being measured out of "
            "distribution: compare models only under the same convention, and say which one was used.")


def flatten(obj: object, prefix: str = "") -> dict[str, object]:
    """Nested mappings as {``a.b.c``: leaf}, the way ``dvc metrics diff`` names the keys."""
    if isinstance(obj, dict):
        flat: dict[str, object] = {}
        for k, v in obj.items():
            flat.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return flat
    return {prefix: obj}


def _flatten(obj: object) -> dict[str, str]:
    """:func:`flatten`, each leaf as text (lists as JSON, None as null)."""
    return {k: json.dumps(v) if isinstance(v, list) else "null" if v is None else str(v)
            for k, v in flatten(obj).items()}


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
            rows.append((k, distinct.pop() if len(distinct) == 1 else "; ".join(f"{b}: {v}" for b, v in values.items())))
        out.append((m, rows))
    return out


CSS = """
:root { --fg: #1d2327; --muted: #5b6770; --line: #d9dee2; --bg-alt: #f5f7f8; --accent: #2f6f8f;
        --worst: #b3261e; --best: #1e7a3c; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: #fff; }
header { padding: 28px 40px 12px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 6px; font-size: 26px; }
header p { margin: 4px 0; color: var(--muted); max-width: 70em; }
nav { padding: 10px 40px; background: var(--bg-alt); border-bottom: 1px solid var(--line); font-size: 14px;
      display: flex; flex-wrap: wrap; gap: 4px 16px; }
nav a { color: var(--accent); text-decoration: none; white-space: nowrap; }
nav span { color: var(--muted); }
main { padding: 8px 40px 60px; max-width: 1700px; }
h2 { margin-top: 42px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { margin: 30px 0 4px; } h4 { margin: 18px 0 6px; font-size: 15px; }
a.md { font-size: 12px; font-weight: normal; margin-left: 8px; color: var(--accent); }
p.caption { color: var(--muted); max-width: 75em; margin: 4px 0 8px; }
p.note { color: var(--muted); font-size: 13px; margin: 2px 0 6px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 10px; }
th, td { padding: 4px 7px; border-bottom: 1px solid var(--line); white-space: nowrap; }
.ci { color: var(--muted); font-size: 11px; }
td.worst .ci { color: inherit; }
thead th { background: var(--bg-alt); position: sticky; top: 0; text-align: left; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody th { text-align: left; font-weight: 600; }
tbody tr:hover { background: #fafbfc; }
td.worst { color: var(--worst); }
td.best { color: var(--best); }
table.findings td { white-space: normal; min-width: 11em; }
ul.effects { max-width: 75em; padding-left: 22px; } ul.effects li { margin: 4px 0; }
.mark { font-size: 11px; }
.missing { color: #8a5a00; background: #fff7e0; border: 1px solid #f0dca0; padding: 8px 12px; border-radius: 4px;
           max-width: 75em; }
ul.missing { padding-left: 30px; }
figure { margin: 14px 0 22px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; max-width: 75em; }
.runs { display: flex; flex-wrap: wrap; gap: 14px; }
.runs figure { margin: 0; width: 330px; }
.runs figure img { width: 100%; }
details { margin: 8px 0; } summary { cursor: pointer; font-weight: 600; }
dl.defs dt { font-weight: 600; margin-top: 12px; } dl.defs dd { margin: 2px 0 0 0; max-width: 75em; }
pre { background: var(--bg-alt); padding: 10px; overflow-x: auto; font-size: 12px; }
code { font-size: 90%; background: var(--bg-alt); padding: 0 3px; border-radius: 3px; }
table.kv td, table.kv th { white-space: normal; vertical-align: top; }
td.wrap { white-space: normal; min-width: 16em; max-width: 34em; unicode-bidi: plaintext; }
"""


def render_html(data: ReportData, docs: list[TableDoc], figures: dict) -> str:
    """The page: tables, figures, definitions, conventions and provenance; no network.

    ``figures``: ``grid`` {benchmark: path}, ``calibration`` {benchmark: path}, ``runs``
    {benchmark: [(model, [(path, label)])]}, optionally ``sizes`` {path: (width, height)}; paths relative to
    the page. The page opens with the findings (:mod:`gece.findings`).
    """
    runs_n = sum(len(v) for v in data.runs.values())
    models = list(dict.fromkeys(m for b in data.benchmarks for m in data.runs.get(b, [])))
    toc = [("missing", "Missing parts")] if data.missing else []
    examples = examples_docs(data)
    toc += [("findings", "Findings"), ("tables", "Tables"), ("diagrams", "Reliability diagrams"),
            ("examples", "Confidently wrong pairs"), ("runs", "Every run"),
            ("definitions", "Definitions"), ("conventions", "Conventions"), ("provenance", "Provenance")]
    out = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        "<title>gece report: calibration of model confidence against human judgements of gender bias</title>",
        f"<style>{CSS}</style>", "</head>", "<body>",
        "<header><h1>gece report</h1>",
        ("<p>How well language models' confidence matches human judgements of gender bias: for each minimal pair "
         "the model's confidence p that the male variant is the human-preferred reading, against the human "
         "judgement. Lower calibration errors are better; human alignment is the share of pairs where the model "
         "prefers the same variant as people.</p>"),
        (f"<p>{len(data.benchmarks)} benchmarks ({_e(', '.join(data.benchmarks))}), {len(models)} models, "
         f"{runs_n} benchmark × model runs. Built by <code>gece report</code> (the DVC stage <code>report</code>) "
         "from the JSON reports; every table is also in <code>reports/tables/*.md</code>.</p></header>"),
        "<nav>" + "".join(f'<a href="#{i}">{_e(t)}</a>' for i, t in toc) + "<span>tables:</span>"
        + "".join(f'<a href="#table-{_e(d.name)}">{_e(d.name.replace("_", " "))}</a>' for d in docs) + "</nav>",
        "<main>",
    ]
    if data.missing:
        out.append('<section id="missing"><h2>Missing parts</h2><div class="missing"><p>This build has no '
                   "results for the following; the rest of the page is complete for what exists. Run "
                   "<code>dvc repro</code> to build them.</p><ul>"
                   + "".join(f"<li>{_e(x)}</li>" for x in data.missing) + "</ul></div></section>")

    from gece.findings import findings, findings_html

    out.append(findings_html(findings(data)))

    out.append('<section id="tables"><h2>Tables</h2>')
    for doc in docs:
        out.append(doc_html(doc))
        if doc.name == "calibration":
            for b in data.benchmarks:
                if b in figures.get("calibration", {}):
                    alt = f"reliability diagrams before and after calibration on {b}"
                    out.append(f'<figure>{_img(figures["calibration"][b], alt, figures)}<figcaption>{_e(b)}: before '
                               "calibration (top row) and after each method (one row per method), on the held-out "
                               "pairs of the split protocol; one column per model.</figcaption></figure>")
    out.append("</section>")

    out.append('<section id="diagrams"><h2>Reliability diagrams</h2>'
               '<p class="caption">Per bin of p (10 equal-width bins unless the parameters say otherwise): the blue '
               "bar is the share of pairs whose human-preferred variant is the male one (<em>Outputs</em>); the "
               "hatched bar spans from it to the diagonal at the bin centre (<em>Calibration Gap</em>, drawn over "
               "the blue bar where the accuracy is above the diagonal); the dashed line is perfect calibration. "
               "The title gives the ECE; the grey histogram under each diagram counts the pairs per bin. Empty bins "
               "are left empty.</p>")
    for b in data.benchmarks:
        if b in figures.get("grid", {}):
            out.append(f'<figure>{_img(figures["grid"][b], f"reliability diagrams of every model on {b}", figures)}'
                       f'<figcaption>{_e(b)}: every model side by side.</figcaption></figure>')
    out.append("</section>")

    out.append(examples_html(data, examples))

    out.append('<section id="runs"><h2>Every run</h2><p class="caption">The reliability diagram of each benchmark × '
               "model with the configured bins, the same with the other kind of bins (equal-width or equal-mass: "
               "every equal-mass bin holds about n/M pairs), and the sample-size ablation where it exists.</p>")
    for b in data.benchmarks:
        entries = figures.get("runs", {}).get(b, [])
        if not entries:
            continue
        out.append(f"<details><summary>{_e(b)} ({len(entries)} models)</summary><div class=\"runs\">")
        for m, images in entries:
            for path, label in images:
                out.append(f'<figure>{_img(path, f"{b} / {m}: {label}", figures)}'
                           f"<figcaption>{_e(m)}: {_e(label)}</figcaption></figure>")
        out.append("</div></details>")
    out.append("</section>")

    out.append('<section id="definitions"><h2>Definitions</h2><p class="caption">n pairs, M bins; pred = 1 when '
               "p &gt; 0.5, conf = max(p, 1 − p), correct = 1 when pred equals the human label y.</p><dl class=\"defs\">")
    out += [f"<dt>{_e(name)}</dt><dd>{_e(text)}</dd>" for name, text in DEFINITIONS]
    out.append("</dl></section>")

    out.append('<section id="conventions"><h2>Conventions</h2>')
    out.append("<p><strong>Paper-convention ECE.</strong> The ECE, MCE and every grouped ECE here bin p, the "
               "confidence in the male variant, against the human label (the paper's positive-class convention, "
               "which reproduces its numbers); the standard top-label ECE is reported next to it as "
               "<code>ece_toplabel</code>. The two answer different questions and are not interchangeable. The "
               "diagrams draw the gap to the diagonal at the bin centre as the paper does, while the ECE uses the "
               "mean confidence in the bin, so the hatched area illustrates the ECE rather than adding up to it. The "
               "authors' figures also draw a gap bar for empty bins; these figures leave empty bins empty.</p>")
    out.append("<p><strong>Brier.</strong> <code>brier</code> is the Brier score of p. <code>brier_paper</code> is "
               "what the authors' code computes, mean ((1 − p) − y)², which squares the wrong column (it is large "
               "exactly when p is good); it appears only in the paper-reproduction table.</p>")
    out.append(f"<p><strong>Special tokens.</strong> {_e(special_tokens_statement(data))}</p>")
    out.append("<p><strong>Ties and empty groups.</strong> A pair with p exactly 0.5 has no predicted gender and is "
               "left out of Gender-ECE (counted as <code>n_ties</code>); a metric with no pairs to average is null "
               "(shown as –), never 0.</p></section>")

    out.append(_provenance_html(data))
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def _img(path: str, alt: str, figures: dict) -> str:
    """An image that the browser loads when it scrolls into view, with its size reserved (no reflow)."""
    size = figures.get("sizes", {}).get(path)
    dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
    return f'<img src="{_url(path)}" alt="{_e(alt)}"{dims} loading="lazy" decoding="async">'


def examples_html(data: ReportData, docs: list[TableDoc]) -> str:
    """The examples section: the caption once, then one collapsed table per benchmark."""
    out = ['<section id="examples"><h2>Confidently wrong pairs</h2>']
    if not docs:
        out.append('<p class="missing">Not available: no score files (artifacts/scores/&lt;benchmark&gt;/'
                   "&lt;model&gt;.parquet) with a wrong prediction.</p></section>")
        return "\n".join(out)
    out.append(f'<p class="caption">{_md_inline(docs[0].caption)}</p>')
    for doc in docs:
        t = doc.tables[0]
        out.append(f'<details id="{_e(doc.name)}"><summary>{_e(t.heading)} ({len(t.rows)} rows) '
                   f'<a class="md" href="{_url("tables/" + doc.name + ".md")}">markdown</a></summary>')
        out.append(f'<p class="note">{_e(t.note)}</p>')
        out.append(table_html(t))
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def _provenance_html(data: ReportData) -> str:
    prov = data.provenance
    rows = [
        ("data snapshot", f"data.dvc md5 {prov.get('data_md5', 'unknown')} ({prov.get('data_nfiles', '?')} files)"),
        ("code", f"gece {prov.get('gece_version', '?')}, sha256 of src/gece/*.py: {prov.get('code_sha256', '?')}"),
        ("git revision", ("not embedded: it changes with every commit and would make the page (a DVC output) "
                          "differ on every rebuild. The page is committed with dvc.lock; "
                          "`git log -1 -- reports/index.html` names the commit that built it.")),
    ]
    out = [('<section id="provenance"><h2>Provenance</h2><p class="caption">Everything below is a function of the '
            "inputs and the installed packages, so rebuilding the same inputs in the same environment gives the "
            "same page byte for byte.</p>"),
           '<table class="kv"><tbody>']
    out += [f"<tr><th>{_e(k)}</th><td>{_md_inline(v) if k == 'git revision' else _e(v)}</td></tr>"
            for k, v in rows]
    out.append("</tbody></table>")
    out.append("<h3>Models</h3>")
    paper = sorted({m for b in data.benchmarks for m in data.runs.get(b, []) if m.startswith("paper-")})
    if paper:
        out.append(f"<p>{_e(', '.join(paper))}: the authors' released per-pair scores "
                   "(<code>data/reference/&lt;benchmark&gt;/&lt;model&gt;.csv</code>, part of the data snapshot above; "
                   "sources in <code>data/SOURCES.md</code>); no weights were run here.</p>")
    provs = model_provenance(data)
    for m, rows_m in provs:
        out.append(f"<h4>{_e(m)}</h4><table class=\"kv\"><tbody>"
                   + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows_m) + "</tbody></table>")
    scored = [m for m in dict.fromkeys(m for b in data.benchmarks for m in data.runs.get(b, []))
              if not m.startswith("paper-") and m not in {p for p, _ in provs}]
    if scored:
        out.append(f'<p class="missing">No extract metadata (artifacts/scores/&lt;benchmark&gt;/&lt;model&gt;.meta.json) '
                   f"for: {_e(', '.join(scored))}.</p>")
    out.append("<h3>Parameters</h3><details><summary>params.yaml, as validated (defaults filled in)</summary>")
    out.append(f"<pre>{_e(json.dumps(prov.get('params', {}), indent=1, sort_keys=True))}</pre></details>")
    out.append("<h3>Packages</h3><table class=\"kv\"><tbody>")
    out += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in prov.get("packages", {}).items()]
    out.append("</tbody></table></section>")
    return "\n".join(out)
