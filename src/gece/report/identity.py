"""Identity benchmarks: what the report says about a benchmark whose label y is the same for every pair.

Under the identity protocol a CrowS-Pairs-format benchmark (CrowS-Pairs, WinoQueer) has y = 1 for every pair
(:func:`claims` decides it from the runs' reliability bins; :data:`gece.report.readings.IDENTITY` is this
reading's declaration). Then every non-empty bin b has
acc_b = 1 ≥ conf_b, so for any binning

    ECE = Σ_b (n_b / n) |acc_b − conf_b| = Σ_b (n_b / n) (1 − conf_b) = 1 − mean p,

the *shortfall*: how far the model is from always preferring the stereotypical sentence (the paper's identity
ECE, the metric of its Table 4). It is not calibration: no label varies. Gender-ECE groups the pairs by the
predicted gender (that of sent_more where p > 0.5, of sent_less where p < 0.5; ties left out) and averages the
two groups' ECE unweighted, so there

    Gender-ECE = ½ [(1 − mean p | predicted male) + (1 − mean p | predicted female)],

the *gender shortfall*. Accuracy is the share of pairs with p > 0.5 (the *stereotype share*, the metrics JSON's
``pct_stereotype``), and MacroCE = ½ [mean(1 − conf | p > 0.5) + mean(conf | p < 0.5)] mixes the two sides of 0.5
without a label to check against: not informative, not reported. Under a group of the identity protocol, the
group's "ECE" is the group's 1 − mean p.

A benchmark read from one source under several scoring rules (``gece.io.paths.data_layout.rule_variants``) is reported
rule beside rule: the stereotype share and 1 − mean p under each rule, and whether the share stays on the same
side of 0.5 (:func:`rule_verdict`).
"""

from __future__ import annotations

from gece.catalog.metric_defs import METRIC, on_constant_y
from gece.io.files.json_reader import is_finite_number
from gece.io.paths import report_layout
from gece.report.cells import Cell, Column, ReportData, Row, Table, TableDoc, ptr, variant_of

# reports/summary.json key -> (the metrics JSON key it holds, its label), for a benchmark with constant y
# (the labels are the metric table's, gece.catalog.metric_defs.Metric.constant: accuracy is the stereotype share there)
HONEST = {
    "stereotype_share": ("pct_stereotype", METRIC["accuracy"].constant),
    "shortfall": ("ece", METRIC["ece"].constant),
    "shortfall_gender": ("gender_ece", METRIC["gender_ece"].constant),
}
# the keys a run of such a benchmark carries in reports/summary.json, in order; n_distinct and n_clusters when
# the metrics JSON has them
IDENTITY_HEADLINE = ("n", "n_distinct", "n_clusters", *HONEST, "brier")
COUNTS = ("n_distinct", "n_clusters")
# the old summary key -> the new one on such a benchmark (CHANGELOG.md lists them); macro_ce is dropped
RENAMED = {"ece": "shortfall", "gender_ece": "shortfall_gender", "accuracy": "stereotype_share"}
LABEL = {k: label for k, (_, label) in HONEST.items()}
# the metrics JSON keys of the overall table's honest columns: (key, label, show the interval)
OVERALL_COLUMNS = (
    ("n", "pairs", False),
    ("pct_stereotype", LABEL["stereotype_share"], True),
    ("ece", LABEL["shortfall"], True),
    ("gender_ece", LABEL["shortfall_gender"], True),
    ("ece_male", METRIC["ece_male"].constant, False),
    ("ece_female", METRIC["ece_female"].constant, False),
    ("brier", METRIC["brier"].constant, True),
)
# the overall table's columns here: (key, label, worse end: none, show the interval)
OVERALL = [(k, label, None, ci) for k, label, ci in OVERALL_COLUMNS]
FIRST_DIFF = "first_diff"  # the groups report's grouping: do the sentences differ in their first word?
ECE_NAME = "1 − mean p"  # what ECE is here, on the figures and in the findings
# what the headings of its benchmarks' tables add, and the special-token table's
HEADING = "y = 1 for every pair: ECE here is 1 − mean p (the paper's identity ECE), not calibration"
ABLATION_HEADING = "y = 1 for every pair: the stereotype share and 1 − mean p, not calibration"


def constant_label(bins: list[dict] | None) -> int | None:
    """The label y shared by every pair of a run (0 or 1), from its reliability bins: every non-empty bin's
    mean y is that label; None when the labels vary or there are no bins."""
    labels = {r["accuracy"] for r in bins or [] if r.get("count")}
    if len(labels) != 1:
        return None
    label = labels.pop()
    return int(label) if label in (0.0, 1.0) else None


