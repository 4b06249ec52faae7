"""Each whole-sentence rule (sentence, mean, shared) against a straightforward computation written here.

gece's path: the pairs planned and scored by the engine (packed batches, correctly rounded products) and the
score stage's rule (:func:`gece.stats.pair_scores.sentence_record` on the token ids the extract stage keeps). The
independent path: the same weights loaded by transformers in float64 with its stock kernels (gece's loaded model routes
its products through gece's own kernels), the prefix token then the sentence, float64 log_softmax of its
logits, and, for ``shared``, an alignment written here as the longest common subsequence
of the two token-id sequences by dynamic programming (difflib's matching blocks are a common subsequence, so
where the LCS is unique the two agree; the test checks that the positions match). ``mean`` is read as
bias-bench's generative CrowS-Pairs score: the mean over the sentence's tokens of log P(token | the tokens
before it), the first predicted from the prefix token. On 100 CrowS-Pairs pairs and 118 WinoQueer pairs (every
50th row: sentences that differ in their first word and in their last).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gece.pipeline.prepare import prepare
from gece.scoring import engine, planning
from gece.scoring.extraction import token_columns
from gece.stats import pair_scores

from ..conftest import DATA

pytestmark = pytest.mark.slow
TOL_LOGPROB = 1e-4  # per token, gece's exact float32 path against a float64 forward (seen: 5.4e-5)


def _lcs(a: list[int], b: list[int]) -> tuple[list[int], list[int]]:
    """Positions of a longest common subsequence of a and b (dynamic programming, leftmost on ties)."""
    n, m = len(a), len(b)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
    i = j = 0
    out_a, out_b = [], []
    while i < n and j < m:
        if a[i] == b[j]:
            out_a.append(i), out_b.append(j)
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return out_a, out_b


@pytest.fixture(scope="module")
def stock(smol):
    """The same weights read by transformers itself, in float64 with its stock kernels: gece's loaded model routes
    its products through gece's own kernels, so it would not be an independent path. (A float32 stock forward is
    itself 2.1e-4 from float64 on one token of the first 100 CrowS-Pairs pairs; gece's path is 5.4e-5 from it.)"""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    model = transformers.AutoModelForCausalLM.from_pretrained(smol.loaded_from, dtype=torch.float64)
    return model.eval()


def _stock(model, sentences: list[tuple[int, ...]], batch: int = 32) -> list[list[float]]:
    """log P(token | the tokens before it) of every token after the first, per sentence: float64 log_softmax of
    the stock model's logits, sentences of one length batched together (no padding: a padded batch takes other
    kernels, 2e-4 away on some tokens)."""
    import torch

    out: dict[int, list[float]] = {}
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(sentences):
        by_length.setdefault(len(s), []).append(i)
    with torch.inference_mode():
        for members in by_length.values():
            for start in range(0, len(members), batch):
                chunk = members[start : start + batch]
                ids = torch.tensor([sentences[i] for i in chunk])
                lp = torch.log_softmax(model(input_ids=ids).logits.double(), -1)[:, :-1]
                picked = lp.gather(2, ids[:, 1:, None])[..., 0]
                out.update({i: picked[row].tolist() for row, i in enumerate(chunk)})
    return [out[i] for i in range(len(sentences))]


@pytest.mark.parametrize(
    ("source", "rows"),
    [
        ("crows_pairs/crows_pairs_anonymized.csv", slice(0, 100)),
        ("winoqueer/winoqueer_benchmark.csv", slice(0, None, 50)),
    ],
)
def test_rules_against_a_stock_forward_and_an_lcs(smol, stock, tmp_path, source, rows):
    pairs = prepare(DATA / source, tmp_path / "p.parquet", imported=True).iloc[rows].reset_index(drop=True)
    assert len(pairs) >= 100
    sides, plans = planning.plans_for(smol.tokenizer, pairs, True, extraction=planning.plan_of("shared"))
    runner = engine.Runner(smol.model, smol.tokenizer.pad_token_id)
    scores = sorted((s for r, _ in engine.score(runner, engine.batches(plans, 16)) for s in r), key=lambda s: s.index)
    text = smol.tokenizer.decode
    reference = _stock(stock, [s.ids for pair in sides for s in pair])
    worst, lcs_differs, punct = 0.0, 0, 0
    for k, (sc, plan, (more, less)) in enumerate(zip(scores, plans, sides, strict=True)):
        tok = {**sc.tokens(), **token_columns(plan, lambda i: text([i]))}
        ids_m, ids_l = list(more.ids[1:]), list(less.ids[1:])  # after the prefix token
        assert tok["token_ids_more"][0] == ids_m and tok["token_ids_less"][0] == ids_l
        lp_m, lp_l = reference[2 * k], reference[2 * k + 1]
        worst = max(
            worst,
            *np.abs(np.subtract(tok["logprobs_more"][0], lp_m)),
            *np.abs(np.subtract(tok["logprobs_less"][0], lp_l)),
        )
        at_m, at_l = _lcs(ids_m, ids_l)
        lcs_differs += (at_m, at_l) != pair_scores.shared_positions(ids_m, ids_l)
        expected = {
            "sentence": (math.fsum(lp_m), math.fsum(lp_l)),
            "mean": (math.fsum(lp_m) / len(lp_m), math.fsum(lp_l) / len(lp_l)),
            "shared": (math.fsum(lp_m[i] for i in at_m), math.fsum(lp_l[j] for j in at_l)),
        }
        for rule, (em, el) in expected.items():
            got = pair_scores.sentence_record(
                tok["logprobs_more"][0], tok["logprobs_less"][0], ids_m, ids_l, tok["token_text_more"][0], rule
            )
            scale = len(lp_m) if rule != "mean" else 1
            assert (
                abs(got["logprob_more"] - em) <= TOL_LOGPROB * scale
                and abs(got["logprob_less"] - el) <= TOL_LOGPROB * scale
            )
            assert abs(got["p"] - 1 / (1 + math.exp(el - em))) <= 1e-4
        punct += pair_scores.sentence_record(
            tok["logprobs_more"][0], tok["logprobs_less"][0], ids_m, ids_l, tok["token_text_more"][0], "shared"
        )["scored_punct_only"]
    assert worst <= TOL_LOGPROB
    assert lcs_differs == 0  # the matching blocks are the (here unique) longest common subsequence
    if "winoqueer" in source:  # every pair that does not differ in its first word scores only the final "."
        assert punct == int((pairs["first_diff"] == "later").sum()) > 0
