"""A compared metric of two runs in words (``gece compare``'s verdicts), from a cell of ``reports/compare/<b>.json``."""

from __future__ import annotations

from gece.catalog.metric_defs import Metric
from gece.io.files.json_reader import is_finite_number
from gece.report.cells import format_p
from gece.report.findings import HIGHER_IS_BETTER, LABELS


def verdict(a: str, b: str, key: str, cell: dict, level: float = 0.95, metric: Metric | None = None) -> str:
    """One compared metric of two models in words (``diff`` is a − b, as in ``reports/compare``):
    ``A is better calibrated than B on ECE by 0.045 [0.020, 0.070], p = 0.001``. ``metric``: a protocol's number
    (its label and worse end; ``A is better than B on ...``, or, unranked, how they differ)."""
    label = metric.label if metric is not None else LABELS.get(key, key)
    diff, lo, hi, p = (
        float(x) if is_finite_number(x := cell.get(k)) else None for k in ("diff", "ci_low", "ci_high", "p_value")
    )
    if diff is None or lo is None or hi is None:
        return f"{a} vs {b} on {label}: undefined (a metric is null for one of them)"
    holm = (
        ""
        if not cell.get("significant")
        else (", also after Holm's correction" if cell.get("significant_holm") else ", not after Holm's correction")
    )
    if not cell.get("significant"):
        return (
            f"{a} and {b} do not differ significantly on {label}: {a} − {b} = {diff:+.3f} "
            f"[{lo:+.3f}, {hi:+.3f}], {format_p(p)}"
        )
    if metric is not None and metric.worse is None:
        return f"{a} and {b} differ on {label}: {a} − {b} = {diff:+.3f} [{lo:+.3f}, {hi:+.3f}], {format_p(p)}{holm}"
    higher_better = metric.worse == "low" if metric is not None else key in HIGHER_IS_BETTER
    a_better = (diff > 0) == higher_better
    winner, loser = (a, b) if a_better else (b, a)
    size, low, high = abs(diff), min(abs(lo), abs(hi)), max(abs(lo), abs(hi))
    how = (
        "is better than"
        if metric is not None
        else "agrees with the human judgements more often than"
        if higher_better
        else "is better calibrated than"
    )
    return f"{winner} {how} {loser} on {label} by {size:.3f} [{low:.3f}, {high:.3f}], {format_p(p)}{holm}"
