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
2. The undecided entries' products are summed again by Rump's extraction (:func:`_split_sum`):
   each product is split into a high part on a common grid, whose sum is exact in any order, and
   a small remainder, so the sum is known to within u |s| + about 2^-75 max_k |A_ik B_kj|, and
   checked the same way.
3. An entry still undecided (its exact sum within about 2^-53 of a float32 rounding boundary, so
   about one in 10^8 of stage 2's) is summed exactly in rational arithmetic (:class:`fractions.Fraction`) and
   rounded to the nearest float32, ties to even.

Cost: one float64 product (half the float32 rate on AVX-512 CPUs) and a few elementwise passes.

The same idea covers the model's other CPU-dependent steps (see :func:`make_exact`):

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
from fractions import Fraction
from typing import Any

import numpy as np

U = 2.0**-53  # unit roundoff of float64


def _gamma(k: int) -> float:
    """A bound on a float64 sum of k exact products, in units of sum_k |p_k|, with room for the rounding
    of the bound itself and of y -/+ err: Higham's gamma_(k-1) = (k-1) u / (1 - (k-1) u) plus u, times 1.01."""
    return 1.01 * (k + 1) * U / (1.0 - k * U)


def _undecided(torch: Any, lo_bound, hi_bound):
    """Entries whose interval [lo, hi] rounds to two different float32 values."""
    return lo_bound.float().view(torch.int32) != hi_bound.float().view(torch.int32)


def round_f32(q: Fraction) -> np.float32:
    """The float32 nearest to an exact rational q (ties to an even significand), overflowing to inf."""
    if q == 0:
        return np.float32(0.0)
    top = Fraction(2) ** 128 - Fraction(2) ** 103  # halfway between float32's largest value and 2^128
    if abs(q) >= top:
        return np.float32(math.copysign(math.inf, q))
    c = np.float32(float(q))  # float(q) is correctly rounded; the second rounding may be off by one
    cands = {c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))}
    cands = [v for v in cands if np.isfinite(v)]
    return min(cands, key=lambda v: (abs(Fraction(float(v)) - q), int(np.array(v).view(np.int32)) & 1))


def _exact_dot(a: np.ndarray, b: np.ndarray) -> np.float32:
    """round_f32 of sum_k a_k b_k, exactly (rational arithmetic)."""
    return round_f32(sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b, strict=True)),
                         Fraction(0)))


def _split_sum(torch: Any, p, bound):
    """Sum the rows of p (n, K) of exact products nearly exactly, in any order (Rump's extraction:
    Rump, Ogita and Oishi, "Accurate floating-point summation part I", SIAM J. Sci. Comput. 31, 2008).

    ``bound`` (n,) is at least max_k |p_k| (here ||a|| ||b||). With sigma a power of two at least
    4 K bound, q = (sigma + p) - sigma is p rounded to a multiple of ulp(sigma), exactly, and
    r = p - q is exact. The q are integers in units of ulp(sigma) whose every partial sum stays
    below 2^53, so sum(q) is exact whatever the order; sum(r) is off by at most
    gamma_K sum |r| <= gamma_K K ulp(sigma) / 2. Returns (sum, error bound), both (n,).
    """
    k = p.shape[1]
    _, e = torch.frexp(bound)  # bound < 2^e
    sigma = torch.ldexp(torch.ones_like(bound), e + (max(1, k - 1).bit_length() + 2))[:, None]
    q = (sigma + p) - sigma
    total = q.sum(dim=1) + (p - q).sum(dim=1)
    return total, 2.0 * (U * total.abs() + _gamma(k) * k * (sigma[:, 0] * U))


class Operand:
    """The right-hand side of :func:`matmul` prepared once: float64 values (K, N) and column norms.

    A weight is prepared at load (:func:`make_exact`); other operands on each call.
    """

    def __init__(self, b64):
        import torch

        self.b64 = b64  # (..., K, N)
        self.norms = torch.linalg.vector_norm(b64, dim=-2, keepdim=True)  # (..., 1, N)


