"""From token log-probabilities to a pair's confidence: a word's and a side's probability, and p.

These are the only numbers computed after the model has run, so they live apart from the engine (no torch
here, and outside the code that determines a token file's bytes): extract stores every target token's
log-probability and logit (``artifacts/tokens/<model>/<benchmark>.parquet``), and the score stage applies
these rules to them (:mod:`gece.pipeline.score`), so changing ``extract.word_prob`` or ``extract.side_prob``,
or this module, runs no model.

For a target word covering tokens x_a..x_b, with lp_t = log P(x_t | x_<t):

    log P(word) = fsum_{t=a..b} lp_t          (``chain``: the chain rule, the word's probability)
    log P(word) = max_{t=a..b} lp_t           (``max``: the authors' rule, the likeliest sub-token)

A side with several target words w_1..w_k (``extract.side_prob``) scores

    joint: log P(w_1..w_k) = fsum_j log P(w_j)        (the chain rule: the default)
    sum:   log sum_j P(w_j)  (a logsumexp)             (the authors' convention)

Every token's log-probability is given everything before it in the sentence, the earlier target words
included, so ``joint`` is the probability of the side's words together, a probability of at most 1 (a
log-probability of at most 0). ``sum`` adds the words' probabilities as if they were alternatives: it
can exceed 1 (two pronouns in one sentence, a two-word occupation), which is why it is not the default;
it reproduces the authors' released scores. Both are exact and equal for one word. The pair's
confidence is ``p = P_more / (P_more + P_less) = sigmoid(logprob_more - logprob_less)``.
Sums are :func:`math.fsum` (correctly rounded), so the result does not depend on the order in
which tokens were scored.

Whole-sentence rules (docs/metrics.md "Scoring rules"). Under a rule whose extraction is ``sentence``
(``sentence``, ``mean``, ``shared``) the token file holds every token x_1..x_T of each sentence after the prefix
token (one extraction feeds them all), with its id, and a side's score is (the rule's ``matched`` and ``mean`` in
:mod:`gece.catalog.scoring_rules`: which tokens are summed, and whether the sum is divided by their number)

    sentence:  s = fsum_t lp_t                          (lm-evaluation-harness's crows_pairs)
    mean:      s = fsum_t lp_t / T                      (bias-bench's rule for generative models)
    shared:    s = fsum_{t in M} lp_t                   (WinoQueer's reference code for causal LMs)

where M is the side's tokens matched to the other side's: the blocks of
``difflib.SequenceMatcher(None, ids_more, ids_less, autojunk=False).get_matching_blocks()`` on the two
token-id sequences (the longest matching block first, then recursively left and right of it). Each matched
token is scored given its own sentence's prefix, so the identity term is given, not predicted; the differing
tokens are not scored. The common prefix is matched and has the same log-probabilities on both sides, so it
cancels in p. When nothing is matched both sums are 0 and p = 1/2. ``scored_punct_only`` flags a pair whose
tokens that can move p (``shared``: the matched tokens after the first position where the two sequences
differ) are all punctuation or whitespace (:func:`is_punctuation`): such a pair measures how likely a full
stop is after each sentence, not the identity term.
"""

from __future__ import annotations

import difflib
import math
import unicodedata
from collections.abc import Sequence
from typing import Literal

from gece.catalog.scoring_rules import RULE, RULES

WordProb = Literal["chain", "max"]
SideProb = Literal["joint", "sum"]
SIDE_PROBS: tuple[SideProb, ...] = ("joint", "sum")


def word_logprob(token_logprobs: Sequence[float], rule: WordProb = "chain") -> float:
    """log P(word) from its tokens' log-probabilities: their sum (chain rule) or their max."""
    if rule == "chain":
        return float(math.fsum(token_logprobs))
    if rule == "max":
        return float(max(token_logprobs))
    raise ValueError(f"word_prob must be chain or max, got {rule!r}")


def side_logprob(word_logprobs: Sequence[float], side: SideProb = "joint") -> float:
    """A side's log-probability from its words': their sum, log P(w_1..w_k) (``joint``), or the logsumexp
    log sum_w P(w) (``sum``); both are the word's own for one word."""
    if len(word_logprobs) == 1:
        return float(word_logprobs[0])
    if side == "joint":
        return float(math.fsum(word_logprobs))
    if side != "sum":
        raise ValueError(f"side_prob must be joint or sum, got {side!r}")
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


