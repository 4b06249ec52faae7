"""Compiled loops of the correctly rounded product's stages 1 and 2 (:func:`gece.scoring.exact.matmul`).

Both stages are a few floating-point operations per entry. As numpy passes over temporary arrays they
took 2.5 s (the stage-1 check) and 2.0 s (stage 2: about one entry in 2,000, but K products and a split
sum each) of an 18 s extraction whose float64 products took 7.4 s (smollm2-135m, 300 WinoBias pairs, 2
cores, with ``cProfile``). Here each stage is one loop compiled by numba (LLVM), one pass with no
temporaries: 0.7-0.9 s and 0.6-0.8 s in the same run.

Why numba and not a C extension or ``torch.compile``: numba compiles at first use on the user's
machine with no compiler installed (llvmlite ships LLVM), caches the machine code beside the module, and
without ``fastmath`` it keeps IEEE semantics exactly as written: no reassociation (the split sum's
``(sigma + p) - sigma`` stays), no fused multiply-add, float64 -> float32 conversions round to nearest
even. So a loop computes the same bits on any x86-64 CPU, as numpy's passes did. (What the stages
return is a mathematical function of the inputs anyway: the correctly rounded product; these loops only
decide faster which entries need more work.)

Threads do not help these loops: they are bound by memory bandwidth (stage 1 took 1.2-1.7 ns per entry in
one thread or two, on products of 100-400 rows), so they run in the calling thread.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def check_rows(y, ea, nb, m, lo, flags, undecided):  # pragma: no cover - compiled; covered through exact.matmul
    """Stage 1 over y (R, N), the float64 product, its rows r = p M + i over the batch dimensions flattened:
    with err = ea[r] nb[p, j] (nb (P|1, N): one row shared by every p, a weight),

        lo[r, j] = round_f32(y - err)

    and the flat index r N + j of every entry where round_f32(y - err) and round_f32(y + err) differ (bit for
    bit: -0 and +0 differ, a NaN is undecided) is written to ``undecided``, in order. Returns their number.
    ``flags`` (R N rounded up to whole 8-byte words, zeros) is scratch: the loop over the entries sets a flag
    without branching (so that it runs in SIMD registers), then the flags are scanned a word at a time.
    """
    n = y.shape[1]
    shared = nb.shape[0] == 1
    for r in range(y.shape[0]):
        a = ea[r]
        yr, lr, nr, fr = y[r], lo[r], nb[0 if shared else r // m], flags[r * n : (r + 1) * n]
        for j in range(n):
            e = a * nr[j]
            lo_ = np.float32(yr[j] - e)
            hi_ = np.float32(yr[j] + e)
            lr[j] = lo_
            fr[j] = (lo_ != hi_) | (np.signbit(lo_) != np.signbit(hi_))
    words = flags.view(np.uint64)
    count = 0
    for w in range(words.shape[0]):
        if words[w]:
            for x in range(8 * w, 8 * w + 8):
                if flags[x]:
                    undecided[count] = x
                    count += 1
    return count


@numba.njit(nogil=True, cache=True)
def _split_sum(a, b, sigma):  # pragma: no cover - compiled
    """sum_k a_k b_k split on sigma's grid (see :func:`split_sums`), in four interleaved sums of each kind so
    that the additions overlap (the high parts' sum is exact in any order, the remainders' bound holds for any)."""
    k = a.shape[0]
    q0 = q1 = q2 = q3 = r0 = r1 = r2 = r3 = 0.0
    k4 = k - k % 4
    for x in range(0, k4, 4):
        p0, p1, p2, p3 = a[x] * b[x], a[x + 1] * b[x + 1], a[x + 2] * b[x + 2], a[x + 3] * b[x + 3]
        h0, h1, h2, h3 = (sigma + p0) - sigma, (sigma + p1) - sigma, (sigma + p2) - sigma, (sigma + p3) - sigma
        q0, q1, q2, q3 = q0 + h0, q1 + h1, q2 + h2, q3 + h3
        r0, r1, r2, r3 = r0 + (p0 - h0), r1 + (p1 - h1), r2 + (p2 - h2), r3 + (p3 - h3)
    for x in range(k4, k):
        p0 = a[x] * b[x]
        h0 = (sigma + p0) - sigma
        q0, r0 = q0 + h0, r0 + (p0 - h0)
    return ((q0 + q1) + (q2 + q3)) + ((r0 + r1) + (r2 + r3))


@numba.njit(nogil=True, cache=True)
def split_sums(a, bt, p, pb, i, j, bound):  # pragma: no cover - compiled; covered through exact.matmul
    """Stage 2: the sums s_t = sum_k a[p_t, i_t, k] bt[pb_t, j_t, k] of the listed entries, nearly exact in
    one pass (Rump's extraction: Rump, Ogita and Oishi, "Accurate floating-point summation part I", SIAM J.
    Sci. Comput. 31, 2008). Returns the sums and the grids sigma_t, both (u,).

    Each product p_k = a_k b_k is exact in float64 (float32 factors). ``bound`` (u,) is at least
    max_k |p_k| (here ||a|| ||b||). With sigma a power of two at least 4 K bound, q_k = (sigma + p_k) - sigma
    is p_k rounded to a multiple of ulp(sigma), exactly, and r_k = p_k - q_k is exact. The q_k are integers
    in units of ulp(sigma) whose partial sums stay below 2^53, so their sum is exact; the sum of the r_k is
    off by at most gamma_K K ulp(sigma) / 2 (the error bound is written in :func:`gece.scoring.exact._split_sums`).
    """
    k = a.shape[2]
    shift = 2
    c = max(1, k - 1)
    while c:  # the bit length of K - 1
        shift += 1
        c >>= 1
    u = p.shape[0]
    total = np.empty(u)
    sigma = np.empty(u)
    for t in range(u):
        sigma[t] = math.ldexp(1.0, math.frexp(bound[t])[1] + shift)
        total[t] = _split_sum(a[p[t], i[t]], bt[pb[t], j[t]], sigma[t])
    return total, sigma
