"""Matrix products and elementary functions whose float32 results are the same on every x86-64 CPU.

A float32 matrix product from a BLAS library (MKL, OpenBLAS, oneDNN) sums its K products in an
order chosen by the kernel, and the kernel depends on the CPU (AVX2 or AVX-512, Intel or AMD), the
number of threads and the shape (a row multiplied alone or among 500 others). Different orders
round differently, so the same sentence scored on two machines, or in two batch sizes, differs in
the 7th significant digit. Vendor switches (MKL's ``MKL_CBWR``) pin the order on some CPUs only.

gece instead computes every product it needs **correctly rounded**:

    C_ij = round_f32( sum_k A_ik B_kj )        (the exact sum, rounded once to float32)

which is a mathematical function of the inputs, so any CPU, BLAS, thread count and shape gives the
same bits. It is computed in three stages (:func:`matmul`):

1. One float64 BLAS product y of the float32 inputs. Each product A_ik B_kj is exact in float64
   (24 + 24 bits < 53), and whatever order the kernel sums in (K - 1 additions at most per term),

       |y_ij - s_ij| <= gamma_K sum_k |A_ik B_kj| <= gamma_K ||A_i.|| ||B_.j||,
       gamma_K = K u / (1 - K u),  u = 2^-53                 (Higham, *Accuracy and Stability of
                                                              Numerical Algorithms*, 2002, §3.1)

   If both ends y_ij -/+ err round to the same float32, so does the exact sum s_ij (rounding is
   monotonic): that float32 is the answer. Here err is twice the bound (a margin for the rounding
   of the norms and of y -/+ err). On real models about 1 entry in 2,000 is left undecided.
2. The undecided entries' products are summed again by Rump's extraction
   (:func:`gece.scoring.kernels.split_sums`): each product is split into a high part on a common
   grid, whose sum is exact in any order, and a small remainder, so the sum is known to within
   u |s| + about 2^-75 max_k |A_ik B_kj|, and checked the same way.
3. An entry still undecided (its exact sum within about 2^-53 of a float32 rounding boundary, so
   about one in 10^8 of stage 2's, or an exact zero) is summed exactly by ``math.fsum``
   (Shewchuk's algorithm, correctly rounded to float64); when that float64 lies exactly halfway
   between two float32 values, the sign of the exact remainder decides (:func:`_sum_f32`).

Cost (measured with ``cProfile``, smollm2-135m on all 771 WinoBias pairs, one thread, OpenBLAS's
AVX-512 kernels): the float64 products take about 58% of the time; the stage-1 check, one compiled
pass of IEEE operations (:mod:`gece.scoring.kernels`, about 1 ns per entry), about 7%; stages 2 and 3
about 5%.

The same idea covers the model's other CPU-dependent steps (:func:`gece.scoring.exact_model.make_exact`
routes a model through them):

- torch's exp, log, sin, cos and tanh call Intel's vector math library, whose results depend on
  the CPU. RoPE's cos/sin tables are computed with Python's ``math`` (the C library, the same
  code on every x86-64 machine with FMA) and rounded to float32 (:func:`rope_tables`), and
  soft-capping uses :func:`tanh`, built from IEEE operations only.
- torch's own kernels (SiLU, GELU, softmax, normalization) are pinned to their portable, non-SIMD
  build: ``ATEN_CPU_CAPABILITY=default`` (set when :mod:`gece` is imported). With AVX2 or AVX-512
  kernels a vector's tail is computed by scalar code with another exp, so an element's bits depend
  on where it sits in the tensor (measured: SiLU, GELU and sigmoid).
- attention sums each query's softmax over a row laid out the same way whatever the batch (the
  keys it may see, in order, padded to a fixed length): see :mod:`gece.scoring.attention`.
"""

from __future__ import annotations

import math
import threading

import numpy as np

