"""gece's scoring rules as lm-evaluation-harness requests, and the check that a request scores what gece scores.

Every rule becomes one ``multiple_choice`` document with two ``loglikelihood`` requests (docs/lmeval.md), of the
kind its ``request`` names (:mod:`gece.catalog.scoring_rules`: ``word`` for target, ``sentence`` for sentence and mean,
``suffix`` for shared):

    target:    context = sent[:start] (the same on both sides), continuations = the two target words
               log P(word | context)                      = gece's chain rule on the word's tokens
    sentence:  context = "" (lm-eval puts its prefix token first), continuations = the two sentences
               log P(sentence | prefix token)             = gece's sentence rule (lm-eval's crows_pairs)
    mean:      the sentence requests; the import divides each sum by the side's token count T
    shared:    contexts = sent[:end] of each side (prefix and identity term), one continuation = the shared
               suffix (lm-eval's multiple-input pattern, as winogrande's partial scoring)
               log P(suffix | prefix, identity term)      = gece's shared rule less the common prefix's sum,
                                                            which is the same on both sides and cancels in p

A pair is exported only when lm-eval feeds the very tokens gece feeds and sums the very tokens gece sums
(:func:`exact`), with lm-eval's own encoding rebuilt here (``TemplateLM._encode_pair`` of lm-eval 0.4: trailing
spaces of the context move to the continuation, the whole string is encoded and split at the context's length;
an empty context is lm-eval's prefix token, the continuation encoded without special tokens). Everything else is
listed with its reason (:data:`REASONS`) and left out: several differing spans, a differing span with nothing
after it (``shared``: no continuation), target words of several tokens under ``word_prob: max`` (lm-eval gives
the chain sum), and a tokenization that differs at the split (a sub-word boundary).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gece.catalog.scoring_rules import RULE
from gece.scoring.planning import SideTokens
from gece.stats import pair_scores

REASONS = {
    "spans": "the sentences differ in several places: one lm-eval context cannot hold both sides",
    "no_suffix": "nothing follows the differing words: the shared rule has no continuation to request",
    "max": "a target word of several tokens under word_prob max: lm-eval gives the chain sum of its tokens",
    "tokens": "lm-eval's context/continuation split tokenizes differently from gece's whole sentence "
    "(a sub-word boundary), or feeds another first token",
}


def pair_sha(sent_more: str, sent_less: str) -> str:
    """The hash a document carries of its pair's two sentences: sha256 of their JSON list, in hex."""
    return hashlib.sha256(json.dumps([sent_more, sent_less], ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class Request:
    """A pair's two lm-eval requests: ``(context, continuation)`` for sent_more, then for sent_less."""

    more: tuple[str, str]
    less: tuple[str, str]

    @property
    def arguments(self) -> list[tuple[str, str]]:
        return [self.more, self.less]


def request_for(pair: Mapping[str, Any], rule: str) -> Request | str:
    """The requests of a prepared pair under ``rule`` (its ``request``), or the key of :data:`REASONS` that leaves
    it out."""
    m, l = pair["sent_more"], pair["sent_less"]
    kind = RULE[rule].request
    if kind == "sentence":
        return Request(("", m), ("", l))
    if int(pair["n_targets"]) != 1 or len(pair["starts_more"]) != 1 or len(pair["starts_less"]) != 1:
        return "spans"
    sm, em, sl, el = (int(pair[k][0]) for k in ("starts_more", "ends_more", "starts_less", "ends_less"))
    if kind == "word":
        if m[:sm] != l[:sl]:
            return "spans"
        return Request((m[:sm], m[sm:em]), (l[:sl], l[sl:el]))
    if m[em:] != l[el:]:  # suffix
        return "spans"
    if not m[em:].strip():
        return "no_suffix"
    return Request((m[:em], m[em:]), (l[:el], l[el:]))


def logged_as(logged: Sequence[tuple[Any, Any]], expected: Request, chat: bool = False) -> bool:
    """Whether the ``(context, continuation)`` arguments lm-eval logged for a pair are the requests gece exported:
    the same, or, for a run with a chat template (``--apply_chat_template``: lm-eval logs each context as the
    template rendered it, docs/lmeval.md "Prompts"), the same continuations, each context the rendering of the
    exported one (holding it, and longer), and one context for both sides exactly where the export has one."""
    if not chat:
        return list(logged) == expected.arguments
    if len(logged) != 2 or [c for _, c in logged] != [c for _, c in expected.arguments]:
        return False
    pairs = zip(logged, expected.arguments, strict=True)
    if not all(isinstance(got, str) and want in got and got != want for (got, _), (want, _) in pairs):
        return False
    return (logged[0][0] == logged[1][0]) == (expected.more[0] == expected.less[0])


# ------------------------------------------------------------------ lm-eval's tokens, rebuilt
def lmeval_tokens(encode: Any, prefix_id: int, context: str, continuation: str) -> tuple[list[int], int]:
    """The token ids lm-eval's causal models feed for one request and how many belong to the context (the rest are
    summed). ``encode(text, special)`` is the tokenizer as lm-eval calls it (``special`` None: its default)."""
    if context == "":
        cont = list(encode(continuation, False))
        if cont and cont[0] == prefix_id:
            return cont, 1
        return [prefix_id, *cont], 1
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = list(encode(context + continuation, None))
    return whole, len(encode(context, None))


def scored_positions(side: SideTokens, other: SideTokens, rule: str) -> list[int]:
    """The positions (in ``side.ids``) of the tokens gece sums for one side, less those that cancel in p: the target
    word's tokens; every token of the sentence; under a rule that sums matched tokens (``shared``) those after the
    common prefix (the prefix is matched on both sides with the same log-probabilities). Empty when the shared
    tokens are not the common prefix plus what follows the differing span (then no lm-eval request holds them)."""
    (word,) = side.words
    if not RULE[rule].matched:
        return list(word)
    (other_word,) = other.words
    ids = [side.ids[i] for i in word]
    other_ids = [other.ids[i] for i in other_word]
    k = 0
    while k < min(len(ids), len(other_ids)) and ids[k] == other_ids[k]:
        k += 1
    at, at_other = pair_scores.shared_positions(ids, other_ids)
    if at[:k] != list(range(k)) or at_other[:k] != list(range(k)):
        return []
    return [word[i] for i in at[k:]]


def exact(side: SideTokens, positions: Sequence[int], fed: Sequence[int], n_context: int) -> bool:
    """Whether lm-eval (feeding ``fed``, summing its tokens after ``n_context``) sums the log-probabilities gece
    sums at ``positions`` of ``side``: the same ids fed before each summed token, the same tokens summed."""
    return (
        bool(positions)
        and list(fed) == list(side.ids[: len(fed)])
        and list(range(n_context, len(fed))) == list(positions)
    )


def punctuation_only(side: SideTokens, positions: Sequence[int], texts: Sequence[str]) -> bool:
    """``scored_punct_only`` of a pair under a rule that sums matched tokens (``shared``): every token that can move
    p is punctuation (``texts`` are the side's token texts, by position in ``side.ids``)."""
    return all(pair_scores.is_punctuation(texts[i]) for i in positions)
