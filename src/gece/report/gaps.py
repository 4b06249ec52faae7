"""Gaps between groups: when the largest gap of a grouping is a finding, and whether it holds under each rule.

The findings (:mod:`gece.report.findings`) headline the largest gap between the groups of a grouping only when its
smaller group has at least :data:`GAP_MIN_DISTINCT` distinct pairs and its bootstrap interval is at most
:data:`GAP_MAX_WIDTH` wide (:func:`gap_refusal`); the groups table (:mod:`gece.report.group_tables`) still shows every
gap and marks the others :data:`GAP_MARK`. The two thresholds live here only (docs/metrics.md, Identity
benchmarks).
"""

from __future__ import annotations

from gece.io.files.json_reader import is_finite_number
from gece.report import identity
from gece.report.cells import ReportData

# a largest gap between groups is a finding only when its smaller group has at least this many distinct pairs
GAP_MIN_DISTINCT = 50
# ... and its interval is at most this wide (ci_high − ci_low)
GAP_MAX_WIDTH = 0.3
GAP_MARK = "†"  # the groups table's mark of a gap that is not a finding
GAP_MARK_NOTE = (
    f"{GAP_MARK}: small group (fewer than {GAP_MIN_DISTINCT} distinct pairs) or wide interval (wider than "
    f"{GAP_MAX_WIDTH}), not a finding"
)


def _num(x: object) -> float | None:
    return float(x) if is_finite_number(x) else None


def group_size(result: dict, name: str | None) -> tuple[int | None, int | None]:
    """(pairs, distinct pairs) of one group of a grouping result; distinct falls back to the pairs when the
    groups report has no ``n_distinct`` (older reports)."""
    cell = next((c for c in result.get("groups", []) if c.get("group") == name), None) if name else None
    if cell is None or _num(cell.get("n")) is None:
        return None, None
    n = int(cell["n"])
    return n, int(cell["n_distinct"]) if _num(cell.get("n_distinct")) is not None else n


def gap_refusal(result: dict | None) -> str | None:
    """Why the largest gap of a grouping result is not a finding, or None when it is one: its smaller group has
    fewer than :data:`GAP_MIN_DISTINCT` distinct pairs (or unknown sizes), or its interval is wider than
    :data:`GAP_MAX_WIDTH`."""
    gap = (result or {}).get("gap") or {}
    if _num(gap.get("gap")) is None:
        return None
    sizes = [group_size(result, gap.get(end))[1] for end in ("high", "low")]
    if None in sizes:
        return "the groups' sizes are unknown"
    if min(sizes) < GAP_MIN_DISTINCT:
        return f"its smaller group has {min(sizes)} distinct pairs (fewer than {GAP_MIN_DISTINCT})"
    lo, hi = _num(gap.get("ci_low")), _num(gap.get("ci_high"))
    if lo is None or hi is None:
        return "it has no interval"
    if round(hi - lo, 12) > GAP_MAX_WIDTH:
        return f"its interval is {hi - lo:.2f} wide (wider than {GAP_MAX_WIDTH})"
    return None


def grouping_result(report: dict | None, model: str, grouping: str, protocol: str) -> dict | None:
    """The result of one run, grouping and protocol in a groups report (None when it has none)."""
    return next(
        (
            r
            for r in (report or {}).get("runs", {}).get(model, [])
            if r["grouping"] == grouping and r["protocol"] == protocol
        ),
        None,
    )


def gap_rules(data: ReportData, b: str, m: str, grouping: str, gap: dict) -> str:
    """Whether a largest gap (group ``high`` above group ``low``) keeps its sign under the other rules of ``b``:
    ``; holds under both rules (a − b under shared: +0.050)`` or ``; only under sentence (...: -0.020)``."""
    names = identity.members(data, b)
    diffs = []
    for v, rule in list(names.items())[1:]:
        r = grouping_result(data.groups.get(v), m, grouping, "identity") or {}
        values = {c.get("group"): _num(c.get("ece")) for c in r.get("groups", [])}
        hi, lo = values.get(gap["high"]), values.get(gap["low"])
        if hi is not None and lo is not None:
            diffs.append((rule, hi - lo))
    if not diffs:
        return ""
    shown = f"{gap['high']} − {gap['low']} under " + ", ".join(f"{rule}: {d:+.3f}" for rule, d in diffs)
    if all(d > 0 for _, d in diffs):
        return f"; holds under {'both' if len(names) == 2 else 'all'} rules ({shown})"
    return f"; only under {names[b]} ({shown})"
