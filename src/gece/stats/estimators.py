"""Calibration-error estimators that small samples inflate less than binned ECE: batched numpy.

Binned ECE is biased upwards: within a bin of m pairs the sampling noise of mean(y) − mean(p)
is of order 1/√m, and |·| turns noise into error, so a perfectly calibrated model gets an ECE
of order √(M / n). Two estimators correct for it; both take batches (B, n) like
:func:`gece.stats.metrics.batch_metrics`.

**Debiased binned L2 error** (Kumar, Liang & Ma 2019, "Verified Uncertainty Calibration",
§5; their ``calibration.unbiased_l2_ce``). With the same bins as ECE, per bin m with n_m pairs,
ȳ_m = mean(y), p̄_m = mean(p)::

    CE²_debiased = Σ_m n_m / n · [ (ȳ_m − p̄_m)² − ȳ_m (1 − ȳ_m) / (n_m − 1) ]    (bins with n_m >= 2)
    ece_debiased = √ max(CE²_debiased, 0)

ȳ_m (1 − ȳ_m) / (n_m − 1) is the unbiased estimate of the variance of ȳ_m for binary y, so the
bracket is an unbiased estimate of the squared bin gap; bins with fewer than two pairs add 0.
It estimates the L2 calibration error (root mean squared bin gap), which is at least the L1
error that ECE estimates: compare it with itself (bias against its own full-data value), not
with ECE's level.

**Smooth ECE** (Błasiok & Nakkiran 2023, "Smooth ECE: Principled Reliability Diagrams via
Kernel Smoothing"; the ``relplot`` package). The residuals r_i = y_i − p_i are smoothed with a
Gaussian kernel of width σ reflected at 0 and 1, and the error is the mass of the smoothed
residual, normalized by that of the smoothed density::

    smECE_σ = ∫ |Σ_i r_i K_σ(t, p_i)| dt / ∫ Σ_i K_σ(t, p_i) dt

smECE_σ falls as σ grows; smooth ECE is its fixed point, the σ* with smECE_σ* = σ* (so the
value *is* σ*). No bins to choose, and the kernel's width grows where the error is small.

Computation: each pair's weight is spread linearly onto G = 129 grid nodes t_j = j / 128; the
reflected Gaussian is diagonal in the cosine basis cos(kπt) with eigenvalue exp(−(kπσ)²/2), so
smoothing at any σ is one multiplication of the nodes' cosine coefficients; the integrals are
sums over the nodes (within 1e-5 of the exact definition on the paper runs). σ* is found for
every row at once by the Illinois (modified regula falsi) method on smECE_σ − σ over [0, 1],
to 1e-7. ``relplot.smECE`` discretizes differently (a kernel truncated at ±0.5, a 10-step
bisection of σ): it agrees within 1.5e-3 where σ* < 0.25 and drifts by up to about 0.012 above,
where the truncation cuts the kernel (tests/test_estimators.py).
"""

from __future__ import annotations

import numpy as np

GRID = 129  # nodes of the smoothing grid on [0, 1]
ROOT_TOL = 1e-7  # stop when the bracket of σ* is this narrow
MAX_STEPS = 60


# ----------------------------------------------------------------------------- debiased
def debiased_ce(count: np.ndarray, conf_sum: np.ndarray, target_sum: np.ndarray) -> np.ndarray:
    """Kumar et al.'s debiased L2 calibration error from per-bin sums (shapes (..., M)) -> (...).

    NaN where no pair is binned. y must be binary (the variance term is ȳ(1 − ȳ)).
    """
    count = np.asarray(count, dtype=np.float64)
    n = count.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ybar = target_sum / count
        pbar = conf_sum / count
        term = (ybar - pbar) ** 2 - ybar * (1.0 - ybar) / (count - 1.0)
        sq = np.where(count >= 2, count * term, 0.0).sum(axis=-1) / n
    return np.where(n > 0, np.sqrt(np.maximum(sq, 0.0)), np.nan)