def side_score(token_logprobs: Sequence[Sequence[float]], rule: WordProb, side: SideProb = "joint") -> float:
    """A side's log-probability from its words' token log-probabilities (per word, per token)."""
    return side_logprob([word_logprob(w, rule) for w in token_logprobs], side)


def score_record(
    logprobs_more: Sequence[Sequence[float]],
    logprobs_less: Sequence[Sequence[float]],
    logits_more: Sequence[Sequence[float]] | None,
    logits_less: Sequence[Sequence[float]] | None,
    rule: WordProb,
    side: SideProb = "joint",
) -> dict[str, float | int | None]:
    """A pair's score columns (:class:`gece.io.schemas.pair_rows.ScoreRow`) from its two sides' target tokens.

    ``logprobs_*`` and ``logits_*`` are per word, per token; ``logit_*`` is the raw logit of each
    side's first target token (None where the backend gives log-probabilities only).
    """
    lm, ll = side_score(logprobs_more, rule, side), side_score(logprobs_less, rule, side)
    return {
        "n_tokens_more": sum(map(len, logprobs_more)),
        "n_tokens_less": sum(map(len, logprobs_less)),
        "logprob_more": lm,
        "logprob_less": ll,
        "logit_more": None if logits_more is None else float(logits_more[0][0]),
        "logit_less": None if logits_less is None else float(logits_less[0][0]),
        "p": pair_p(lm, ll),
        "scored_punct_only": None,  # the target words are words: not assessed
    }


def is_punctuation(text: str) -> bool:
    """A token's text is punctuation or whitespace: nothing but characters of Unicode category P* once
    stripped (an empty or all-space token counts)."""
    return all(unicodedata.category(c).startswith("P") for c in text.strip())


def shared_positions(ids_more: Sequence[int], ids_less: Sequence[int]) -> tuple[list[int], list[int]]:
    """The positions of the matched tokens on each side: difflib's matching blocks on the two id sequences."""
    blocks = difflib.SequenceMatcher(None, list(ids_more), list(ids_less), autojunk=False).get_matching_blocks()
    more = [b.a + k for b in blocks for k in range(b.size)]
    less = [b.b + k for b in blocks for k in range(b.size)]
    return more, less


def sentence_record(
    logprobs_more: Sequence[float],
    logprobs_less: Sequence[float],
    ids_more: Sequence[int],
    ids_less: Sequence[int],
    text_more: Sequence[str],
    rule: str,
) -> dict[str, float | int | bool]:
    """A pair's score columns under a whole-sentence rule (extraction ``sentence``: ``sentence``, ``mean``,
    ``shared``) from every token of its two sentences (log-probabilities, ids, and sent_more's token texts for the
    punctuation flag): the matched tokens' sum or every token's (the rule's ``matched``), divided by their number
    under ``mean``."""
    spec = RULE.get(rule)
    if spec is None or spec.extraction != "sentence":
        names = ", ".join(r.name for r in RULES if r.extraction == "sentence")
        raise ValueError(f"rule must be one of {names}, got {rule!r}")
    if spec.matched:
        at_more, at_less = shared_positions(ids_more, ids_less)
        lm = math.fsum(logprobs_more[i] for i in at_more)
        ll = math.fsum(logprobs_less[j] for j in at_less)
        first = next((i for i, (a, b) in enumerate(zip(ids_more, ids_less, strict=False)) if a != b), None)
        first = min(len(ids_more), len(ids_less)) if first is None else first
        moving = [text_more[i] for i in at_more if i >= first]
        n_more = n_less = len(at_more)
        punct = all(map(is_punctuation, moving))
    else:
        lm, ll = math.fsum(logprobs_more), math.fsum(logprobs_less)
        n_more, n_less = len(logprobs_more), len(logprobs_less)
        punct = False
    if spec.mean and n_more:  # nothing matched: both sums are 0, and so is their mean
        lm, ll = lm / n_more, ll / n_less
    return {
        "n_tokens_more": n_more,
        "n_tokens_less": n_less,
        "logprob_more": lm,
        "logprob_less": ll,
        "p": pair_p(lm, ll),
        "scored_punct_only": punct,
    }