U = 2.0**-53  # unit roundoff of float64
EXACT_DEVICES = frozenset({"cpu"})  # where products are correctly rounded; elsewhere (GPUs) torch's own kernels


def rounded(device) -> bool:
    """True where gece's numerics apply (:data:`EXACT_DEVICES`): correctly rounded products, portable kernels,
    the same bits in every layout. Elsewhere the model runs on the device's own kernels, and batch invariance
    comes from forward passes of fixed shapes (:mod:`gece.scoring.packing`)."""
    return device.type in EXACT_DEVICES


def _gamma(k: int) -> float:
    """A bound on a float64 sum of k exact products, in units of sum_k |p_k|, with room for the rounding
    of the bound itself and of y -/+ err: Higham's gamma_(k-1) = (k-1) u / (1 - (k-1) u) plus u, times 1.01."""
    return 1.01 * (k + 1) * U / (1.0 - k * U)


def _sum_f32(p: np.ndarray) -> np.float32:
    """round_f32 of the exact sum of the float64 values p (stage 3). ``math.fsum`` gives the exact sum
    rounded to float64 (Shewchuk's algorithm); rounding that again to float32 is right unless it lands
    exactly halfway between two float32 values, and then the sign of the exact remainder decides."""
    s = math.fsum(p.tolist())
    if s == 0.0 or not math.isfinite(s):
        return np.float32(s if s else 0.0)  # an exact zero is +0, as in exact arithmetic
    with np.errstate(over="ignore"):
        c = np.float32(s)
    if not np.isfinite(c) or float(c) == s:
        return c
    n = np.nextafter(c, np.float32(math.copysign(math.inf, s - float(c))))  # the float32 on s's other side
    if s - float(c) != float(n) - s:  # not halfway (both differences are exact: Sterbenz)
        return c
    r = math.fsum([*p.tolist(), -s])  # the exact sum minus s, rounded: its sign is exact
    if r == 0.0:
        return c  # a true tie: numpy rounded it to the even one
    return n if (r > 0) == (float(n) > s) else c


