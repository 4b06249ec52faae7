"""Calibration by group on the page and in ``reports/tables/groups.md`` (the paper's Table 4, generalised),
from the groups stage's reports (``reports/groups/<b>.json``, ``gece.io.schemas.groups_report.GroupsReport``).

One table per benchmark, protocol and grouping that splits the pairs into two or more groups: rows are the
groups, columns the runs, each cell the group's ECE with its bootstrap interval and its number of pairs;
a last row holds the largest gap between groups with its interval, the two groups and the permutation
p-value. Every cell remembers its file and JSON pointer, like the other tables. On a benchmark with the same label
for every pair (y = 1 under the identity protocol) a group's identity-protocol "ECE" is 1 − mean p of the group
(:mod:`gece.report.identity`), and the tables say so. A largest gap that is not a finding (its smaller group has
few distinct pairs or its interval is wide: :func:`gece.report.gaps.gap_refusal`) is marked †. Under the identity
protocol on a benchmark whose y varies, each group's cell also gives its calibration tests
(:mod:`gece.stats.calibration_tests`: Spiegelhalter's z and the Holm-corrected p-values of z and of the consistency
resampling of its ECE), and one more table gives the tests of every pair of each run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from gece.catalog.metric_defs import TEST_VARIANCES
from gece.io.paths import report_layout
from gece.report.cells import Cell, Column, Row, Table, TableDoc, format_p, ptr
from gece.report.gaps import GAP_MARK, GAP_MARK_NOTE, gap_refusal

PROTOCOL_TEXT = {
    "identity": (
        "identity protocol (the paper's): each group's paper-convention ECE against y; for a benchmark "
        "imported from CrowS-Pairs format y = 1 for every pair, so ECE = 1 − mean p, how far the model is "
        "from always preferring the stereotypical sentence"
    ),
    "identity_constant": (
        "identity protocol (the paper's) on a benchmark with y = 1 for every pair: each cell is 1 − mean p of the "
        "group (the paper's identity ECE of the group), how far the model is from always preferring the "
        "stereotypical sentence in that group; not calibration"
    ),
    "soft": (
        "soft protocol: each group's ECE of the model's confidence in sent_more against the share of "
        "annotators who support it (CrowS-Pairs: who recognised the writer's bias type); pairs without "
        "annotations are left out"
    ),
}


def varying_groupings(report: Mapping, protocol: str) -> list[str]:
    """The groupings (in params.yaml's order) that split some run's pairs into two or more groups."""
    by = [r["grouping"] for results in report["runs"].values() for r in results]
    order = {
        r["grouping"]
        for results in report["runs"].values()
        for r in results
        if r["protocol"] == protocol and len(r["groups"]) >= 2
    }
    return sorted(order, key=by.index)


def _group_cell(result: Mapping | None, index: int | None, pointer: tuple, min_size: int) -> Cell:
    if result is None or index is None:
        return Cell(note="n = 0")
    g = result["groups"][index]
    base = (*pointer, "groups", index)
    if g["ece"] is None:
        return Cell(note=f"n = {g['n']} < {min_size}" if g["n"] < min_size else g["reason"] or "")
    counts = [(g.get(k), word) for k, word in (("n_distinct", "distinct"), ("n_clusters", "clusters"))]
    return Cell(
        value=g["ece"],
        low=g["ci_low"],
        high=g["ci_high"],
        note=f"n = {g['n']}"
        + "".join(f", {v} {word}" for v, word in counts if v is not None and v != g["n"])
        + _tests_note(g, result.get("variance")),
        ref={"value": ptr(*base, "ece"), "low": ptr(*base, "ci_low"), "high": ptr(*base, "ci_high")},
    )


def _tests_note(g: Mapping, variance: str | None) -> str:
    """A group's calibration tests as text (empty when it has none): z with its ``variance`` and the Holm-corrected
    p-values."""
    if g.get("p_z_holm") is None and g.get("p_consistency_holm") is None:
        return ""
    z = "z –" if g.get("z") is None else f"z = {g['z']:.2f} ({TEST_VARIANCES[variance]})"
    return (
        f"; Spiegelhalter {z}, Holm {format_p(g.get('p_z_holm'))}; "
        f"consistency Holm {format_p(g.get('p_consistency_holm'))}"
    )


TEST_ROWS = (
    ("Spiegelhalter z", "z"),
    ("its p-value (two-sided)", "p_z"),
    ("binned ECE", "ece"),
    ("consistency-resampling p-value", "p_consistency"),
)


def tests_table(b: str, report: Mapping) -> Table | None:
    """The calibration tests of every pair of each run (``report["tests"]``), or None when no run has one."""
    tests = report.get("tests") or {}
    if not any(t["reason"] is None for t in tests.values()):
        return None
    rows = []
    for label, key in TEST_ROWS:
        cells = [
            Cell(note=t["reason"] or "")
            if t["reason"] or t[key] is None
            else Cell(format_p(t[key]))
            if key.startswith("p_")
            else Cell(
                value=t[key],
                note=f"n = {t['n']}, {TEST_VARIANCES[t['variance']]}" if key == "z" else "",
                ref={"value": ptr("tests", m, key)},
            )
            for m, t in tests.items()
        ]
        rows.append(Row([label], cells, report_layout.groups_file(b)))
    note = (
        "calibration tests of all pairs against y (identity protocol): Spiegelhalter's z (the standardised Brier "
        "score; its variance follows the unit sampled: expected under calibration, exact repeats merged, where the "
        "pair is the unit; that of the cluster sums where clusters group distinct pairs) with its two-sided normal "
        "p-value, and "
        f"the one-sided p-value of the binned ECE under consistency resampling ({report['draws']} label sets "
        "y* ~ Bernoulli(p), seeded): small p-values reject calibration"
    )
    return Table(f"{b}: calibration tests, all pairs", ["test"], [Column(m, m, None) for m in tests], rows, note)


def _gap_cell(result: Mapping | None, pointer: tuple) -> Cell:
    gap = None if result is None else result["gap"]
    if gap is None or gap["gap"] is None:
        return Cell(note=(gap or {}).get("reason") or "")
    if gap["n_groups"] < 2:
        return Cell(note=f"only {gap['high']} is large enough")
    base = (*pointer, "gap")
    note = f"{gap['high']} − {gap['low']}" + (
        f", permutation {format_p(gap['p_perm'])}" if gap.get("p_perm") is not None else ""
    )
    return Cell(
        value=gap["gap"],
        low=gap["ci_low"],
        high=gap["ci_high"],
        note=note,
        ref={"value": ptr(*base, "gap"), "low": ptr(*base, "ci_low"), "high": ptr(*base, "ci_high")},
        mark=GAP_MARK if gap_refusal(result) else "",
    )


def benchmark_tables(b: str, report: Mapping, constant: bool = False) -> list[Table]:
    """The tables of one benchmark's groups report, protocol by protocol; ``constant``: y is the same for every
    pair (the identity reading: :data:`gece.report.readings.IDENTITY`), so the identity protocol's cells are
    1 − mean p."""
    runs = list(report["runs"])
    tables = [t for t in [tests_table(b, report)] if t is not None]
    for protocol in dict.fromkeys(r["protocol"] for results in report["runs"].values() for r in results):
        text = PROTOCOL_TEXT["identity_constant" if constant and protocol == "identity" else protocol]
        what = ": 1 − mean p per group, not calibration" if constant and protocol == "identity" else ""
        groupings = varying_groupings(report, protocol)
        if not groupings:
            reasons = sorted(
                {
                    r["reason"]
                    for results in report["runs"].values()
                    for r in results
                    if r["protocol"] == protocol and r["reason"]
                }
            )
            why = "; ".join(reasons) or "no grouping splits the pairs"
            tables.append(
                Table(
                    f"{b}: {protocol} protocol",
                    ["group"],
                    [Column("why", "not available", None, text=True)],
                    [Row(["–"], [Cell(why)], report_layout.groups_file(b))],
                    text,
                )
            )
            continue
        for grouping in groupings:
            found: dict[str, tuple[Mapping | None, tuple]] = {}
            for m in runs:
                i = next(
                    (
                        i
                        for i, r in enumerate(report["runs"][m])
                        if r["grouping"] == grouping and r["protocol"] == protocol
                    ),
                    None,
                )
                found[m] = (None, ()) if i is None else (report["runs"][m][i], ("runs", m, i))
            names = sorted({g["group"] for r, _ in found.values() if r for g in r["groups"]})
            rows = []
            for name in names:
                cells = []
                for r, pointer in found.values():
                    index = (
                        None if r is None else next((i for i, g in enumerate(r["groups"]) if g["group"] == name), None)
                    )
                    cells.append(_group_cell(r, index, pointer, report["min_size"]))
                rows.append(Row([name], cells, report_layout.groups_file(b)))
            rows.append(
                Row(
                    ["largest gap"],
                    [_gap_cell(r, pointer) for r, pointer in found.values()],
                    report_layout.groups_file(b),
                )
            )
            left = sorted({f"{m}: {r['left_out']}" for m, (r, _) in found.items() if r and r["left_out"]})
            marked = any(c.mark == GAP_MARK for c in rows[-1].cells)
            note = text + (f". Left out: {'; '.join(left)}" if left else "") + (f". {GAP_MARK_NOTE}" if marked else "")
            tables.append(
                Table(
                    f"{b}: {protocol} protocol, by {grouping}{what}",
                    ["group"],
                    [Column(m, m, None) for m in runs],
                    rows,
                    note,
                )
            )
    return tables


def groups_doc(reports: Mapping[str, Mapping], constant: Collection[str] = ()) -> TableDoc:
    """The calibration-by-group tables of ``reports`` (benchmark -> GroupsReport as a dict); ``constant``: the
    benchmarks with the same label for every pair."""
    tables = [t for b, rep in reports.items() for t in benchmark_tables(b, rep, b in constant)]
    first = next(iter(reports.values()), None)
    settings = (
        ""
        if first is None
        else (
            f" ({first['n_bins']} {first['binning'].replace('_', '-')} bins over p, {first['level']:.0%} "
            f"bias-corrected bootstrap intervals from {first['draws']} resamples of clusters (the pairs, or the "
            "column params.yaml `benchmarks.<b>.cluster` names: WinoQueer's templates), the same for every group of "
            f"a run; groups of fewer than {first['min_size']} pairs get no ECE)"
        )
    )
    return TableDoc(
        "groups",
        "Calibration by group",
        "ECE within each group of a pair attribute (params.yaml `groups.by`: the identity contrast or bias type of "
        "the CrowS-Pairs-format benchmarks, the predicted or human gender, any prepared column)" + settings + ", and "
        "the largest gap, max ECE − min ECE over the groups, with its interval, the two groups and a one-sided "
        "permutation p-value (group labels shuffled, sizes kept): a maximum over groups is above 0 by chance alone. "
        f"{GAP_MARK_NOTE} (the findings do not headline it). On a benchmark with the same label for every pair "
        "(y = 1 under the identity protocol) each identity-protocol cell is 1 − mean p of the group, not "
        "calibration. "
        "The paper's Table 4 used a later, larger WinoQueer release than the v0 data here, so the WinoQueer numbers "
        "are not comparable with it (`reports/groups/<benchmark>.json`; docs/metrics.md, Calibration by group).",
        tables,
        "" if tables else "no calibration-by-group reports (reports/groups/) found",
    )
