"""The within-model gender gap ECE_female − ECE_male and its permutation test.

Two groupings (docs/metrics.md): by the predicted gender (the gender of the more probable variant, as
Gender-ECE groups; ``gap_pred``) and by the human-preferred gender (``gap_true``, the parts of
cc-ECE). The bootstrap gives each gap an interval and a p-value (:mod:`gece.stats.intervals`,
computed in :func:`gece.stats.metrics.summarize` from the same resamples as every other metric).

The **permutation test** asks the same question without resampling pairs: under the null
hypothesis the gender group says nothing about calibration, so the group labels are
exchangeable among the pairs that have one. Shuffling them B times (p and y stay in place,
group sizes are kept) gives the null distribution of the gap d*_1..d*_B, and the two-sided,
equal-tailed p-value is::

    p_perm = min(1, 2 (1 + min(#{d*_b <= d̂}, #{d*_b >= d̂})) / (B + 1))

Equal tails rather than |d*| >= |d̂|: binned ECE is biased upwards more in the smaller group, so
the null distribution of the gap is not centred on 0 when the groups differ in size; the
permutation test accounts for that, the bootstrap test does not (docs/statistics.md compares
them on the paper runs).

**Clusters.** When pairs come in clusters (repeated pairs, sentence frames: :mod:`gece.stats.bootstrap`),
single labels are not exchangeable across the whole sample. A shuffling then permutes in two stages (a
restricted permutation; Good 2005, sec. 3.7): whole clusters' label vectors are exchanged among the
clusters of the same size, then the labels are shuffled within each cluster. Exchanging clusters alone
would barely move the labels where the groups cut across the clusters (WinoQueer's sentence frames each
hold every group in the same order, so most exchanges give back the observed labels and p would be
near 1 whatever the data); shuffling within a cluster uses the exchangeability that does hold under the
null, between pairs of one frame. With every cluster a single pair this is the shuffling above, bit for
bit.

**Holm over the runs of a benchmark** (:func:`holm_over_runs`, the metrics stage). A table or figure tests one gap
per run, so each gap's bootstrap p-value is corrected by Holm's method over the runs of the benchmark, one grouping at
a time (``<gap>_p_holm``), and gets the interval that agrees with that verdict: the draws' interval at the level Holm
holds the test to (``<gap>_level_holm``, ``<gap>_ci_low_holm`` / ``_ci_high_holm``,
:func:`gece.stats.intervals.holm_intervals`), which excludes 0 exactly when ``<gap>_p_holm`` < :data:`ALPHA`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gece.catalog.metric_defs import GAP_HOLM, GAPS
from gece.stats.bootstrap import chunk_size, cluster_codes
from gece.stats.intervals import holm_intervals

ALPHA = 0.05  # the level of the gender gaps' Holm verdicts (the gender-gap table's †, the first screen's figures)
# (p, y, groups), all (B, n) -> (B, 2): ECE of group 0 (male) and group 1 (female)
GroupECE = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def shuffled_groups(groups: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` rows of ``groups`` with the labels of the grouped pairs (codes >= 0) shuffled
    among themselves; pairs without a group keep their code. Shape (size, n).

    Parameters
    ----------
    groups : array-like of int of shape (n,)
        Group code of each pair: 0, 1, ... for the groups, a negative code for a pair in no group
        (such pairs are not shuffled).
    size : int
        Number of shuffled rows to draw.
    rng : numpy.random.Generator
        Random stream; each row consumes ``k`` uniforms, k the number of grouped pairs, and the
        labels are permuted by their argsort.

    Returns
    -------
    shuffled : ndarray of shape (size, n)
        One permutation of the grouped pairs' codes per row, same dtype as ``groups``; every row
        keeps the group sizes and the positions of the pairs without a group.
    """
    groups = np.asarray(groups)
    where = np.flatnonzero(groups >= 0)
    out = np.broadcast_to(groups, (size, groups.size)).copy()
    if where.size:
        order = np.argsort(rng.random((size, where.size)), axis=1)
        out[:, where] = groups[where][order]
    return out


