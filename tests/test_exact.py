"""gece.scoring.exact: correctly rounded matrix products and CPU-independent elementary functions.

The products are checked against exact rational arithmetic (including entries built to fall next to
a float32 rounding boundary, which exercise every stage), for independence of the number of rows,
and against what other BLAS code paths give (subprocesses with other MKL settings, or OpenBLAS's
other kernels, stand in for other CPUs). The end-to-end version, a model's score file under varied CPU settings, is in
tests/e2e/test_cpu_invariance.py.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gece.scoring import exact, exact_model


def round_f32(q: Fraction) -> np.float32:
    """The float32 nearest to an exact rational q (ties to an even significand), overflowing to inf:
    the reference the products are checked against, independent of the code under test."""
    if q == 0:
        return np.float32(0.0)
    top = Fraction(2) ** 128 - Fraction(2) ** 103  # halfway between float32's largest value and 2^128
    if abs(q) >= top:
        return np.float32(math.copysign(math.inf, q))
    c = np.float32(float(q))  # float(q) is correctly rounded; the second rounding may be off by one
    cands = {c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))}
    cands = [v for v in cands if np.isfinite(v)]
    return min(cands, key=lambda v: (abs(Fraction(float(v)) - q), int(np.array(v).view(np.int32)) & 1))


def _exact(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """round_f32 of every exact entry of a @ b (rational arithmetic)."""
    fa = [[Fraction(float(v)) for v in row] for row in a.tolist()]
    fb = [[Fraction(float(v)) for v in col] for col in b.T.tolist()]
    return np.array(
        [[round_f32(sum((x * y for x, y in zip(r, c, strict=True)), Fraction(0))) for c in fb] for r in fa],
        dtype=np.float32,
    )


@contextlib.contextmanager
def torch_threads(n: int):
    """torch on n threads: with one, the float64 products run in numpy's OpenBLAS, else in torch's BLAS."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


BLAS_PATHS = pytest.mark.parametrize("threads", [1, 2], ids=["numpy-openblas", "torch-blas"])


@BLAS_PATHS
@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 6),
    k=st.integers(1, 40),
    n=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    spread=st.integers(0, 60),
)
def test_matmul_is_correctly_rounded(threads, m, k, n, seed, spread):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-spread, spread + 1, (m, k), generator=g).float())
    b = torch.randn(k, n, generator=g)
    with torch_threads(threads):
        assert np.array_equal(exact.matmul(a, b).numpy(), _exact(a, b))


@BLAS_PATHS
def test_matmul_decides_entries_next_to_a_rounding_boundary(threads):
    # 1 + 2^-24 is halfway between two float32 values: tiny terms decide which way the sum rounds,
    # and cancelling terms hide them from the float64 product's own rounding
    big = 2.0**30
    rows = [
        [1.0, 2.0**-24, 2.0**-60, big, -big],  # just above halfway: rounds up
        [1.0, 2.0**-24, -(2.0**-60), big, -big],  # just below: rounds down
        [1.0, 2.0**-24, 0.0, big, -big],  # exactly halfway: ties to even (down)
        [1.0, 3 * 2.0**-25, -(2.0**-70), 0.0, 0.0],
    ]
    a = torch.tensor(rows, dtype=torch.float32)
    b = torch.ones(5, 1)
    with torch_threads(threads):
        got = exact.matmul(a, b).flatten().tolist()
    assert got == _exact(a, b).flatten().tolist()
    assert got[0] == 1 + 2.0**-23 and got[1] == 1.0 and got[2] == 1.0


def test_round_f32_ties_to_even_and_overflows():
    assert round_f32(Fraction(1) + Fraction(1, 2**24)) == np.float32(1.0)
    assert round_f32(Fraction(1) + Fraction(3, 2**24)) == np.float32(1 + 2.0**-22)
    assert round_f32(Fraction(2) ** 128) == np.float32(np.inf)
    assert round_f32(-(Fraction(2) ** 128)) == np.float32(-np.inf)
    assert round_f32(Fraction(0)) == np.float32(0.0)


def test_matmul_rows_do_not_depend_on_the_other_rows():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(300, 96, generator=g)
    x = torch.randn(257, 96, generator=g) * 4
    x[3, 5] = 900.0  # an outlier, as language models' activations have
    full = exact.linear(x, w)
    for m in (1, 2, 7, 64):
        assert torch.equal(exact.linear(x[:m].clone(), w), full[:m])
    assert torch.equal(exact.linear(x.flip(0).clone(), w), full.flip(0))


def test_the_check_gives_the_same_bits_in_any_number_of_threads():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(300, 576, generator=g) * torch.exp2(torch.randint(-8, 9, (300, 576), generator=g).float())
    w = torch.randn(1536, 576, generator=g)
    outs = []
    for n in (1, 2, 3):  # numpy's OpenBLAS, then torch's BLAS on 2 and 3 threads
        with torch_threads(n):
            outs.append(exact.linear(x, w))
    assert all(torch.equal(o, outs[0]) for o in outs)