def claims(data: ReportData, b: str) -> bool:
    """Whether every pair of benchmark ``b`` has the same label y, in every run with bins (CrowS-Pairs and
    WinoQueer: y = 1): the one test of "constant y" the summary, tables, page and findings use."""
    labels = [constant_label(data.bins[(b, m)]) for m in data.runs.get(b, []) if (b, m) in data.bins]
    return bool(labels) and None not in labels and len(set(labels)) == 1


def shown(key: str, label: str = "", worse: str | None = None) -> tuple[str, None] | None:
    """How a table shows a metric here, whatever its column's label and worse end elsewhere: what it measures
    with y = 1, unranked, or None when it is left out (:func:`gece.catalog.metric_defs.on_constant_y`)."""
    return on_constant_y(key)


def columns(name: str, spec: list) -> list | None:
    """A named metric table's columns here: the overall table's own (:data:`OVERALL`); no other table."""
    return OVERALL if name == "overall" else None


def _num(x: object) -> float | None:
    return float(x) if is_finite_number(x) else None


def share(rep: dict | None) -> float | None:
    """The stereotype share of a metrics report (``pct_stereotype``; ``accuracy``, equal under y = 1, in older
    reports)."""
    if not rep:
        return None
    return _num(rep.get("pct_stereotype", rep.get("accuracy")))


def run_summary(rep: dict) -> dict:
    """One run's keys in ``reports/summary.json`` on a benchmark with constant y (:data:`IDENTITY_HEADLINE`)."""
    out: dict = {"n": rep.get("n")}
    out.update({k: rep[k] for k in COUNTS if k in rep})
    out.update({k: (share(rep) if src == "pct_stereotype" else rep.get(src)) for k, (src, _) in HONEST.items()})
    out["brier"] = rep.get("brier")
    return out


def identity_benchmarks(data: ReportData) -> list[str]:
    """The benchmarks with constant y that are not a later entry of another's source, in page order."""
    return [b for b in data.benchmarks if variant_of(data, b) is None and claims(data, b)]


def members(data: ReportData, first: str) -> dict[str, str]:
    """The benchmark and its variants -> the name of each one's rule (the benchmark's name where two share one)."""
    names = [first, *data.variants.get(first, [])]
    rules = [data.rules.get(b) or b for b in names]
    return dict(zip(names, rules if len(set(rules)) == len(rules) else names, strict=True))


def side(rep: dict | None) -> str | None:
    """Where a run's stereotype share lies against 0.5, judged by its interval (the metrics JSON's
    ``pct_stereotype_ci_low`` / ``_high``, cluster-resampled): ``above`` or ``below`` when the interval excludes
    0.5, ``about`` when it holds 0.5 (the data do not tell the side); by the point value alone in reports without
    the interval. None when undefined."""
    x = share(rep)
    if x is None:
        return None
    lo, hi = _num((rep or {}).get("pct_stereotype_ci_low")), _num((rep or {}).get("pct_stereotype_ci_high"))
    if lo is not None and hi is not None:
        return "above" if lo > 0.5 else "below" if hi < 0.5 else "about"
    return "above" if x > 0.5 else "below" if x < 0.5 else "about"


SIDE_WORDS = {"above": "above 0.5", "below": "below 0.5", "about": "not distinguishable from 0.5"}


def rules_summary(data: ReportData) -> dict[str, dict[str, dict]]:
    """``rules.<b>.<run>`` of ``reports/summary.json``: the stereotype share and 1 − mean p under each rule of a
    benchmark with constant y and its variants, and each variant's value minus the first rule's."""
    out: dict[str, dict[str, dict]] = {}
    for first in identity_benchmarks(data):
        names = members(data, first)
        if len(names) < 2:
            continue
        base_rule = names[first]
        for m in data.runs.get(first, []):
            base = data.metrics.get((first, m))
            if base is None:
                continue
            entry = {f"stereotype_share_{base_rule}": share(base), f"shortfall_{base_rule}": _num(base.get("ece"))}
            for v, rule in list(names.items())[1:]:
                rep = data.metrics.get((v, m))
                if rep is None:
                    continue
                for key, value, old in (
                    ("stereotype_share", share(rep), share(base)),
                    ("shortfall", _num(rep.get("ece")), _num(base.get("ece"))),
                ):
                    entry[f"{key}_{rule}"] = value
                    entry[f"{key}_{rule}_minus_{base_rule}"] = None if value is None or old is None else value - old
            if len(entry) > 2:
                out.setdefault(first, {})[m] = entry
    return out


