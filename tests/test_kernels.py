"""The compiled loops of the exact products' checks (gece.scoring.kernels, called as gece.scoring.exact calls them)
against numpy and exact sums."""

import math

import numpy as np
import pytest

from gece.scoring import exact


def _check_numpy(y, ea, nb, m):
    """Stage 1 as numpy passes: the reference the compiled loop must equal bit for bit (a NaN is undecided: stage
    2 keeps it)."""
    rows = np.arange(y.shape[0])
    e = ea[:, None] * (nb[np.zeros_like(rows)] if nb.shape[0] == 1 else nb[rows // m])
    lo, hi = (y - e).astype(np.float32), (y + e).astype(np.float32)
    return lo, np.flatnonzero((lo.view(np.int32) != hi.view(np.int32)) | np.isnan(lo))


@pytest.mark.parametrize("shared", [True, False])
def test_the_stage_1_loop_equals_numpy_bit_for_bit(shared):
    rng = np.random.default_rng(4)
    p, m, n = 3, 5, 37  # 555 entries: not a whole number of 8-entry words
    y = rng.standard_normal((p * m, n)) * np.exp2(rng.integers(-30, 30, (p * m, n)))
    y[0, :4] = [0.0, -0.0, np.nan, np.inf]
    y[1, :2] = [-1e-50, 1e-50]  # y - err and y + err round to -0 and +0: undecided
    ea = np.abs(rng.standard_normal(p * m)) * 1e-7  # loose bounds: many undecided entries
    nb = np.abs(rng.standard_normal((1 if shared else p, n)))
    lo, idx = exact._check(y.reshape(p, m, n), ea.reshape(p, m), nb)  # kernels.check_rows with its scratch arrays
    flat = np.ravel_multi_index(idx, (p, m, n))
    want_lo, want_idx = _check_numpy(y, ea, nb, m)
    assert np.array_equal(lo.reshape(p * m, n).view(np.int32), want_lo.view(np.int32))
    assert np.array_equal(flat, want_idx) and 50 < flat.size < y.size
    assert {1 * n, 1 * n + 1} <= set(flat.tolist())


def test_the_stage_1_loop_does_not_fuse_multiply_and_subtract():
    """y = round(a b) makes y - round(a b) exactly 0; a fused multiply-subtract would give a b's rounding
    error instead. The loop must compute what it says, as numpy does, on every CPU."""
    rng = np.random.default_rng(5)
    ea, nb = rng.standard_normal(64), rng.standard_normal((1, 64))
    y = ea[:, None] * nb
    lo, _ = exact._check(y[None], ea[None], nb)
    assert not lo.any()


def test_stage_2_sums_are_within_their_bound_of_the_exact_sums():
    """kernels.split_sums through exact._split_sums, which adds the error bound."""
    rng = np.random.default_rng(6)
    k = 301
    a = (rng.standard_normal((2, 4, k)) * np.exp2(rng.integers(-20, 20, (2, 4, k)))).astype(np.float32)
    b = rng.standard_normal((1, 6, k)).astype(np.float32)
    a[0, 0] = b[0, 0]  # a_0 . b_0 = ||b_0||^2, no cancellation
    a[1, 3, :-1] = -b[0, 5, :-1] * b[0, 5, :-1] / b[0, 5, :-1]  # near-total cancellation
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    p, i, j = (x.ravel() for x in np.meshgrid(np.arange(2), np.arange(4), np.arange(6), indexing="ij"))
    pb = np.zeros_like(p)
    bound = np.sqrt((a64[p, i] ** 2).sum(-1) * (b64[pb, j] ** 2).sum(-1))
    total, err = exact._split_sums(a64, b64, (p, pb, i, j), bound)
    truth = np.array([math.fsum((a64[p[t], i[t]] * b64[0, j[t]]).tolist()) for t in range(p.size)])
    assert np.all(np.abs(total - truth) <= err)
    assert np.all(err <= 4 * exact.U * np.abs(truth) + 1e-20 * bound)  # and the bound is tight