def test_matmul_checks_only_the_entries_kept_and_rounds_them_correctly():
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(2, 3, 6, 40, generator=g) * 30, torch.randn(2, 3, 40, 7, generator=g)
    keep = (torch.rand(6, 6, 7, generator=g) < 0.3).nonzero(as_tuple=True)  # (p, i, j), p over 2 x 3
    got = exact.matmul(a, b, keep=tuple(t.numpy() for t in keep)).reshape(6, 6, 7)
    full = exact.matmul(a, b).reshape(6, 6, 7)
    assert torch.equal(got[keep], full[keep]) and keep[0].numel() > 20
    a3, b3 = a.reshape(6, 6, 40), b.reshape(6, 40, 7)
    for p, i, j in zip(*(t.tolist() for t in keep), strict=True):
        assert got[p, i, j].item() == _exact(a3[p, i : i + 1], b3[p, :, j : j + 1])[0, 0]


@BLAS_PATHS
def test_batched_matmul_matches_the_exact_product(threads):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(2, 3, 5, 33, generator=g), torch.randn(2, 3, 33, 4, generator=g)
    with torch_threads(threads):
        got = exact.matmul(a, b)
    for i in range(2):
        for j in range(3):
            assert np.array_equal(got[i, j].numpy(), _exact(a[i, j], b[i, j]))


SCRIPT = """
import sys
import gece
if "--native-blas" in sys.argv:
    assert gece.native_blas()
import hashlib, threadpoolctl, torch
from gece.scoring import exact, exact_model
g = torch.Generator().manual_seed(0)
w = torch.randn(1536, 576, generator=g)
x = torch.randn(300, 576, generator=g) * 3
x[:, 7] *= 200
blas = [i.get("architecture") for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"]
print(hashlib.md5(exact.linear(x, w).numpy().tobytes()).hexdigest(), exact_model.cpu_kernels(), torch.get_num_threads(),
      *blas)
"""


def test_matmul_is_the_same_whatever_the_blas_does():
    """Other MKL settings pick other kernels (those of other CPUs), and with one torch thread the float64
    product runs in numpy's OpenBLAS, with the Haswell kernels gece pins or those OpenBLAS picks for this
    CPU (``gece extract``); the bits must not move."""
    one = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    runs = [
        ({}, []),
        ({"MKL_CBWR": "COMPATIBLE"}, []),
        ({"MKL_CBWR": "AVX2"}, []),
        ({"MKL_CBWR": "AUTO"}, []),
        ({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, []),
        ({"ATEN_CPU_CAPABILITY": "avx512"}, []),
        (one, []),
        (one, ["--native-blas"]),
    ]
    import os

    out, cores = set(), set()
    for env, args in runs:
        res = subprocess.run(
            [sys.executable, "-c", SCRIPT, *args], env={**os.environ, **env}, capture_output=True, text=True, check=True
        )
        digest, kernels, threads, *blas = res.stdout.split()
        assert kernels == "DEFAULT", env
        if env is one:
            assert threads == "1"
            cores.update(blas)
        out.add(digest)
    assert len(out) == 1
    assert "Haswell" in cores  # and on a CPU with AVX-512, OpenBLAS's own choice too (SkylakeX, ...)


def test_exp_and_tanh_are_accurate():
    x = torch.linspace(-700, 700, 20001, dtype=torch.float64)  # normal results: a few ulps
    got = exact.exp(x)
    ref = torch.tensor([math.exp(v) for v in x.tolist()], dtype=torch.float64)
    assert ((got - ref).abs() / ref).max().item() < 1e-15
    assert exact.exp(torch.tensor([-math.inf])).item() == 0.0
    t = torch.linspace(-30, 30, 20001, dtype=torch.float64)
    assert (exact.tanh(t) - torch.tensor([math.tanh(v) for v in t.tolist()], dtype=torch.float64)).abs().max() < 5e-16


def test_rope_tables_match_transformers_to_the_last_bit_or_one():
    pos = torch.arange(200)[None]
    inv = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
    cos, sin = exact.rope_tables(pos, inv, 1.0, torch.float32)
    freqs = pos[..., None].float() * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    ulp = torch.finfo(torch.float32).eps
    assert (cos - emb.cos()).abs().max() <= 2 * ulp and (sin - emb.sin()).abs().max() <= 2 * ulp


def test_a_rotary_embedding_that_changes_with_the_input_is_refused():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        rope_scaling={"rope_type": "dynamic", "factor": 2.0},
        max_position_embeddings=64,
    )
    with pytest.raises(ValueError, match="changes with the input"):
        exact_model.make_exact(LlamaForCausalLM(cfg))
