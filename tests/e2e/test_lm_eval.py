"""The sentence rule against lm-evaluation-harness itself (``lm-eval``'s ``HFLM.loglikelihood_rolling``,
the log-likelihood its crows_pairs task compares), on the same model directory gece reads.

lm-eval encodes a sentence without special tokens, predicts its first token from the prefix token
(SmolLM2's BOS, ``<|im_start|>``), takes float32 log_softmax of the float32 logits and sums the
tokens' log-probabilities in float32, with torch's stock kernels on a padded batch. gece feeds the
same tokens (the prefix token, then the sentence), takes float64 log_softmax of its float32
logits (correctly rounded products) and sums with ``math.fsum``. Measured on these 100 sentences
(docs/metrics.md): |gece - lm-eval| max 6.1e-4, median 2.1e-4; almost all of it is lm-eval's
float32 accumulation (the stock model's float64 sum differs from lm-eval by as much), while gece
and the stock model's float64 sum agree within 6e-5.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from gece.io.formats import benchmarks
from gece.scoring import engine, planning
from gece.stats import metrics, pair_scores

from ..conftest import DATA

pytestmark = pytest.mark.slow
PAIRS = 50  # x 2 sentences


def test_sentence_loglikelihoods_agree_with_lm_eval(smol):
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch = pytest.importorskip("torch")
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    df = pd.read_csv(DATA / "crows_pairs" / "crows_pairs_anonymized.csv").iloc[:PAIRS]
    rows = pd.DataFrame(
        {
            "row": range(1, PAIRS + 1),
            "sent_more": df["sent_more"],
            "sent_less": df["sent_less"],
            "y": 1,
            "bias_type": df["bias_type"],
        }
    )
    pairs = benchmarks.prepare_pairs(rows, "crows_pairs")
    sides, plans = planning.plans_for(smol.tokenizer, pairs, True, extraction="sentence")
    assert all(s.prefixed and s.ids[0] == smol.tokenizer.bos_token_id for pair in sides for s in pair)
    runner = engine.Runner(smol.model, smol.tokenizer.pad_token_id)
    scores = sorted(
        (s for res, _ in engine.score(runner, engine.batches(plans, 16)) for s in res), key=lambda s: s.index
    )
    gece = np.array([s.more.joint_logprob() for s in scores] + [s.less.joint_logprob() for s in scores])
    assert engine.max_abs_diff(scores, engine.score_naive(smol.model, sides)) == 0.0  # the optimized path is exact

    lm = HFLM(pretrained=smol.loaded_from, device="cpu", dtype="float32", batch_size=16)
    assert lm.prefix_token_id == smol.tokenizer.bos_token_id
    texts = [*df["sent_more"], *df["sent_less"]]
    for text, side in zip(texts, [p[0] for p in sides] + [p[1] for p in sides], strict=True):
        assert [lm.prefix_token_id, *lm.tok_encode(text)] == list(side.ids)  # the very same tokens
    reqs = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(t,), idx=i) for i, t in enumerate(texts)]
    theirs = np.array(lm.loglikelihood_rolling(reqs, disable_tqdm=True))
    diff = np.abs(gece - theirs)
    assert diff.max() <= 1e-3, f"max |gece - lm-eval| = {diff.max():.3g}"
    assert np.median(diff) <= 5e-4
    assert (gece < -10).all() and gece.std() > 5  # real sentence log-likelihoods, not a constant

    # the stock model's float64 sum (same weights, torch's own kernels, one sentence at a time)
    stock = []
    with torch.inference_mode():
        for side in [p[0] for p in sides] + [p[1] for p in sides]:
            ids = torch.tensor([side.ids])
            lp = torch.log_softmax(lm.model(ids).logits[0].double(), -1)[:-1].gather(1, ids[0, 1:, None])[:, 0]
            stock.append(math.fsum(lp.tolist()))
    assert np.abs(gece - np.array(stock)).max() <= 1e-4
    # pct_stereotype: gece's metric on gece's p against lm-eval's crows_pairs process_results on its own
    # log-likelihoods (a pair whose two sentences lie within the 1e-3 above could flip; none does here)
    from lm_eval.tasks.crows_pairs.utils import process_results

    p = np.array([pair_scores.score_record(**s.tokens(), rule="chain")["p"] for s in scores])
    ours = metrics.summarize(p, np.ones(PAIRS), np.array(["a"] * PAIRS), np.array(["b"] * PAIRS))["pct_stereotype"]
    per_pair = [
        process_results({}, [(a, False), (b, False)])["pct_stereotype"]
        for a, b in zip(theirs[:PAIRS], theirs[PAIRS:], strict=True)
    ]
    assert ours == np.mean(per_pair) and 0.2 < ours < 0.9