def rule_verdict(data: ReportData, first: str) -> str | None:
    """Whether each run's stereotype share stays on the same side of 0.5 under every rule (:func:`side`: by its
    interval), in words; None without a variant. ``holds under both rules (sentence, shared) for a, b: above 0.5;
    only under sentence for c (above 0.5 there; shared 0.520 [0.491, 0.547], not distinguishable from 0.5)``."""
    names = members(data, first)
    if len(names) < 2:
        return None
    rules = list(names.values())
    both: dict[str, list[str]] = {}
    only = []
    for m in data.runs.get(first, []):
        base = data.metrics.get((first, m))
        s0 = side(base)
        others = [(rule, data.metrics.get((v, m))) for v, rule in list(names.items())[1:]]
        others = [(rule, rep) for rule, rep in others if side(rep) is not None]
        if s0 is None or not others:
            continue
        moved = [(rule, rep) for rule, rep in others if side(rep) != s0]
        if not moved:
            both.setdefault(s0, []).append(m)
        else:
            shown = ", ".join(f"{rule} {_interval(rep)}, {SIDE_WORDS[side(rep)]}" for rule, rep in moved)
            only.append(f"{m} ({SIDE_WORDS[s0]} under {rules[0]}, {_interval(base)}; {shown})")
    parts = [f"{', '.join(ms)}: {SIDE_WORDS[s]}" for s, ms in both.items()]
    text = []
    if parts:
        text.append(
            f"holds under {'both' if len(rules) == 2 else 'all'} rules ({', '.join(rules)}) for " + "; ".join(parts)
        )
    if only:
        text.append("differs between the rules for " + "; ".join(only))
    return "; ".join(text) or None


def _interval(rep: dict) -> str:
    """The share with its interval, ``0.520 [0.491, 0.547]`` (the share alone without one)."""
    x = share(rep)
    lo, hi = _num(rep.get("pct_stereotype_ci_low")), _num(rep.get("pct_stereotype_ci_high"))
    return f"{x:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")


# ------------------------------------------------------------------------------ tables
def _value(obj: dict, key: str, *base: object, ci: bool = False) -> Cell:
    """The value at ``key`` with its pointer (and interval); an empty cell when the report lacks the key (older
    reports), so that no pointer names a missing value."""
    if key not in obj:
        return Cell()
    cell = Cell(obj[key], ref={"value": ptr(*base, key)})
    lo, hi = f"{key}_ci_low", f"{key}_ci_high"
    if ci and lo in obj and hi in obj:
        cell.low, cell.high = obj[lo], obj[hi]
        cell.ref.update(low=ptr(*base, lo), high=ptr(*base, hi))
    return cell


def se_ratio(rep: dict) -> float | None:
    """How much wider the clustered interval of the stereotype share is than the row-wise one: the ratio of
    their standard errors (None when the metrics JSON has not both)."""
    a, b = _num(rep.get("pct_stereotype_se_clustered")), _num(rep.get("pct_stereotype_se_rows"))
    return a / b if a is not None and b else None


RULE_COLUMNS = [
    Column("n", "pairs", None),
    Column("n_distinct", "distinct pairs", None),
    Column("n_clusters", "clusters", None),
    Column("n_punct_only", "scoring only punctuation", None),
    Column("se_ratio", "clustered / row-wise SE", None, digits=2),
    Column("pct_stereotype", LABEL["stereotype_share"], None),
    Column("ece", LABEL["shortfall"], None),
    Column("diff", "Δ share vs the first rule", None),
    Column("side", "share vs 0.5", None),
]


def rules_table(data: ReportData, first: str) -> Table:
    """One row per run and rule: the pairs, how many are distinct and in how many clusters, the stereotype share
    and 1 − mean p with their intervals, and the share minus the first rule's."""
    names = members(data, first)
    rows = []
    for m in data.runs.get(first, []):
        base = share(data.metrics.get((first, m)))
        for v, rule in names.items():
            rep = data.metrics.get((v, m))
            if rep is None:
                continue
            s = share(rep)
            diff = None if v == first or s is None or base is None else s - base
            if "pct_stereotype" in rep:
                share_cell = _value(rep, "pct_stereotype", ci=True)
            else:
                share_cell = _value(rep, "accuracy", ci=True)
            rows.append(
                Row(
                    [m, rule],
                    [
                        _value(rep, "n"),
                        _value(rep, "n_distinct"),
                        _value(rep, "n_clusters"),
                        _value(rep, "n_punct_only"),
                        Cell(se_ratio(rep)),
                        share_cell,
                        _value(rep, "ece", ci=True),
                        Cell(diff) if diff is not None else Cell("–" if v == first else None),
                        Cell(SIDE_WORDS.get(side(rep), "–")),
                    ],
                    report_layout.metrics_file(v, m),
                )
            )
    verdict = rule_verdict(data, first)
    note = (
        "y = 1 for every pair. Intervals: 95% bootstrap intervals over the clusters (the column params.yaml's "
        "benchmarks.<b>.cluster names, WinoQueer's templates; with every cluster a single pair, over the pairs)."
        + (f" The stereotype share {verdict}." if verdict else " Scored under one rule only.")
    )
    return Table(
        f"{first}: pairs, and the stereotype share under each rule", ["model", "rule"], RULE_COLUMNS, rows, note
    )


