"""Resampling: percentile bootstrap confidence intervals, vectorized over draws.

A statistic is any function that maps arrays of shape (B, n) to a dict of (B,) arrays (the
batched kernels of :mod:`gece.stats.metrics`). Resampling gathers all B resamples at once (in
chunks, to bound memory), so 1000 draws cost a handful of numpy calls, not 1000 loops.

**Cluster bootstrap.** Rows are not always independent: WinoQueer repeats the same two sentences
up to four times, and its templates (one sentence frame, many identity terms) are correlated
units. Resampling rows then treats a repeated pair as independent evidence and the interval comes
out too narrow. With ``clusters`` (one code per row: the prepared pairs' ``cluster`` column),
each resample draws K clusters with replacement out of the K of the sample and takes every row of
each drawn cluster (Davison & Hinkley 1997, §3.8, "resampling clusters": the first stage of the
two-stage bootstrap, the one that keeps the dependence within a cluster; Field & Welsh 2007 show
it is the consistent choice when clusters are the independent units)::

    c*_1..c*_K ~ Uniform{1..K}, i.i.d.;   rows* = rows(c*_1) ++ ... ++ rows(c*_K)

Resamples then differ in length (the sum of the drawn clusters' sizes); each is evaluated on its
own, as a (1, L_b) batch: the statistic sees exactly the rows the resample holds, with no padding
or weights to approximate. When every cluster is a single row (``clusters`` None, or all
distinct) the draws are the row bootstrap's, bit for bit: the same indices from the same stream.

References: A. C. Davison and D. V. Hinkley (1997). *Bootstrap Methods and their Application*.
Cambridge University Press. C. A. Field and A. H. Welsh (2007). Bootstrapping clustered data.
*Journal of the Royal Statistical Society B* 69(3), 369-390.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

Statistic = Callable[..., Mapping[str, np.ndarray]]
CHUNK = 250  # draws evaluated per call ...
BUDGET = 1 << 19  # ... unless CHUNK * n would exceed this many elements per array (4 MiB of float64)


def chunk_size(n: int, chunk: int = CHUNK, budget: int = BUDGET) -> int:
    """Draws per call: ``chunk``, fewer for large n so that memory stays bounded whatever n.

    An even number, a function of n only, so the resamples depend on (seed, n) alone; every
    benchmark up to ``budget / chunk`` = 2097 pairs uses ``chunk``.
    """
    if n * chunk <= budget:
        return chunk
    return max(2, (budget // max(n, 1)) // 2 * 2)


def cluster_codes(clusters: np.ndarray | None, n: int) -> tuple[np.ndarray, int] | None:
    """The clusters' codes 0..K-1 in order of first appearance and K, or None when there are none or every cluster
    is a single row (then the row bootstrap is the cluster bootstrap)."""
    if clusters is None:
        return None
    keys = np.asarray(clusters)
    if len(keys) != n:
        raise ValueError(f"clusters has {len(keys)} entries for {n} rows")
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if len(first) == n:
        return None
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)], len(first)


def cluster_rows(codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of every cluster, contiguous: (rows, start, size) with rows[start[c] : start[c] + size[c]]
    the rows of cluster c in their original order."""
    rows = np.argsort(codes, kind="stable")
    size = np.bincount(codes, minlength=k)
    start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
    return rows, start, size


