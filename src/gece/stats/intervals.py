"""Intervals, p-values and multiple-testing corrections from bootstrap draws: pure numpy.

**Bias-corrected percentile interval.** Binned calibration errors are biased upwards, and a
bootstrap resample (which repeats pairs) adds its own upward bias on top of the sample's: the
draws θ*_b sit above the estimate θ̂, so the plain percentile interval [q_(α/2), q_(1−α/2)] of
the draws can lie entirely above θ̂ (52 of 1,574 calibration intervals did, issue 19). The
resampling bias is estimated by the median shift b̂ = median(θ*) − θ̂ and removed from every
draw (Efron & Tibshirani 1993, §10.6: "bias-corrected" estimates; here applied to the whole
distribution, a translation)::

    [lo, hi] = [q_(α/2)(θ*) − b̂, q_(1−α/2)(θ*) − b̂]

The median lies between any two symmetric quantiles, so the interval always contains θ̂; its
width is that of the percentile interval. Efron's BC and BCa intervals were not used: they move
the quantile levels to Φ(2 z0 ± z_(α/2)) with z0 = Φ⁻¹(share of θ* below θ̂), which contain θ̂
exactly when |z0| <= z_(α/2), i.e. exactly when the percentile interval already does, so they
fix none of the intervals that miss their estimate (tests/test_intervals.py checks this).

**p-value.** Two-sided, from the same shifted draws (``bootstrap.two_sided_p``), so that
p < 1 − level exactly when 0 lies (about) outside the interval.

**Holm (1979).** Step-down adjusted p-values: sort the m p-values, p_(i) · (m − i + 1),
running maximum, capped at 1. The interval shown beside a Holm verdict is taken at the level that
test is held to, α · p / p_holm (:func:`holm_alpha`), between the order statistics that make it
exclude 0 exactly when the test rejects (:func:`rejection_interval`), so verdict and interval agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gece.stats.bootstrap import two_sided_p


def _defined(draws: np.ndarray) -> np.ndarray:
    d = np.asarray(draws, dtype=np.float64)
    return d[np.isfinite(d)]


def bias_shift(draws: np.ndarray, estimate: float | None) -> float | None:
    """b̂ = median(θ*) − θ̂ over the defined draws; None when either is undefined."""
    d = _defined(draws)
    if estimate is None or not np.isfinite(estimate) or d.size == 0:
        return None
    return float(np.median(d) - estimate)


def bias_corrected_interval(
    draws: np.ndarray, estimate: float | None, level: float = 0.95, bounds: tuple[float, float] | None = None
) -> tuple[float | None, float | None]:
    """The percentile interval of the draws shifted by −b̂; (None, None) when undefined.

    ``bounds``: the range of the quantity (an error lies in [0, 1]); the shifted interval is
    cut to it. Contains ``estimate`` by construction (the min/max below only absorb rounding).
    """
    shift = bias_shift(draws, estimate)
    if shift is None:
        return None, None
    lo, hi = np.quantile(_defined(draws), [(1 - level) / 2, (1 + level) / 2]) - shift
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return float(min(lo, estimate)), float(max(hi, estimate))


def bias_corrected_p(draws: np.ndarray, estimate: float | None) -> float | None:
    """Two-sided p-value of "the quantity is 0" from the shifted draws θ* − b̂."""
    shift = bias_shift(draws, estimate)
    if shift is None:
        return None
    return two_sided_p(_defined(draws) - shift)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone), None kept as None."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    order = sorted(idx, key=lambda i: pvalues[i])
    m = len(order)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def holm_alpha(p: float | None, p_holm: float | None, alpha: float) -> float | None:
    """The level Holm's correction holds one test to: alpha · p / p_holm.

    Holm rejects when p_holm = c · p < alpha, i.e. when p < alpha / c, with c = p_holm / p >= 1 the
    test's multiplier (its step-down factor m − i + 1, or more by the running maximum). ``alpha``
    where p is 0 (no multiplier to read); None when undefined.
    """
    if p is None or p_holm is None:
        return None
    if p <= 0 or p_holm <= 0:
        return alpha
    return alpha * p / p_holm


def rejection_interval(draws: np.ndarray, estimate: float | None, alpha: float) -> tuple[float | None, float | None]:
    """The interval of the shifted draws d = θ* − b̂ that excludes 0 exactly when the two-sided p-value of
    :func:`bias_corrected_p` is below ``alpha``: the order statistics d_(k+1) and d_(B−k), with k the
    largest integer below alpha (B + 1) / 2 − 1.

    p = 2 (t + 1) / (B + 1) with t = min(#{d <= 0}, #{d >= 0}), so p < alpha exactly when t <= k; and
    d_(k+1) > 0 exactly when #{d <= 0} <= k (likewise d_(B−k) < 0 and #{d >= 0}). A percentile
    interval interpolates between draws and misses the +1 of the p-value, so at the edge it can
    disagree with the test beside it; this one cannot. Its coverage is about 1 − alpha. (None, None)
    when undefined, and when k < 0: with so few draws p cannot fall below alpha, and no interval of
    them has that level.
    """
    shift = bias_shift(draws, estimate)
    if shift is None:
        return None, None
    d = np.sort(_defined(draws) - shift)
    k = math.ceil(alpha * (d.size + 1) / 2 - 1) - 1
    if k < 0:
        return None, None
    return float(min(d[k], estimate)), float(max(d[d.size - 1 - k], estimate))


def holm_intervals(
    p_values: Sequence[float | None], estimates: Sequence[float | None], draws: Sequence[np.ndarray], alpha: float
) -> list[tuple[float | None, float | None, float | None, float | None]]:
    """Holm's correction over one family of bootstrap tests, each with the interval that agrees with its verdict:
    per member (p_holm, level_holm, ci_low_holm, ci_high_holm), the adjusted p-value (:func:`holm`), the level Holm
    holds the test to (1 − :func:`holm_alpha`) and the interval of its ``draws`` at that level
    (:func:`rejection_interval`), which excludes 0 exactly when p_holm < ``alpha``. None where the test is
    undefined."""
    out = []
    for p, adjusted, estimate, d in zip(p_values, holm(p_values), estimates, draws, strict=True):
        held_to = holm_alpha(p, adjusted, alpha)
        low, high = (None, None) if held_to is None else rejection_interval(d, estimate, held_to)
        out.append((adjusted, None if held_to is None else 1.0 - held_to, low, high))
    return out


def detectable_difference(draws: np.ndarray, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest true difference the bias-corrected test detects with ``power`` at ``alpha``.

    The test rejects when 0 leaves the shifted interval, i.e. when the estimate d̂ exceeds
    median − q_(α/2) (upwards) or falls below median − q_(1−α/2). If the estimate's sampling
    distribution is the bootstrap one moved to the true δ, P(reject) reaches ``power`` at
    δ = (median − q_(α/2)) + (median − q_(1−power)) upwards and the mirror image downwards; the
    larger of the two is returned (for a normal distribution: (z_(1−α/2) + z_power) · sd).
    """
    d = _defined(draws)
    if d.size == 0:
        return None
    q_lo, q_beta_lo, med, q_beta_hi, q_hi = np.quantile(d, [alpha / 2, 1 - power, 0.5, power, 1 - alpha / 2])
    return float(max((med - q_lo) + (med - q_beta_lo), (q_hi - med) + (q_beta_hi - med)))


def clustered_se(values, clusters=None) -> float | None:
    """Standard error of the mean of per-pair values s_i, with the pairs in clusters (Miller 2024, eq. 4):

        SE_clustered = sqrt( sum_c ( sum_{i in c} (s_i - s̄) )^2 ) / n

    Within a cluster the deviations add before they are squared, so pairs that repeat one another count as
    the one observation they are. With every pair its own cluster (``clusters`` None) it is the usual
    sqrt( sum_i (s_i - s̄)^2 ) / n. None for no values.

    Parameters
    ----------
    values : array-like of shape (n,)
        Per-pair values s_i (e.g. 1 when the pair prefers the stereotype, else 0).
    clusters : array-like of shape (n,), optional
        Cluster key of each pair.

    Returns
    -------
    se : float or None
        The clustered standard error of the mean.

    References
    ----------
    .. [1] E. Miller (2024). Adding error bars to evals: a statistical approach to language model
           evaluations. arXiv:2411.00640.
    """
    s = np.asarray(values, dtype=np.float64).reshape(-1)
    if s.size == 0:
        return None
    dev = s - s.mean()
    if clusters is not None:
        _, codes = np.unique(np.asarray(clusters), return_inverse=True)
        dev = np.bincount(codes.reshape(-1), weights=dev)
    return float(np.sqrt(np.sum(dev * dev)) / s.size)