def shuffled_clusters(groups: np.ndarray, codes: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` rows of ``groups`` with the label vectors of whole clusters exchanged among the clusters of the
    same size, then shuffled within each cluster (``codes``: each pair's cluster, 0..K-1). Shape (size, n).

    Parameters
    ----------
    groups : array-like of int of shape (n,)
        Group code of each pair (negative: no group; such codes move with their cluster).
    codes : ndarray of int of shape (n,)
        Cluster code of each pair, 0..K-1.
    size : int
        Number of shuffled rows to draw.
    rng : numpy.random.Generator
        Random stream; each row consumes one uniform per cluster, then one per pair.

    Returns
    -------
    shuffled : ndarray of shape (size, n)
        Per row, each cluster's pairs carry the labels of one cluster of the same size, in a random order.
    """
    groups = np.asarray(groups)
    order = np.lexsort((np.arange(codes.size), codes))  # the pairs cluster by cluster, in order
    sizes = np.bincount(codes)
    out = np.broadcast_to(groups, (size, groups.size)).copy()
    keys = rng.random((size, sizes.size))
    for s in np.unique(sizes):
        same = np.flatnonzero(sizes == s)  # the clusters of size s
        rows = order.reshape(-1)[np.isin(codes[order], same)].reshape(len(same), s)  # their pairs, a cluster a row
        perm = np.argsort(keys[:, same], axis=1)  # (size, m): the cluster (of `same`) that gives its labels
        labels = groups[rows][perm]  # (size, m, s)
        within = np.argsort(rng.random(labels.shape), axis=2)  # then shuffled within each cluster
        out[:, rows] = np.take_along_axis(labels, within, axis=2)
    return out


def null_statistics(
    p: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    draws: int,
    seed: int,
    statistic: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    clusters: np.ndarray | None = None,
) -> np.ndarray:
    """The permutation null: ``statistic(p, y, g)`` for ``draws`` shufflings ``g`` of ``groups``.

    ``statistic`` takes (size, n) arrays and returns one value per row. The shufflings come from one
    random stream seeded with ``seed``, in chunks that bound the memory (:func:`gece.stats.bootstrap.chunk_size`);
    the chunking does not change the stream, so the null is the same for every chunk size. Shape (draws,).

    Parameters
    ----------
    p : ndarray of shape (n,)
        Pair scores in [0, 1], kept in place across the shufflings.
    y : ndarray of shape (n,)
        Targets (0/1 labels, or the soft targets in [0, 1] of :mod:`gece.stats.by_group`), kept in place.
    groups : ndarray of int of shape (n,)
        Group codes; codes >= 0 are shuffled among themselves (:func:`shuffled_groups`), negative codes
        (no group) stay where they are.
    draws : int
        Number of shufflings B.
    seed : int
        Seed of the one random stream (``np.random.default_rng(seed)``) all shufflings come from.
    statistic : callable
        ``statistic(p, y, g)`` with three arrays of shape (size, n) (p and y broadcast to every row, g
        the shuffled codes), returning one value per row, shape (size,).
    clusters : array-like of shape (n,), optional
        Cluster key of each pair; whole clusters' labels are exchanged (:func:`shuffled_clusters`). None, or
        every cluster a single pair: labels are shuffled pair by pair (:func:`shuffled_groups`).

    Returns
    -------
    null : ndarray of shape (draws,)
        The statistic on each shuffling d*_1..d*_B, in the order of the stream.

    References
    ----------
    .. [1] P. I. Good (2005). *Permutation, Parametric, and Bootstrap Tests of Hypotheses*, 3rd ed.
           Springer.
    """
    n = len(p)
    coded = cluster_codes(clusters, n)
    rng = np.random.default_rng(seed)
    null = []
    step = chunk_size(n)
    for start in range(0, draws, step):
        size = min(step, draws - start)
        g = shuffled_groups(groups, size, rng) if coded is None else shuffled_clusters(groups, coded[0], size, rng)
        null.append(statistic(np.broadcast_to(p, (size, n)), np.broadcast_to(y, (size, n)), g))
    return np.concatenate(null)


def permutation_p(
    p: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    estimate: float | None,
    draws: int,
    seed: int,
    group_ece: GroupECE,
    clusters: np.ndarray | None = None,
) -> float | None:
    """Equal-tailed permutation p-value of the gap ECE_female − ECE_male (``draws`` shuffles).

    None when the gap is undefined (a group is empty).

    Parameters
    ----------
    p : ndarray of shape (n,)
        Pair scores in [0, 1].
    y : ndarray of shape (n,)
        Labels, 0 or 1.
    groups : ndarray of int of shape (n,)
        Gender code of each pair: 0 male, 1 female, negative for a pair in neither group (other words,
        exact ties), which is left out of both groups and of the shuffling.
    estimate : float or None
        The observed gap d̂ = ECE_female − ECE_male (signed, in [−1, 1]); None or NaN when undefined.
    draws : int
        Number of shuffles B; below 1 no test is run.
    seed : int
        Seed of the shuffles (:func:`null_statistics`).
    group_ece : callable
        ``group_ece(p, y, g)`` with arrays of shape (B, n), returning shape (B, 2): the ECE of group 0
        (male) and of group 1 (female) per row (``GroupECE``).
    clusters : array-like of shape (n,), optional
        Cluster key of each pair: whole clusters are exchanged (:func:`null_statistics`).

    Returns
    -------
    p_perm : float or None
        The two-sided, equal-tailed p-value min(1, 2 (1 + min(#{d*_b <= d̂}, #{d*_b >= d̂})) / (B + 1)),
        in (0, 1]; None when ``estimate`` is None or not finite, or ``draws`` < 1.

    References
    ----------
    .. [1] B. Phipson and G. K. Smyth (2010). Permutation P-values should never be zero: calculating
           exact P-values when permutations are randomly drawn. *Statistical Applications in Genetics
           and Molecular Biology* 9(1).
    .. [2] P. I. Good (2005). *Permutation, Parametric, and Bootstrap Tests of Hypotheses*, 3rd ed.
           Springer.
    """
    if estimate is None or not np.isfinite(estimate) or draws < 1:
        return None

    def gap(pp: np.ndarray, yy: np.ndarray, g: np.ndarray) -> np.ndarray:
        e = group_ece(pp, yy, g)
        return e[:, 1] - e[:, 0]

    d = null_statistics(p, y, groups, draws, seed, gap, clusters)
    tail = min(int((d <= estimate).sum()), int((d >= estimate).sum()))
    return float(min(1.0, 2.0 * (tail + 1) / (d.size + 1)))


def holm_over_runs(reports: list[dict], draws: list[dict[str, np.ndarray]], alpha: float = ALPHA) -> None:
    """Add each gap's Holm-corrected p-value, level and interval over the runs of one benchmark (module docstring)
    to their metrics reports, in place: ``<gap>_<suffix>`` for each suffix of
    :data:`gece.catalog.metric_defs.GAP_HOLM`.

    Parameters
    ----------
    reports : list of dict
        The metrics reports of the benchmark's runs, each with ``<gap>`` and ``<gap>_p``; updated in place.
    draws : list of dict of str to ndarray
        Per run, each gap's bootstrap draws (those its ``<gap>_p`` was computed from,
        :func:`gece.stats.metrics.summarize`); a run without them (no pairs) stays out of the family.
    alpha : float
        The family-wise level of Holm's correction.
    """
    for gap in GAPS:
        family = holm_intervals(
            [r.get(f"{gap}_p") for r in reports],
            [r.get(gap) for r in reports],
            [d.get(gap, np.empty(0)) for d in draws],
            alpha,
        )
        for report, values in zip(reports, family, strict=True):
            report.update({f"{gap}_{suffix}": v for suffix, v in zip(GAP_HOLM, values, strict=True)})
