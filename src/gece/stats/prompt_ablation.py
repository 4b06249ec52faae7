"""The prompt ablation (docs/metrics.md, "Prompts"): one model's run on a benchmark under each prompt against its run
on the bare sentence (the baseline), paired on the same pairs.

For prompt k and number m (ECE, Gender-ECE, accuracy; a protocol's own numbers on its benchmarks), the change is

    Δ_k(m) = m(run under prompt k) − m(run on the bare sentence)

on the pairs both score. Its interval and two-sided p-value come from the paired bootstrap: every run is
resampled with the same indices (the same seed and units: the benchmark's clusters where it sets them, else the
pairs), draw b of Δ is the difference of the two runs' draw b, and the interval is the bias-corrected percentile
interval of those draws (:mod:`gece.stats.intervals`). The family of Holm's correction is the prompts of one
number on one benchmark (Holm 1979: the adjusted p-value of the i-th smallest of K is
max_{j ≤ i} min(1, (K − j + 1) p_(j))), and ``change_ci_low_holm``/``change_ci_high_holm`` is the interval at the
level Holm holds that test to, which excludes 0 exactly when the change is significant after the correction
(``change_ci_low``/``change_ci_high``: at ``level``, before it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gece.stats.ablation import Describe, Measure, Run, pair_ranks, paired
from gece.stats.intervals import bias_corrected_interval, bias_corrected_p, holm_intervals


def _value(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def prompt_changes(
    runs: Mapping[str, Run],
    baseline: str,
    keys: Sequence[str],
    measure: Measure,
    level: float = 0.95,
    alpha: float = 0.05,
    describe: Describe | None = None,
) -> dict:
    """Every prompt's run of ``runs`` against ``runs[baseline]`` (module docstring): ``n`` (the pairs compared, with
    the cluster counts of ``describe``) and per key, per prompt, the baseline's value, the prompt's, the change
    and its interval, p-value and Holm-adjusted verdict. The prompts' runs score the same pairs (the same limit),
    so they share the baseline's resampled units; a prompt's run on other pairs is a ValueError."""
    rank = pair_ranks(runs)
    prompts = [k for k in runs if k != baseline]
    compared = {k: paired((baseline, k), runs[baseline], runs[k], rank) for k in prompts}
    ids = {tuple(a.pair_id) for a, _ in compared.values()}
    if len(ids) > 1:
        raise ValueError(f"the prompts of {baseline} score different pairs")
    (base, _), *_ = compared.values()
    clusters, counts = describe(base.pair_id) if describe is not None else (None, {})
    point_base, drawn_base = measure(base, clusters)
    measured = {k: measure(compared[k][1], clusters) for k in prompts}
    out: dict = {"n": len(base.pair_id), **counts, "metrics": {}}
    for key in keys:
        cells, draws = {}, []
        for k in prompts:
            point, drawn = measured[k]
            va, vb = _value(point_base[key][0]), _value(point[key][0])
            change = None if va is None or vb is None else vb - va
            d = drawn[key] - drawn_base[key]
            lo, hi = bias_corrected_interval(d, change, level)
            cells[k] = {
                "baseline": va,
                "value": vb,
                "change": change,
                "change_ci_low": lo,
                "change_ci_high": hi,
                "p_value": bias_corrected_p(d, change),
            }
            draws.append(d)
        family = holm_intervals(
            [cells[k]["p_value"] for k in prompts], [cells[k]["change"] for k in prompts], draws, alpha
        )
        for k, (adj, held, low, high) in zip(prompts, family, strict=True):
            cells[k] |= {
                "p_holm": adj,
                "significant_holm": adj is not None and adj < alpha,
                "level_holm": held,
                "change_ci_low_holm": low,
                "change_ci_high_holm": high,
            }
        out["metrics"][key] = cells
    return out
