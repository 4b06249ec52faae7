"""Resampling: percentile bootstrap confidence intervals, vectorized over draws.

A statistic is any function that maps arrays of shape (B, n) to a dict of (B,) arrays (the
batched kernels of :mod:`gece.stats.metrics`). Resampling gathers all B resamples at once (in
chunks, to bound memory), so 1000 draws cost a handful of numpy calls, not 1000 loops.
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


def bootstrap(
    stat: Statistic,
    arrays: Mapping[str, np.ndarray],
    draws: int,
    seed: int,
    chunk: int | None = None,
    **kwargs,
) -> dict[str, np.ndarray]:
    """Evaluate ``stat`` on ``draws`` resamples (pairs drawn with replacement) of ``arrays``.

    All arrays share their length n and are resampled with the same indices, so paired
    quantities stay paired. Deterministic for a given seed. Resamples are drawn ``chunk`` at a
    time (default :func:`chunk_size`, so memory does not grow with n). Returns {name: (draws,) array}.
    """
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) != 1:
        raise ValueError(f"arrays differ in length: {lengths}")
    (n,) = lengths
    chunk = chunk or chunk_size(n)
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {}
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        idx = rng.integers(0, n, size=(size, n)) if n else np.zeros((size, 0), dtype=np.int64)
        out = stat(**{k: np.asarray(a)[idx] for k, a in arrays.items()}, **kwargs)
        for k, v in out.items():
            parts.setdefault(k, []).append(np.asarray(v))
    return {k: np.concatenate(v) for k, v in parts.items()}


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