def matmul(a, b):
    """Correctly rounded float32 product: a (..., M, K) @ b (..., K, N) -> (..., M, N) float32.

    ``a`` holds float32 values (any float dtype); ``b`` is a tensor of float32 values or an
    :class:`Operand`, 2-D (a weight) or with ``a``'s batch dimensions. The stages rely on exact
    float64 products, so inputs must be float32 values.
    """
    import torch

    op = b if isinstance(b, Operand) else Operand(b.double())
    a64 = a.double()
    k = a64.shape[-1]
    y = torch.matmul(a64, op.b64)
    if k == 0 or y.numel() == 0:
        return y.float()
    na = torch.linalg.vector_norm(a64, dim=-1, keepdim=True)  # (..., M, 1)
    g = _gamma(k)
    lo = torch.addcmul(y, na, op.norms, value=-g).float()
    amb = lo.view(torch.int32) != torch.addcmul(y, na, op.norms, value=g).float().view(torch.int32)
    if bool(amb.any()):  # NaN entries compare equal or go to stage 2, which keeps them
        _resolve(torch, lo, amb, a64, op, na)
    return lo


def _resolve(torch: Any, out, amb, a64, op: Operand, na) -> None:
    """Stages 2 and 3 for the undecided entries of ``out``, in place (see the module docstring)."""
    m, n = out.shape[-2], out.shape[-1]
    bi, i, j = amb.view(-1, m, n).nonzero(as_tuple=True)
    b3 = op.b64.reshape(-1, *op.b64.shape[-2:])
    one = b3.shape[0] == 1
    rows = a64.reshape(-1, m, a64.shape[-1])[bi, i]  # (u, K)
    cols = b3[0].T[j] if one else b3.transpose(1, 2)[bi, j]  # (u, K)
    bound = na.reshape(-1, m)[bi, i] * op.norms.reshape(-1, n)[0 if one else bi, j]
    v, err = _split_sum(torch, rows * cols, bound)  # the products are exact in float64
    vals = v.float()
    still = (_undecided(torch, v - err, v + err) & torch.isfinite(v)).nonzero().flatten().tolist()
    for t in still:  # about one entry in 10^5 of stage 2's
        vals[t] = float(_exact_dot(rows[t].numpy(), cols[t].numpy()))
    out.view(-1, m, n)[bi, i, j] = vals


class _Inputs:
    """The float64 copy of the last input to a :class:`Product`: the q, k and v projections (and an
    MLP's gate and up projections) read the same hidden states, converted once. Keyed by the tensor
    object and its storage (transformers' decoder layers never modify a projection's input in place)."""

    key: tuple = ()
    x = None
    a64 = None

    @classmethod
    def get(cls, x):
        key = (x.data_ptr(), tuple(x.shape), x.stride())
        if cls.x is not x or cls.key != key:
            cls.key, cls.x, cls.a64 = key, x, x.reshape(-1, x.shape[-1]).double()
        return cls.a64


class Product:
    """The correctly rounded products of some linear layers that read the same input (a model's q, k
    and v projections, say), computed together: one :func:`matmul` over their stacked weights the
    first time one of them sees an input, and the others' columns taken from it. Each entry of a
    correctly rounded product depends on its own row and column only, so stacking changes no bit.

    ``cached``: the stacked float64 weights are made once; otherwise (weights that accelerate
    offloads and moves in for each forward pass) on every call.
    """

    def __init__(self, weights, cached: bool = True):
        self.weights = weights  # callables returning each layer's current weight (N_i, K)
        self.offsets = np.cumsum([0] + [int(w().shape[0]) for w in weights]).tolist()
        self.op = self._operand() if cached else None
        self.key: tuple = ()
        self.x = None  # held, so that its storage cannot be reused by another tensor while cached
        self.out = None

    def _operand(self) -> Operand:
        import torch

        return Operand(torch.cat([w().detach().double() for w in self.weights]).T)

    def __call__(self, x, part: int, bias=None):
        key = (x.data_ptr(), tuple(x.shape), x.stride())
        if self.x is not x or self.key != key:
            self.out = matmul(_Inputs.get(x), self.op or self._operand())
            self.x, self.key = x, key
        lo, hi = self.offsets[part], self.offsets[part + 1]
        y = self.out[:, lo:hi] if len(self.offsets) > 2 else self.out
        if bias is not None:
            y = y + bias
        return y.contiguous().reshape(*x.shape[:-1], hi - lo)