# ------------------------------------------------------------------------------- smooth
def _dct_matrices(grid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward and inverse DCT-I as matrices (grid × grid) and the wave numbers kπ."""
    j = np.arange(grid)
    cos = np.cos(np.pi * np.outer(j, j) / (grid - 1))
    w = np.ones(grid)
    w[0] = w[-1] = 0.5
    forward = cos * w[:, None] * (2.0 / (grid - 1))  # x -> a: x_j = Σ_k w_k a_k cos(π j k / (G − 1))
    inverse = cos * w[:, None]  # a -> x (rows k)
    return forward, inverse, np.pi * j


_FORWARD, _INVERSE, _WAVE = _dct_matrices(GRID)
_TRAPEZOID = np.r_[0.5, np.ones(GRID - 2), 0.5]  # node values are masses per 1 / (G − 1)


def _deposit(p: np.ndarray, weight: np.ndarray, key: np.ndarray, n_keys: int, grid: int = GRID) -> np.ndarray:
    """Spread each weight linearly onto its two grid nodes: (n_keys, grid) sums (1-D inputs)."""
    x = p * (grid - 1)
    lo = np.minimum(x.astype(np.int64), grid - 2)  # p >= 0, so the cast is the floor
    upper = weight * (x - lo)
    base = key * grid + lo
    size = n_keys * grid
    out = np.bincount(base, weights=weight - upper, minlength=size)
    out[1:] += np.bincount(base, weights=upper, minlength=size)[:-1]  # lo + 1, never past the key's row
    return out.reshape(n_keys, grid)


def smooth_ece_rows(mass_grid: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Smooth ECE of each row from its residual masses on the grid (rows, G) and its number of
    pairs n (rows,); NaN where n = 0.

    The end nodes' masses are doubled before the cosine transform (DCT-I weighs them by ½),
    so that the smoothing is the reflected kernel applied to point masses; the integral over t
    is the trapezoid rule over the nodes, and ∫ Σ_i K_σ(t, p_i) dt = n for every σ.
    """
    rows = mass_grid.shape[0]
    out = np.full(rows, np.nan)
    live = np.flatnonzero(n > 0)
    if live.size == 0:
        return out
    x = mass_grid[live].copy()
    x[:, 0] *= 2.0
    x[:, -1] *= 2.0
    coef = x @ _FORWARD
    denom = n[live].astype(np.float64)

    def f(sigma: np.ndarray, idx: np.ndarray) -> np.ndarray:
        damp = np.exp(-0.5 * (_WAVE[None, :] * sigma[:, None]) ** 2)
        smoothed = np.abs((coef[idx] * damp) @ _INVERSE)
        return (smoothed @ _TRAPEZOID) / denom[idx] - sigma

    all_idx = np.arange(live.size)
    lo, hi = np.zeros(live.size), np.ones(live.size)
    f_lo, f_hi = f(lo, all_idx), f(hi, all_idx)
    root = np.where(f_lo <= 0, 0.0, np.where(f_hi >= 0, 1.0, np.nan))
    active = np.flatnonzero(np.isnan(root))
    side = np.zeros(live.size, dtype=np.int8)  # Illinois: which end was kept last time
    for _ in range(MAX_STEPS):
        if active.size == 0:
            break
        a, b, fa, fb = lo[active], hi[active], f_lo[active], f_hi[active]
        c = (a * fb - b * fa) / (fb - fa)
        c = np.where((c > a) & (c < b), c, 0.5 * (a + b))
        fc = f(c, active)
        left = fc > 0  # the root is above c: c becomes the lower end
        lo[active] = np.where(left, c, a)
        f_lo[active] = np.where(left, fc, fa)
        hi[active] = np.where(left, b, c)
        f_hi[active] = np.where(left, fb, fc)
        # Illinois: halve the value at the end kept twice in a row, so both ends move
        last = side[active]
        f_hi[active[left & (last == 1)]] *= 0.5
        f_lo[active[~left & (last == -1)]] *= 0.5
        side[active] = np.where(left, 1, -1)
        done = (hi[active] - lo[active] < ROOT_TOL) | (fc == 0)
        root[active[done]] = np.where(fc[done] == 0, c[done], 0.5 * (lo[active[done]] + hi[active[done]]))
        active = active[~done]
    if active.size:
        root[active] = 0.5 * (lo[active] + hi[active])
    out[live] = root
    return out


def smooth_ece_batch(
    p: np.ndarray, y: np.ndarray, seg: np.ndarray | None = None, n_seg: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Smooth ECE of p against y over all pairs and per segment: inputs (B, n), outputs (B,)
    and (B, n_seg).

    ``seg`` holds segment codes in [0, n_seg) or a negative code for pairs outside every
    segment (as in :func:`gece.stats.metrics.binned_stats`); those count only in the first output.
    One pass spreads the residuals per segment (pairs outside go to an extra one) and adds the
    segments up for all pairs. NaN for an empty segment.
    """
    p = np.atleast_2d(np.asarray(p, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    b, _ = p.shape
    seg = np.zeros(p.shape, dtype=np.int64) if seg is None else np.atleast_2d(seg)
    k = n_seg + 1  # the extra segment n_seg holds the pairs outside every segment
    key = (np.arange(b)[:, None] * k + np.where(seg >= 0, seg, n_seg)).ravel()
    mass = _deposit(p.ravel(), (y - p).ravel(), key, b * k).reshape(b, k, GRID)
    counts = np.bincount(key, minlength=b * k).reshape(b, k)
    rows = np.concatenate([mass.sum(axis=1), mass[:, :n_seg].reshape(b * n_seg, GRID)])
    values = smooth_ece_rows(rows, np.concatenate([counts.sum(axis=1), counts[:, :n_seg].ravel()]))
    return values[:b], values[b:].reshape(b, n_seg)