def gather(rows: np.ndarray, start: np.ndarray, size: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """The rows of the clusters ``chosen`` (1-D), concatenated in that order."""
    sizes = size[chosen]
    offset = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return rows[np.repeat(start[chosen], sizes) + offset]


def bootstrap(
    stat: Statistic,
    arrays: Mapping[str, np.ndarray],
    draws: int,
    seed: int,
    chunk: int | None = None,
    clusters=None,
    **kwargs,
) -> dict[str, np.ndarray]:
    """Evaluate ``stat`` on ``draws`` resamples (pairs, or clusters of pairs, drawn with replacement) of ``arrays``.

    All arrays share their length n and are resampled with the same indices, so paired
    quantities stay paired. Deterministic for a given seed. Resamples are drawn ``chunk`` at a
    time (default :func:`chunk_size` of n, so memory does not grow with n). Returns {name: (draws,) array}.

    ``clusters`` (one label per row, or None): the cluster bootstrap of the module docstring, K clusters
    drawn with replacement per resample (``rng.integers(0, K, size=(chunk, K))``), each resample evaluated
    alone; with every cluster a single row it is the row bootstrap, the same draws bit for bit.
    """
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) != 1:
        raise ValueError(f"arrays differ in length: {lengths}")
    (n,) = lengths
    chunk = chunk or chunk_size(n)
    coded = cluster_codes(clusters, n)  # None: no clusters, or every one a single row
    codes, k = coded if coded is not None else (None, n)
    rows, first, sizes = cluster_rows(codes, k) if k != n else (None, None, None)
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {}
    arrays = {name: np.asarray(a) for name, a in arrays.items()}
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        if k == n:
            idx = rng.integers(0, n, size=(size, n)) if n else np.zeros((size, 0), dtype=np.int64)
            outs = [stat(**{name: a[idx] for name, a in arrays.items()}, **kwargs)]
        else:
            chosen = rng.integers(0, k, size=(size, k))
            outs = []
            for b in range(size):  # resamples differ in length: one (1, L_b) batch each
                idx = gather(rows, first, sizes, chosen[b])[None, :]
                outs.append(stat(**{name: a[idx] for name, a in arrays.items()}, **kwargs))
        for out in outs:
            for name, v in out.items():
                parts.setdefault(name, []).append(np.asarray(v))
    return {name: np.concatenate(v) for name, v in parts.items()}


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval [q_(1-level)/2, q_(1+level)/2] of the defined (non-NaN) draws.

    Draws where the statistic is undefined (e.g. a resample without female predictions) are
    left out; an interval from no defined draw is (None, None).
    """
    s = np.asarray(samples, dtype=np.float64)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return None, None
    lo, hi = np.quantile(s, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def subsample(
    stat: Statistic,
    arrays: Mapping[str, np.ndarray],
    size: int,
    draws: int,
    seed: int,
    **kwargs,
) -> dict[str, np.ndarray]:
    """Evaluate ``stat`` on ``draws`` random subsets of ``size`` pairs drawn without replacement.

    Subset k is the first ``size`` entries of a uniformly random permutation (argsort of
    uniform noise), all drawn at once. Returns {name: (draws,) array}.

    Rows, not clusters, on purpose: the sample-size ablation asks how an estimator's value on N pairs
    departs from its value on the whole benchmark (bias, spread, RMSE as functions of N), a property of
    the estimator on subsets of this finite set of rows, not an interval for a population quantity. N
    counts rows, which subsets of clusters of unequal sizes could not hold fixed.
    """
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) != 1:
        raise ValueError(f"arrays differ in length: {lengths}")
    (n,) = lengths
    if not 1 <= size <= n:
        raise ValueError(f"subset size {size} must lie in [1, {n}]")
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((draws, n)), axis=1)[:, :size]
    out = stat(**{k: np.asarray(a)[idx] for k, a in arrays.items()}, **kwargs)
    return {k: np.asarray(v) for k, v in out.items()}


def two_sided_p(differences: np.ndarray) -> float | None:
    """Two-sided bootstrap p-value for "the difference is 0", from bootstrap draws d*_b:

        p = min(1, 2 (min(#{d*_b <= 0}, #{d*_b >= 0}) + 1) / (B + 1))

    the share of draws on the far side of 0, doubled, with the +1 correction that keeps p
    above 0 for a finite B. It agrees with the percentile interval: p < 1 − level exactly when
    0 lies (about) outside it. Identical inputs give d* = 0 everywhere and p = 1. Undefined
    draws (NaN) are left out; None if none is defined.
    """
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    tail = min(int((d <= 0).sum()), int((d >= 0).sum()))
    return float(min(1.0, 2.0 * (tail + 1) / (d.size + 1)))
