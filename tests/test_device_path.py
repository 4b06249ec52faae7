"""The engine where gece's numerics do not apply (a GPU), tested on the CPU with tiny models.

With ``exact.EXACT_DEVICES`` emptied, the CPU takes the GPU's path: the model keeps its float32 weights
and torch's own kernels (no correctly rounded products), attention gathers each query's values into its
canonical row, and every forward pass and LM-head call has a shape set by the code alone
(:meth:`packing.Forest.pack_fixed`). The same pairs must then give the same bits at any batch size."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gece.scoring import attention, engine, exact, packing, planning

from .tiny import random_pairs, side, tiny_model

WIDTH, ROWS = 8, 4  # small passes, so that a batch takes several and long sequences take wider ones


@pytest.fixture
def device_path(monkeypatch):
    monkeypatch.setattr(exact, "EXACT_DEVICES", frozenset())
    monkeypatch.setattr(packing, "ROW_TOKENS", WIDTH)
    monkeypatch.setattr(packing, "PASS_ROWS", ROWS)
    monkeypatch.setattr(attention, "ROW", 8)  # canonical rows of 8, 16, 24 keys: several lengths per pass


def _pairs(seed: int, n: int):
    sides = random_pairs(np.random.default_rng(seed), n)
    long = [side([*range(1, 20), 40, 41], [19]), side([*range(1, 20), 50, 41], [19])]  # 21 tokens: class 3
    sides.append((long[0], long[1]))
    return sides, [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]


def test_fixed_passes_read_each_node_once_in_a_pass_of_its_depth_s_shape(device_path):
    _, plans = _pairs(1, 60)
    f = packing.lay_out(plans, 0).forest  # the batch's trie
    passes = f.pack_fixed(ROWS, WIDTH, pad_id=0)
    read: dict[int, tuple[int, int, int]] = {}
    for p, pk in enumerate(passes):
        m = len(pk.ids[0]) // WIDTH
        assert len(pk.ids) == max(1, ROWS // m) and all(len(r) == m * WIDTH for r in pk.ids)  # the fixed shape
        assert all(len(r) <= m * WIDTH for r in pk.nodes)
        for n, (r, c) in pk.place.items():
            assert n not in read
            read[n] = (p, r, c)
            assert m == -(-(f.depth[n] + 1) // WIDTH)  # the class of its depth
            assert pk.nodes[r][c] == n and pk.ids[r][c] == f.token[n] and pk.positions[r][c] == f.depth[n]
            sees = sorted(
                pk.nodes[r][k]
                for rr, q, k in zip(pk.mask_rows, pk.mask_q, pk.mask_k, strict=True)
                if rr == r and q == c
            )
            assert sees == sorted(f.ancestors(n))  # itself and its ancestors, nothing else
    assert sorted(read) == list(range(len(f)))  # every node read exactly once
    assert {len(pk.ids[0]) for pk in passes} == {8, 16, 24}
    lay = packing.lay_out(plans, 0, ROWS)  # each LM-head input is taken once, from the pass that reads it
    heads = sorted((k, lay.passes[p].nodes[r][c]) for p, read in enumerate(lay.heads) for k, r, c in read)
    assert heads == sorted((k, n) for n, k in lay.where.items())


@pytest.mark.parametrize("kind", ["llama", "gemma3", "mistral"])
def test_the_same_bits_at_any_batch_size(kind, device_path):
    """Batch 1, 7, 64 and auto lay the pairs out differently (other rows, columns, passes, other beginnings
    shared), yet every target token's log-probability and logit is the same bits, on torch's own float32
    kernels: each token is computed in a pass of the same shape, attention reads canonical rows."""
    model = tiny_model(kind)
    sides, plans = _pairs(1, 60)
    runner = engine.Runner(model)
    assert not runner.exact and runner.pass_rows == ROWS and model.model.layers[0].mlp.up_proj.weight.stride() != (0, 0)
    shapes: set[tuple[int, ...]] = set()
    hook = model.get_input_embeddings().register_forward_pre_hook(lambda _m, a: shapes.add(tuple(a[0].shape)))
    auto = engine.auto_batch_size(runner, plans)
    assert auto == len(plans)  # every pair: memory does not grow with the batch
    try:
        runs = {}
        for size in (1, 7, 64, auto):
            res = list(engine.score(runner, engine.batches(plans, size)))
            runs[size] = sorted((s for r, _ in res for s in r), key=lambda s: s.index)
            assert sum(st.forward_calls for _, st in res) >= len(res)
    finally:
        hook.remove()
    assert shapes == {(4, 8), (2, 16), (1, 24)}  # the code's shapes only, whatever the batch
    ref = [s.tokens() for s in runs[1]]
    for size in (7, 64, auto):
        assert [s.tokens() for s in runs[size]] == ref, size  # bit for bit (floats compared exactly)
    naive = engine.score_naive(model, sides)  # each sentence alone, stock shapes: close, not the same bits
    assert engine.max_abs_diff(runs[auto], naive) < 1e-5


def test_canonical_output_matches_a_dense_softmax(device_path):
    """The device path's attention equals softmax(w) @ v computed densely in float64, for queries of several
    canonical row lengths and a mask per head as well as one shared by the heads."""
    g = torch.Generator().manual_seed(0)
    b, hkv, grp, t, d = 2, 2, 3, 30, 4
    h = hkv * grp
    w = torch.randn(b, h, t, t, generator=g, dtype=torch.float64)
    v = torch.randn(b, hkv, t, d, generator=g)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for heads in (1, h):  # one mask for every head, a mask per head
        vis = (causal & (torch.rand(b, heads, t, t, generator=g) < 0.9)) | torch.eye(t, dtype=torch.bool)
        layout = attention._layout(vis, b, t, t)
        assert [n for n, *_ in layout] == [8, 16, 24, 32]  # queries seeing 1 to 30 keys
        out = attention._canonical_output(w, v, layout)
        dense = torch.softmax(w.masked_fill(~vis, float("-inf")), dim=-1) @ v.double().repeat_interleave(grp, dim=1)
        assert out.dtype == torch.float32 and torch.allclose(out.double(), dense, atol=1e-6)


def test_out_of_memory_halving_gives_the_same_bits(device_path):
    """On the GPU's path an out-of-memory error halves the pairs per forward pass (61 -> 30 -> 15 here): each
    part is its own trie, laid out anew, and still the same bits as the unhindered run."""
    model = tiny_model("llama")
    _, plans = _pairs(2, 60)
    ref = [s.tokens() for r, _ in engine.score(engine.Runner(model), engine.batches(plans, 64)) for s in r]
    failures = {"left": 2}

    def hook(_module, _args):
        if failures["left"]:
            failures["left"] -= 1
            raise torch.OutOfMemoryError("CUDA out of memory (test)")

    runner = engine.Runner(model)
    handle = model.get_input_embeddings().register_forward_pre_hook(hook)
    try:
        got = [s.tokens() for r, _ in engine.score(runner, engine.batches(plans, 64)) for s in r]
    finally:
        handle.remove()
    assert runner.oom_retries == 2 and runner.cap == 15  # the batch of 61 pairs -> 30 -> 15 per pass
    assert sorted(got, key=str) == sorted(ref, key=str) and len(got) == len(plans)
