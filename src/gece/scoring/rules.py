"""From token log-probabilities to a pair's confidence: the word rule, the side rule and p.

These are the only numbers computed after the model has run, so they live apart from the engine
(no torch here): extract stores every target token's log-probability and logit
(``artifacts/tokens/<model>/<benchmark>.parquet``), and the score stage applies these rules to them
(:mod:`gece.pipeline.score`), so changing ``extract.word_prob`` runs no model.

For a target word covering tokens x_a..x_b, with lp_t = log P(x_t | x_<t):

    log P(word) = fsum_{t=a..b} lp_t          (``chain``: the chain rule, the word's probability)
    log P(word) = max_{t=a..b} lp_t           (``max``: the authors' rule, the likeliest sub-token)

A side with several target words scores the sum of their probabilities,
``logprob = log sum_w P(w)`` (computed as a logsumexp, exact for one word), and the pair's
confidence is ``p = P_more / (P_more + P_less) = sigmoid(logprob_more - logprob_less)``.
Sums are :func:`math.fsum` (correctly rounded), so the result does not depend on the order in
which tokens were scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

WordProb = Literal["chain", "max"]


def word_logprob(token_logprobs: Sequence[float], rule: WordProb = "chain") -> float:
    """log P(word) from its tokens' log-probabilities: their sum (chain rule) or their max."""
    if rule == "chain":
        return float(math.fsum(token_logprobs))
    if rule == "max":
        return float(max(token_logprobs))
    raise ValueError(f"word_prob must be chain or max, got {rule!r}")


def side_logprob(word_logprobs: Sequence[float]) -> float:
    """log sum_w P(w) = logsumexp of the words' log-probabilities (exact for one word)."""
    if len(word_logprobs) == 1:
        return float(word_logprobs[0])
    m = max(word_logprobs)
    if m == -math.inf:
        return -math.inf
    return float(m + math.log(math.fsum(math.exp(v - m) for v in word_logprobs)))


def pair_p(logprob_more: float, logprob_less: float) -> float:
    """p = P_more / (P_more + P_less) = sigmoid(logprob_more - logprob_less), computed stably."""
    d = logprob_more - logprob_less
    if math.isnan(d):
        return 0.5 if logprob_more == logprob_less else float("nan")
    if d >= 0:
        return 1.0 / (1.0 + math.exp(-d))
    e = math.exp(d)
    return e / (1.0 + e)


def side_score(token_logprobs: Sequence[Sequence[float]], rule: WordProb) -> float:
    """A side's log-probability from its words' token log-probabilities (per word, per token)."""
    return side_logprob([word_logprob(w, rule) for w in token_logprobs])


def score_record(
    logprobs_more: Sequence[Sequence[float]],
    logprobs_less: Sequence[Sequence[float]],
    logits_more: Sequence[Sequence[float]] | None,
    logits_less: Sequence[Sequence[float]] | None,
    rule: WordProb,
) -> dict[str, float | int | None]:
    """A pair's score columns (:class:`gece.io.schemas.ScoreRow`) from its two sides' target tokens.

    ``logprobs_*`` and ``logits_*`` are per word, per token; ``logit_*`` is the raw logit of each
    side's first target token (None where the backend gives log-probabilities only).
    """
    lm, ll = side_score(logprobs_more, rule), side_score(logprobs_less, rule)
    return {
        "n_tokens_more": sum(map(len, logprobs_more)),
        "n_tokens_less": sum(map(len, logprobs_less)),
        "logprob_more": lm,
        "logprob_less": ll,
        "logit_more": None if logits_more is None else float(logits_more[0][0]),
        "logit_less": None if logits_less is None else float(logits_less[0][0]),
        "p": pair_p(lm, ll),
    }
