"""Calibration tests, overall and by group: Spiegelhalter's z-test and consistency resampling of the binned ECE.

Both test the null hypothesis that the scores are calibrated, P(y = 1 | p) = p, against the labels y (0/1) of a
benchmark whose y varies. They complement the ECE and its interval: the ECE says how far from calibration, a
test says whether that distance is more than sampling noise would give a calibrated model on the same scores.

**Spiegelhalter's z-test** (Spiegelhalter 1986). Under the null, each (y_i − p_i) has mean 0 and variance
p_i (1 − p_i). The statistic is the standardised Brier-score decomposition::

    T = Σ_i (y_i − p_i)(1 − 2 p_i)
    z = T / sqrt(V),   V = Σ_i (1 − 2 p_i)² p_i (1 − p_i)        (independent rows)

and the two-sided p-value is ``erfc(|z| / √2)`` (the normal approximation). z > 0: the Brier score is worse than
a calibrated model's on the same p; z < 0: better (the scores are under-confident). It is the statistic of
MAPIE's ``spiegelhalter_statistic``, which the tests cross-check (MAPIE's ``spiegelhalter_p_value`` is the
one-sided 1 − Φ(z)). It is undefined (None) when V = 0 (every p in
{0, 1/2, 1}).

**One variance rule: the unit that was sampled.** Var(T) follows the unit a benchmark's pairs were drawn as
(``benchmarks.<b>.cluster``, the prepared ``cluster`` column), never whether some pair happens to repeat:

- *The pair* (``cluster: pair``, every benchmark's default): a cluster holds the exact repeats of one pair (the same
  two sentences, so the same p and the same label), which are one draw counted several times. The variance is the
  one expected under calibration, with each cluster's rows merged into that one draw::

      V = Σ_c ( Σ_{i∈c} (1 − 2 p_i) sqrt(p_i (1 − p_i)) )²        (``EXPECTED``)

  For a cluster of m copies of one pair its term is m² (1 − 2p)² p (1 − p), the variance of m (y − p)(1 − 2p);
  without repeats (every cluster one row) V is the independent-rows variance above. One duplicated pair among
  n moves z only by its own second term in T and V (``tests/test_calibration_tests.py``, a hand case: 3.953 to
  3.931 among 1,000 pairs, where V_cl would give 3.612). Where p
  varied inside a cluster the term would be the largest variance any dependence inside it allows
  (Cauchy-Schwarz), so the rule never understates it.
- *A group of distinct pairs* (WinoQueer's sentence templates, ``cluster: template``; SynthBias's referent protocol,
  whose he and she rows of one sentence form a cluster): the rows of a cluster are correlated in ways the null does
  not describe, so the variance is the empirical one of the cluster sums u_c = Σ_{i∈c} (y_i − p_i)(1 − 2 p_i)
  under the null (E u_c = 0)::

      V_cl = Σ_c u_c²                                                (``CLUSTERS``)

  the cluster-robust ("sandwich") variance of a score statistic (Liang & Zeger 1986; Cameron & Miller 2015), valid
  whatever the dependence within a cluster, as long as clusters are independent and not few.

:func:`variance_for` says which from the counts the reports carry: a distinct pair never spans two clusters, so the
clusters are the pairs' repeats exactly when there are as many clusters as distinct pairs. Inside a group the sums
are over each cluster's rows in that group. Before this rule the test switched to V_cl whenever any pair repeated
(WinoBias's one repeated pair among 771 moved the z of smollm2-135m from 2.763 to 2.584), so z was not comparable
across benchmarks.

**Consistency resampling** (Bröcker & Smith 2007; Vaicenavicius et al. 2019). Conditional on the scores, draw
labels from the null: y*_i ~ Bernoulli(p_i), independently, ``draws`` times (``metrics.bootstrap``, seeded with
``metrics.seed``; all draws at once, in chunks of :func:`gece.stats.bootstrap.chunk_size`), and compute the same
binned ECE (:mod:`gece.stats.metrics`, ``metrics.n_bins`` and ``metrics.binning``) on each. The p-value is the
share of null ECEs at least the observed one (Phipson & Smyth 2010)::

    p = (1 + #{ECE*_b >= ECE}) / (draws + 1)

It is one-sided (a larger ECE is the alternative) and accounts for the binned ECE's upward bias at small n, which
the ECE's bootstrap interval does not. It follows the same unit as z: where the pair is the unit, the exact repeats
of a pair are one draw (one uniform per cluster, y*_i = 1{U_c < p_i}); where clusters group distinct pairs the
surrogate labels are independent given p, a null that assumes independent rows (there, read the Spiegelhalter
test's cluster variance).

**By group.** Each group of a grouping (params.yaml ``groups.by``) with at least ``min_size`` rows is tested on
its own rows (one batched call for every group: per-group sums by ``np.bincount``, per-group ECE by the segmented
:func:`gece.stats.metrics.binned_stats`). The p-values of the groups of one grouping are corrected for the number
of groups with Holm's step-down procedure (Holm 1979; :func:`gece.stats.intervals.holm`), per run and
benchmark: with the m p-values sorted,
p_(1) <= ... <= p_(m)::

    p^Holm_(i) = min(1, max_{j <= i} (m − j + 1) p_(j))

which controls the family-wise error rate at any dependence between the groups' tests.

References: D. J. Spiegelhalter (1986). Probabilistic prediction in patient management and clinical trials.
*Statistics in Medicine* 5(5), 421-433. J. Bröcker and L. A. Smith (2007). Increasing the reliability of
reliability diagrams. *Weather and Forecasting* 22(3), 651-661. J. Vaicenavicius et al. (2019). Evaluating model
calibration in classification. *AISTATS 2019*. K.-Y. Liang and S. L. Zeger (1986). Longitudinal data analysis
using generalized linear models. *Biometrika* 73(1), 13-22. A. C. Cameron and D. L. Miller (2015). A
practitioner's guide to cluster-robust inference. *Journal of Human Resources* 50(2), 317-372. S. Holm (1979). A
simple sequentially rejective multiple test procedure. *Scandinavian Journal of Statistics* 6(2), 65-70.
B. Phipson and G. K. Smyth (2010). Permutation P-values should never be zero. *Statistical Applications in
Genetics and Molecular Biology* 9(1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from gece.catalog.metric_defs import TEST_VARIANCES
from gece.stats.bootstrap import chunk_size, cluster_codes
from gece.stats.intervals import holm
from gece.stats.metrics import Binning, binned_stats

EXPECTED, CLUSTERS = TEST_VARIANCES  # the variance of Spiegelhalter's test (module docstring)


@dataclass(frozen=True)
class CalibrationTest:
    """The calibration tests of one set of rows (a group, or every row of a run).

    Attributes
    ----------
    n : int
        Rows tested.
    z : float or None
        Spiegelhalter's z (None when its variance is 0).
    p_z : float or None
        Its two-sided normal p-value.
    ece : float or None
        The binned ECE of the rows (the consistency test's statistic).
    p_consistency : float or None
        The one-sided consistency-resampling p-value of the ECE.
    p_z_holm, p_consistency_holm : float or None
        The same p-values after Holm's correction over the groups of the grouping (None overall).
    """

    n: int
    z: float | None
    p_z: float | None
    ece: float | None
    p_consistency: float | None
    p_z_holm: float | None = None
    p_consistency_holm: float | None = None


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def normal_two_sided(z: np.ndarray) -> np.ndarray:
    """Two-sided p-values of standard-normal statistics, erfc(|z| / √2); NaN stays NaN."""
    z = np.asarray(z, dtype=np.float64).reshape(-1)
    return special.erfc(np.abs(z) / np.sqrt(2.0))


def variance_for(n_distinct: int, n_clusters: int) -> str:
    """The variance rule of the module docstring: ``EXPECTED`` where the clusters are the repeats of one pair each
    (as many clusters as distinct pairs: a pair never spans two clusters), ``CLUSTERS`` where some cluster groups
    distinct pairs (fewer clusters than distinct pairs)."""
    return EXPECTED if n_clusters >= n_distinct else CLUSTERS


def spiegelhalter(p, y, seg=None, n_groups: int = 1, clusters=None, variance: str = EXPECTED) -> np.ndarray:
    """Spiegelhalter's z per group (module docstring).

    Parameters
    ----------
    p, y : array-like of shape (n,)
        Scores in [0, 1] and labels 0/1.
    seg : array-like of int of shape (n,), optional
        Group code of each row in [0, n_groups); negative: in no group. None: every row in group 0.
    n_groups : int, default=1
        Number of groups.
    clusters : array-like of shape (n,), optional
        Cluster key of each row; None: every row its own cluster.
    variance : {"expected", "clusters"}, default="expected"
        ``EXPECTED``: the variance under calibration, the rows of a cluster merged into one draw; ``CLUSTERS``: the
        empirical variance of the cluster sums (:func:`variance_for` chooses).

    Returns
    -------
    z : ndarray of shape (n_groups,)
        Each group's z, NaN where its variance is 0 or it has no rows.
    """
    if variance not in (EXPECTED, CLUSTERS):
        raise ValueError(f"variance must be {EXPECTED!r} or {CLUSTERS!r}, not {variance!r}")
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    seg = np.zeros(p.size, dtype=np.int64) if seg is None else np.asarray(seg, dtype=np.int64)
    inside = seg >= 0
    p, y, s = p[inside], y[inside], seg[inside]
    score = (y - p) * (1.0 - 2.0 * p)
    t = np.bincount(s, weights=score, minlength=n_groups)
    coded = cluster_codes(None if clusters is None else np.asarray(clusters)[inside], p.size)
    codes, k = coded if coded is not None else (np.arange(p.size), p.size)
    # per group and cluster: the sum of the rows' standard deviations under the null (EXPECTED), or of their scores
    term = (1.0 - 2.0 * p) * np.sqrt(p * (1.0 - p)) if variance == EXPECTED else score
    v = (np.bincount(s * k + codes, weights=term, minlength=n_groups * k).reshape(n_groups, k) ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(v > 0, t / np.sqrt(np.where(v > 0, v, 1.0)), np.nan)


def consistency_p(
    p,
    y,
    seg=None,
    n_groups: int = 1,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    draws: int = 1000,
    seed: int = 0,
    repeats=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each group's binned ECE and its consistency-resampling p-value (module docstring).

    Parameters
    ----------
    p, y : array-like of shape (n,)
        Scores in [0, 1] and labels 0/1.
    seg : array-like of int of shape (n,), optional
        Group code of each row in [0, n_groups); negative: in no group. None: every row in group 0.
    n_groups : int, default=1
        Number of groups.
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each group's own p (fixed across draws: p is).
    draws : int, default=1000
        Surrogate label sets y* ~ Bernoulli(p).
    seed : int, default=0
        Seed of the surrogate labels.
    repeats : array-like of shape (n,), optional
        Cluster key of each row where a cluster holds the exact repeats of one pair: its rows share one draw,
        y*_i = 1{U_c < p_i} with one uniform U_c per cluster. None (or every key distinct): one draw per row, the
        same draws bit for bit.

    Returns
    -------
    ece : ndarray of shape (n_groups,)
        Each group's observed ECE (NaN for an empty group).
    p_value : ndarray of shape (n_groups,)
        (1 + #{ECE* >= ECE}) / (draws + 1), NaN for an empty group or ``draws`` < 1.
    """
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    seg = np.zeros(p.size, dtype=np.int64) if seg is None else np.asarray(seg, dtype=np.int64)
    observed = binned_stats(p[None, :], y[None, :], n_bins, binning, seg[None, :], max(n_groups, 1)).ece()[0, :n_groups]
    if draws < 1:
        return observed, np.full(n_groups, np.nan)
    coded = cluster_codes(None if repeats is None else np.asarray(repeats), p.size)
    rng = np.random.default_rng(seed)
    reached = np.zeros(n_groups, dtype=np.int64)
    chunk = chunk_size(p.size)
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        u = rng.random((size, p.size)) if coded is None else rng.random((size, coded[1]))[:, coded[0]]
        surrogate = (u < p).astype(np.float64)
        null = binned_stats(
            np.broadcast_to(p, surrogate.shape),
            surrogate,
            n_bins,
            binning,
            np.broadcast_to(seg, surrogate.shape),
            max(n_groups, 1),
        ).ece()[:, :n_groups]
        # a null ECE equal to the observed one up to rounding counts as reaching it
        reached += (null >= observed - 1e-12).sum(axis=0)
    p_value = np.where(np.isfinite(observed), (1 + reached) / (draws + 1), np.nan)
    return observed, p_value


def _holm(p_values: np.ndarray) -> np.ndarray:
    """:func:`gece.stats.intervals.holm` over the finite p-values (NaN: not a test, stays NaN)."""
    adjusted = holm([float(v) if np.isfinite(v) else None for v in p_values])
    return np.array([np.nan if v is None else v for v in adjusted], dtype=np.float64)


def calibration_tests(
    p,
    y,
    seg=None,
    n_groups: int = 1,
    tested=None,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    draws: int = 1000,
    seed: int = 0,
    clusters=None,
    variance: str = EXPECTED,
) -> list[CalibrationTest | None]:
    """Both tests for every group, Holm-corrected over the ``tested`` groups; z with the ``variance`` of
    :func:`spiegelhalter` over ``clusters``.

    ``tested`` (bool of shape (n_groups,), default all): the groups that are tested and enter the correction
    (the others get None: too few rows). With one group (``seg`` None) no correction is made.
    """
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if p.shape != y.shape or (p.size and (np.isnan(p).any() or p.min() < 0 or p.max() > 1)):
        raise ValueError("p and y must have the same length and p must lie in [0, 1]")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("y must be 0 or 1")
    seg_in = np.zeros(p.size, dtype=np.int64) if seg is None else np.asarray(seg, dtype=np.int64)
    tested = np.ones(n_groups, dtype=bool) if tested is None else np.asarray(tested, dtype=bool)
    counts = np.bincount(seg_in[seg_in >= 0], minlength=n_groups)
    z = spiegelhalter(p, y, seg_in, n_groups, clusters, variance)
    repeats = clusters if variance == EXPECTED else None  # the rows of a grouping cluster are drawn apart
    ece, p_cons = consistency_p(p, y, seg_in, n_groups, n_bins, binning, draws, seed, repeats)
    p_z = np.where(tested, normal_two_sided(z), np.nan)
    p_cons = np.where(tested, p_cons, np.nan)
    z_holm, cons_holm = (_holm(p_z), _holm(p_cons)) if seg is not None else (np.full(n_groups, np.nan),) * 2
    return [
        CalibrationTest(
            int(counts[g]),
            _finite(z[g]),
            _finite(p_z[g]),
            _finite(ece[g]),
            _finite(p_cons[g]),
            _finite(z_holm[g]),
            _finite(cons_holm[g]),
        )
        if tested[g]
        else None
        for g in range(n_groups)
    ]