def _undecided(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Entries whose bounds [lo, hi] (float32) differ: the exact sum may round either way."""
    return lo.view(np.int32) != hi.view(np.int32)


class Operand:
    """The right-hand side of :func:`matmul` prepared once: float64 values, stored transposed
    (..., N, K) so that a column is contiguous, and column norms (..., N).

    Made on each call for an operand that is no weight (attention's keys and values); weights are
    :class:`Weights`, kept in their stored dtype.
    """

    def __init__(self, bt64):
        self.bt = bt64  # (..., N, K) float64 torch tensor
        bt = bt64.numpy()
        self.norms = np.sqrt(np.einsum("...k,...k->...", bt, bt))  # (..., N)

    @classmethod
    def of(cls, b) -> Operand:
        """An operand from a tensor b (..., K, N) of float32 values."""
        import torch

        return cls(torch.from_numpy(b.detach().float().transpose(-1, -2).numpy().astype(np.float64)))


def matmul(a, b, keep=None):
    """Correctly rounded float32 product: a (..., M, K) @ b (..., K, N) -> (..., M, N) float32.

    ``a`` holds float32 values (any float dtype); ``b`` is a tensor of float32 values or an
    :class:`Operand`, 2-D (a weight) or with ``a``'s batch dimensions. Tensors on another device than
    the CPU (attention on a GPU) are multiplied by torch in float32, not correctly rounded. The stages
    rely on exact float64 products, so inputs must be float32 values. The float64 product runs in a
    BLAS (:func:`_float64_product`); the checks are compiled loops (:mod:`gece.scoring.kernels`) of
    IEEE operations, the same on any CPU.

    ``keep``: the indices (p, i, j) of the only entries the caller reads, p over the batch dimensions
    flattened (attention's visible keys, a few in a hundred): only they are correctly rounded; the
    others hold the float64 product rounded to float32, whose bits may depend on the CPU.
    """
    import torch

    if not rounded(a.device):  # on a GPU, torch's own kernels: these stages are CPU code (docs/numerics.md)
        return torch.matmul(a.float(), b.float())
    op = b if isinstance(b, Operand) else Operand.of(b)
    a64 = a.detach().float().numpy().astype(np.float64)
    k = a64.shape[-1]
    y = _float64_product(a64, op.bt)
    if k == 0 or y.size == 0:
        return torch.from_numpy(y.astype(np.float32))
    m, n = y.shape[-2], y.shape[-1]
    a3, y3 = a64.reshape(-1, m, k), y.reshape(-1, m, n)
    bt3, nb = op.bt.numpy().reshape(-1, n, k), op.norms.reshape(-1, n)
    na = np.sqrt(np.einsum("pmk,pmk->pm", a3, a3))  # (P, M)
    lo, idx = _check(y3, _gamma(k) * na, nb) if keep is None else _check_some(y3, _gamma(k) * na, nb, keep)
    if idx[0].size:  # NaN entries go to stage 2, which keeps them
        _resolve(lo, idx, a3, bt3, na, nb)
    return torch.from_numpy(lo.reshape(y.shape))


def _float64_product(a64: np.ndarray, bt) -> np.ndarray:
    """Stage 1's product a64 (..., M, K) @ bt (..., N, K)^T in float64 (bt a numpy array or a torch tensor):
    numpy's OpenBLAS in the calling thread when torch runs one thread (batches side by side,
    :func:`gece.scoring.engine.score`), torch's BLAS on all its threads otherwise. Any BLAS and kernel will
    do, since stage 1 bounds every summation order; OpenBLAS's own kernels for an AVX-512 CPU (``gece
    extract`` lets it choose: :func:`gece.native_blas`) run about 1.7x faster than MKL's in torch on AMD
    CPUs, which MKL gives its AVX2 code (docs/numerics.md)."""
    import torch

    b = bt if isinstance(bt, np.ndarray) else bt.numpy()
    if torch.get_num_threads() == 1:
        return np.matmul(a64, np.swapaxes(b, -1, -2))
    return torch.matmul(torch.from_numpy(a64), torch.from_numpy(b).transpose(-1, -2)).numpy()


def _check(y, ea, nb):
    """Stage 1 (see the module docstring): y (P, M, N) the float64 product, ea (P, M) gamma_K ||a_i||, nb (P|1, N)
    the column norms. Returns y rounded down by the bound (float32, the answer wherever it is decided) and the
    undecided entries' indices (p, i, j), from one compiled pass (:func:`gece.scoring.kernels.check_rows`)."""
    from gece.scoring import kernels

    p_all, m, n = y.shape
    lo = np.empty((p_all * m, n), np.float32)
    flat = np.empty(y.size, np.int64)  # room for every entry; the pages of the few written are the only ones touched
    count = kernels.check_rows(
        y.reshape(p_all * m, n),
        np.ascontiguousarray(ea.reshape(p_all * m)),
        np.ascontiguousarray(nb),
        m,
        lo,
        np.zeros(-(-y.size // 8) * 8, bool),
        flat,
    )
    return lo.reshape(y.shape), np.unravel_index(flat[:count], y.shape)


def _right(p: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The right operand's matrix for left matrices ``p``: the same one, or its only one (one right matrix shared
    by every left one: a weight)."""
    return p if right.shape[0] > 1 else np.zeros_like(p)


def _check_some(y, ea, nb, keep):
    """Stage 1 for the entries ``keep`` = (p, i, j) of y only (see :func:`_check`); the others are y
    rounded to float32."""
    p, i, j = keep
    lo = y.astype(np.float32)
    yk = y[p, i, j]
    e = ea[p, i] * nb[_right(p, nb), j]
    lk = (yk - e).astype(np.float32)
    hk = (yk + e).astype(np.float32)
    lo[p, i, j] = lk
    und = np.flatnonzero(_undecided(lk, hk))
    return lo, (p[und], i[und], j[und])


def _split_sums(a3, bt3, at, bound):
    """Stage 2's sums of the entries at = (p, pb, i, j) (rows a3[p, i], columns bt3[pb, j]) and their error
    bounds: u |s| for the last rounding plus the remainders' gamma_K K ulp(sigma) / 2, doubled
    (:func:`gece.scoring.kernels.split_sums`; ``bound`` is at least each entry's largest product)."""
    from gece.scoring import kernels

    k = a3.shape[-1]
    v, sigma = kernels.split_sums(a3, bt3, *at, bound)
    return v, 2.0 * (U * np.abs(v) + _gamma(k) * k * (sigma * U))


def _resolve(out, idx, a3, bt3, na, nb) -> None:
    """Stages 2 and 3 for the undecided entries idx = (p, i, j) of ``out`` (P, M, N), in place: stage 2 in one
    compiled pass (:func:`gece.scoring.kernels.split_sums`), stage 3 for what it leaves undecided."""
    p, i, j = idx
    pb = _right(p, bt3)
    v, err = _split_sums(a3, bt3, (p, pb, i, j), na[p, i] * nb[pb, j])
    with np.errstate(over="ignore", invalid="ignore"):
        vals = v.astype(np.float32)
        still = np.nonzero(_undecided((v - err).astype(np.float32), (v + err).astype(np.float32)) & np.isfinite(v))[0]
    for t in still.tolist():  # about one entry in 10^5 of stage 2's
        vals[t] = _sum_f32(a3[p[t], i[t]] * bt3[pb[t], j[t]])  # K exact products
    out[p, i, j] = vals


WEIGHT_BLOCK_BYTES = 1 << 23  # float64 weight rows upcast at a time (8 MiB): a layer's, a vocabulary's
_BLOCK = threading.local()  # .flat: each thread's one float64 block buffer, reused by every layer


class Weights:
    """The right-hand side of some linear layers' products, kept in the weights' stored dtype (float32,
    bfloat16, float16: each value a float32 value) and upcast to float64 a block of rows at a time while
    the product runs (:func:`matmul_weights`): the model takes its checkpoint's size, not twice its float32
    size. Each output column depends on its own weight row only, so cutting the rows into blocks changes no
    bit of a correctly rounded product.

    ``weights``: callables returning each layer's current weight (N_i, K); ``cached``: their row norms (float64,
    N) are kept, each block's computed the first time a product upcasts it (no pass over the weights of its own:
    a model's first forward pass computes them), otherwise (weights that accelerate moves in for each forward
    pass) on every call. A norm only bounds stage 1's error, so where it was computed changes no bit of a
    product.
    """

    def __init__(self, weights, cached: bool = True):
        self.weights = weights
        self.offsets = np.cumsum([0] + [int(w().shape[0]) for w in weights]).tolist()
        self.k = int(weights[0]().shape[1])
        self.rows = max(1, WEIGHT_BLOCK_BYTES // (8 * max(1, self.k)))
        self.norms = np.empty(self.offsets[-1]) if cached else None
        self.normed: set[int] = set()  # the first rows of the blocks whose norms are in self.norms (set in any thread)

    def _buffer(self) -> np.ndarray:
        """This thread's block buffer (:data:`_BLOCK`), shared by every layer, as (rows, K)."""
        size = min(self.rows, self.offsets[-1]) * self.k
        flat = getattr(_BLOCK, "flat", None)
        if flat is None or flat.size < size:
            flat = _BLOCK.flat = np.empty(max(size, WEIGHT_BLOCK_BYTES // 8), np.float64)
        return flat[:size].reshape(-1, self.k)

    def blocks(self):
        """(first output column, float64 block (n, K) numpy, its row norms (n,)) over every layer's rows. A
        block lives in a per-thread buffer until the next one is made: use it before asking for the next."""

        buf = self._buffer()
        for start, w in zip(self.offsets[:-1], self.weights, strict=True):
            w = w().detach()
            for r in range(0, w.shape[0], self.rows):
                n = min(self.rows, w.shape[0] - r)
                block = buf[:n]
                _upcast(w[r : r + n], block)
                lo = start + r
                if lo in self.normed:
                    nb = self.norms[lo : lo + n]
                else:
                    nb = np.sqrt(np.einsum("nk,nk->n", block, block))
                    if self.norms is not None:  # written before it is marked, so another thread reads it whole
                        self.norms[lo : lo + n] = nb
                        self.normed.add(lo)
                yield lo, block, nb


def _upcast(src, out: np.ndarray) -> None:
    """Write the float32, bfloat16 or float16 tensor ``src`` into the float64 array ``out``, exactly, with
    numpy's vectorized conversions (torch's portable kernels, which gece runs, take about four times as
    long): a bfloat16 value's bits are the top half of its float32 value's."""
    import torch

    if src.dtype == torch.float32:
        np.copyto(out, src.numpy())
    elif src.dtype == torch.bfloat16:
        bits = src.view(torch.int16).numpy().view(np.uint16).astype(np.uint32) << 16
        np.copyto(out, bits.view(np.float32))
    elif src.dtype == torch.float16:
        np.copyto(out, src.view(torch.int16).numpy().view(np.float16))
    else:
        torch.from_numpy(out).copy_(src)


def matmul_weights(a, op: Weights):
    """Correctly rounded float32 product a (M, K) @ W^T -> (M, N) for the stacked weights W of ``op``
    (:class:`Weights`), a block of W's rows at a time: the stages of :func:`matmul` per block, on as many
    of its rows at once as keep the float64 product (M, n) within :data:`WEIGHT_BLOCK_BYTES` (a narrow
    model's block holds a whole vocabulary: 49,152 x 64 for the size bench's tiny shape, whose product
    over 256 padded positions would be 100 MB per thread)."""
    import torch

    a64 = a.detach().float().numpy().astype(np.float64)
    m, k = a64.shape
    out = np.empty((m, op.offsets[-1]), np.float32)
    if m == 0 or out.size == 0:
        return torch.from_numpy(out)
    a3 = a64[None]
    na = np.sqrt(np.einsum("mk,mk->m", a64, a64))[None]  # (1, M)
    ea = _gamma(k) * na
    step = max(1, WEIGHT_BLOCK_BYTES // (8 * m))  # a block's columns whose float64 product fits in a block's bytes
    for lo, block, nb in op.blocks():
        for s in range(0, block.shape[0], step):
            w, nw = block[s : s + step], nb[s : s + step]
            y = _float64_product(a64, w)[None]  # (1, M, n)
            part, idx = _check(y, ea, nw[None])
            if idx[0].size:
                _resolve(part, idx, a3, w[None], na, nw[None])
            out[:, lo + s : lo + s + w.shape[0]] = part[0]
    return torch.from_numpy(out)


class Product:
    """The correctly rounded products of some linear layers that read the same input (a model's q, k
    and v projections, say), computed together: one :func:`matmul_weights` over their stacked weights
    (:class:`Weights`, kept in their stored dtype) the first time one of them sees an input, and the
    others' columns taken from it. Each entry of a correctly rounded product depends on its own row and
    column only, so stacking changes no bit.

    ``cached``: the weights' row norms are kept once computed (:class:`Weights`); otherwise (weights that
    accelerate offloads and moves in for each forward pass) computed on every call.

    A group keeps its last input and product until each of its layers has read it, per thread: forward
    passes of several batches run at once on the CPU (:func:`gece.scoring.engine.score`), each in its
    own thread. Kept longer, every layer's last product stays in memory after a pass (about 1 GB per
    thread for smollm2-135m on CrowS-Pairs' longest batches).
    """

    def __init__(self, weights, cached: bool = True):
        self.weights = weights  # callables returning each layer's current weight (N_i, K)
        self.op = Weights(weights, cached) if cached else None
        self.offsets = (self.op or Weights(weights, cached=False)).offsets
        self.last = threading.local()  # .x (held, so that its storage cannot be reused while kept), .key, .out, .read

    def _product(self, x):
        return matmul_weights(x.reshape(-1, x.shape[-1]), self.op or Weights(self.weights, cached=False))

    def __call__(self, x, part: int, bias=None):
        lo, hi = self.offsets[part], self.offsets[part + 1]
        if len(self.offsets) == 2:  # one layer: nothing to share
            y = self._product(x)
        else:
            last = self.last
            key = (x.data_ptr(), tuple(x.shape), x.stride())
            if getattr(last, "x", None) is not x or last.key != key:
                last.out = self._product(x)
                last.x, last.key, last.read = x, key, set()
            y = last.out[:, lo:hi]
            last.read.add(part)
            if len(last.read) == len(self.offsets) - 1:  # every layer has its columns: let the product go
                last.x = last.key = last.out = None
        if bias is not None:
            y = y + bias
        return y.contiguous().reshape(*x.shape[:-1], hi - lo)


def linear(x, weight):
    """``x @ weight.T`` (weight (N, K)), correctly rounded: a single layer's :class:`Product`."""
    return Product([lambda: weight])(x, 0)


# ------------------------------------------------------------------ elementary functions
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that n * _LN2_HI is exact for |n| < 2^20
_LN2_LO = 1.90821492927058770002e-10
_EXP_TERMS = 14  # Taylor terms of exp on |r| <= ln(2)/2: truncation below 1e-17 relative


def _pow2(n):
    """2^n for an integer tensor n in [-1100, 1100], built from the float64 bit pattern (exact;
    two factors so that results below 2^-1022 come out subnormal or zero)."""
    import torch

    h = torch.div(n, 2, rounding_mode="floor")
    out = torch.ones_like(n, dtype=torch.float64)
    for part in (h, n - h):
        out = out * ((part.to(torch.int64) + 1023) << 52).view(torch.float64)
    return out


def exp(x):
    """exp of a float64 tensor from IEEE additions and multiplications only (the same bits on every
    CPU): exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2, exp(r) by its Taylor series
    (Horner form). Accurate to a few float64 ulps; exp(-inf) = 0."""
    import torch

    x = x.double()
    n = torch.round(x * (1.0 / math.log(2.0))).clamp(-1100, 1100).nan_to_num(0.0)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = torch.full_like(r, 1.0 / math.factorial(_EXP_TERMS - 1))
    for k in range(_EXP_TERMS - 2, -1, -1):
        p = p * r + 1.0 / math.factorial(k)
    return torch.where(x == -math.inf, 0.0, p * _pow2(n))


def tanh(x):
    """tanh of a float tensor from :func:`exp` (IEEE operations only), in float64."""
    import torch

    x = x.double()
    e = exp(-2.0 * x.abs())
    return torch.copysign((1.0 - e) / (1.0 + e), x)


def rope_tables(positions, inv_freq, scaling: float, dtype):
    """RoPE's (cos, sin) for integer positions (B, T) and float32 frequencies (F,), as transformers
    computes them (angle = position * inv_freq in float32, both halves repeated, times
    ``scaling``), with cos and sin from the C library and rounded to float32."""
    import torch

    angles = positions.float()[..., None] * inv_freq.float()[None, None, :]  # (B, T, F), IEEE products
    flat = angles.reshape(-1).tolist()
    cos = torch.tensor([math.cos(v) for v in flat], dtype=torch.float64).float().reshape(angles.shape)
    sin = torch.tensor([math.sin(v) for v in flat], dtype=torch.float64).float().reshape(angles.shape)
    cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    return (cos * scaling).to(dtype), (sin * scaling).to(dtype)