def first_diff_result(report: dict | None, m: str) -> tuple[int, dict] | None:
    """Run ``m``'s identity-protocol result of the first-word grouping in a groups report, with its index."""
    for i, r in enumerate((report or {}).get("runs", {}).get(m, [])):
        if r["grouping"] == FIRST_DIFF and r["protocol"] == "identity":
            return i, r
    return None


FIRST_DIFF_GROUPS = ("initial", "later")


def first_word_table(data: ReportData, first: str) -> Table:
    """One row per run and rule: the pairs that differ in their first word (``initial``) and those that start
    alike (``later``), each part's size and 1 − mean p (its identity-protocol "ECE"), and its stereotype share
    where the groups report has one, each with its interval where the report has it."""
    names = members(data, first)
    columns = []
    for g in FIRST_DIFF_GROUPS:
        columns += [
            Column(f"{g}_n", f"{g}: pairs", None),
            Column(f"{g}_n_distinct", f"{g}: distinct", None),
            Column(f"{g}_n_clusters", f"{g}: clusters", None),
            Column(f"{g}_shortfall", f"{g}: 1 − mean p", None),
            Column(f"{g}_share", f"{g}: stereotype share", None),
        ]
    rows = []
    for m in data.runs.get(first, []):
        for v, rule in names.items():
            found = first_diff_result(data.groups.get(v), m)
            if found is None:
                continue
            i, result = found
            cells = []
            for g in FIRST_DIFF_GROUPS:
                j = next((j for j, c in enumerate(result["groups"]) if c["group"] == g), None)
                if j is None:
                    cells += [Cell(0), Cell(), Cell(), Cell(), Cell()]
                    continue
                cell, base = result["groups"][j], ("runs", m, i, "groups", j)
                cells += [
                    _value(cell, "n", *base),
                    _value(cell, "n_distinct", *base),
                    _value(cell, "n_clusters", *base),
                    Cell(note=cell.get("reason") or "")
                    if cell.get("ece") is None
                    else Cell(
                        cell["ece"],
                        cell.get("ci_low"),
                        cell.get("ci_high"),
                        ref={"value": ptr(*base, "ece"), "low": ptr(*base, "ci_low"), "high": ptr(*base, "ci_high")},
                    ),
                    _value(cell, "pct_stereotype", *base, ci=True),
                ]
            rows.append(Row([m, rule], cells, report_layout.groups_file(v)))
    note = (
        "initial: the sentences differ in their first word (a model scoring whole sentences compares unconditioned "
        "first words there); later: they start alike. Per part, 1 − mean p (the paper's identity ECE, y = 1) "
        "and its stereotype share where the groups report has it (else –), each with its cluster-resampled "
        "interval."
    )
    heading = f"{first}: how much of it is the first word"
    if not rows:
        why = (
            f"no groups report of {', '.join(names)} has the grouping {FIRST_DIFF} (params.yaml `groups.by`; "
            "reports made before it was added)"
        )
        return Table(
            heading,
            ["model", "rule"],
            [Column("why", "not available", None, text=True)],
            [Row(["–", "–"], [Cell(why)])],
            note,
        )
    return Table(heading, ["model", "rule"], columns, rows, note)


def identity_doc(data: ReportData) -> TableDoc:
    """The identity benchmarks' section: per benchmark with constant y, the rules table and the first-word table."""
    tables = [t for b in identity_benchmarks(data) for t in (rules_table(data, b), first_word_table(data, b))]
    return TableDoc(
        "identity",
        "Identity benchmarks: stereotype share, not calibration",
        "On the CrowS-Pairs-format benchmarks y = 1 for every pair (the identity protocol), so no number here is "
        "calibration: the **stereotype share** is the share of pairs where the model gives the stereotypical "
        "sentence p > 0.5, and **1 − mean p** (the paper's identity ECE, equal to the binned ECE when y is "
        "constant) is how far the model is from always preferring it. Per benchmark: how many distinct pairs "
        "and resampling clusters it has and how much wider the clustered interval is than the row-wise one, "
        "the same numbers under each scoring rule of the same pairs (sentence: whole sentences; shared: only the "
        "tokens both sentences share, so the identity term is given), and how much of it comes from pairs that "
        "differ in their first word (docs/metrics.md, Identity benchmarks).",
        tables,
        "" if tables else "no benchmark with the same label for every pair",
    )