def linear(x, weight):
    """``x @ weight.T`` (weight (N, K)), correctly rounded: a single layer's :class:`Product`."""
    return Product([lambda: weight])(x, 0)


FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # sibling layers that read one input


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


# ------------------------------------------------------------------------ the model
def cpu_kernels() -> str:
    """The instruction set of the CPU kernels torch runs ("DEFAULT": the portable ones)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def portable_kernels() -> bool:
    """True when torch runs its portable CPU kernels (``ATEN_CPU_CAPABILITY=default`` took effect)."""
    return cpu_kernels() == "DEFAULT"


STATIC_ROPE = {None, "default", "linear", "llama3", "yarn", "proportional"}  # frequencies fixed at load


def _rope_forward(module: Any):
    def forward(x, position_ids, layer_type=None, **kwargs):
        prefix = f"{layer_type}_" if layer_type else ""
        inv_freq = getattr(module, f"{prefix}inv_freq")
        scaling = getattr(module, f"{prefix}attention_scaling", getattr(module, "attention_scaling", 1.0))
        return rope_tables(position_ids, inv_freq, float(scaling), x.dtype)

    return forward


def _rope_types(module: Any) -> set:
    kind = getattr(module, "rope_type", None)
    return set(kind.values()) if isinstance(kind, dict) else {kind}


def _exact_tanh_mode():
    """A torch function mode in which ``torch.tanh`` and ``Tensor.tanh`` are :func:`tanh` (for the
    model's own logit soft-capping, which calls them)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ExactTanh(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.tanh, torch.Tensor.tanh) and not kwargs and len(args) == 1:
                return tanh(args[0]).to(args[0].dtype)
            return func(*args, **(kwargs or {}))

    return ExactTanh()


def make_exact(model: Any) -> Any:
    """Route a CPU model's CPU-dependent numerics through this module (idempotent):

    - every ``nn.Linear`` (the LM head included) computes its product with :func:`matmul`, siblings
      that read one input (:data:`FUSED`) in one :class:`Product` (the weights are kept in float64
      beside the model's own: twice their memory);
    - every rotary embedding with fixed frequencies computes cos/sin with :func:`rope_tables`;
    - a model that soft-caps its logits does it with :func:`tanh`.

    Attention is :mod:`gece.scoring.attention`'s when the model was loaded with ``attention:
    exact``. Raises ValueError for a rotary embedding whose frequencies change with the input
    (dynamic or LongRoPE scaling), which would need its own port.
    """
    import torch

    if getattr(model, "_gece_exact", False):
        return model
    offloaded = any(p.device.type == "meta" for p in model.parameters())  # accelerate moves them in per pass
    for parent in list(model.modules()):
        children = dict(parent.named_children())
        linears = {n: c for n, c in children.items() if isinstance(c, torch.nn.Linear)}
        groups = [[n for n in names if n in linears] for names in FUSED] if not offloaded else []  # one by one
        groups = [g for g in groups if len(g) > 1 and len({linears[n].in_features for n in g}) == 1]
        grouped = {n for g in groups for n in g}
        groups += [[n] for n in linears if n not in grouped]
        for g in groups:
            prod = Product([(lambda m: lambda: m.weight)(linears[n]) for n in g], cached=not offloaded)
            for part, n in enumerate(g):
                mod = linears[n]
                fwd = (lambda p, k, m: (lambda x: p(x, k, m.bias)))(prod, part, mod)
                setattr(mod, "_old_forward" if hasattr(mod, "_hf_hook") else "forward", fwd)  # behind accelerate's hook
    for name, mod in model.named_modules():
        if hasattr(mod, "inv_freq") or any(n.endswith("inv_freq") for n, _ in mod.named_buffers(recurse=False)):
            if not _rope_types(mod) <= STATIC_ROPE:
                raise ValueError(f"{name}: rotary embedding of type {_rope_types(mod)} changes with the input; "
                                 "gece's exact numerics support fixed frequencies only")
            mod.forward = _rope_forward(mod)
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(cfg, "final_logit_softcapping", None):
        stock = model.forward

        def forward(*args, **kwargs):
            with _exact_tanh_mode():
                return stock(*args, **kwargs)

        model.forward = forward
    model._gece_exact = True
    return model
