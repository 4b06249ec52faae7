"""Which tokens a pair's score reads, and what the engine feeds for it (:mod:`gece.scoring.engine`).

Alignment: a target word covers the tokens whose character span intersects the word's span
(:func:`word_tokens`, from the tokenizer's offset mapping). A word at its sentence's first token
is predicted from a prefix token (:func:`prefix_token`: the tokenizer's BOS, else its EOS), fed
in front of both sentences of the pair (:func:`prefix_pairs`). Under the sentence extraction a side's
one "word" is every token of the sentence after the prefix token.

Planning: side s needs the hidden states at positions t-1 for its target tokens t, so it feeds
its first max(t) tokens; the two sides share the longest common prefix of what they feed, fed
once (:func:`plan_pair`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from gece.base.errors import GeceError
from gece.catalog.scoring_rules import RULE, Extraction


def plan_of(rule: str) -> Extraction:
    """What a scoring rule extracts (its ``extraction`` in :mod:`gece.catalog.scoring_rules`): ``target`` its target
    words; ``sentence`` every token of each sentence (one extraction feeds every such rule; the score stage
    applies the rule)."""
    return RULE[rule].extraction


# ------------------------------------------------------------------------ alignment
def word_tokens(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """Indices of the tokens whose character span [s, e) intersects the word's [start, end).

    Zero-width spans (special tokens such as BOS, at (0, 0)) never intersect. Offsets of the
    default models include a token's leading space (" him" -> (47, 51) for a word at [48, 51)).
    """
    return [i for i, (s, e) in enumerate(offsets) if s < e and s < end and e > start]


@dataclass(frozen=True)
class SideTokens:
    """One sentence tokenized: its token ids and, per target word, the indices of its tokens.

    ``prefixed``: the ids start with the prefix token gece put in front (:func:`prefix_pairs`).
    """

    ids: tuple[int, ...]
    words: tuple[tuple[int, ...], ...]
    prefixed: bool = False


NO_TOKEN_HINT = (
    "the word is made of characters the tokenizer drops (zero-width or control characters?): "
    "fix that row of the benchmark CSV or remove the pair"
)


NO_TARGET_HINT = "score whole sentences (extract.rule: sentence), or remove the pair from the benchmark"


def tokenize(
    tokenizer: Any,
    sentences: Sequence[str],
    starts: Sequence[Sequence[int]],
    ends: Sequence[Sequence[int]],
    special_tokens: bool,
    names: Sequence[str] | None = None,
    extraction: Extraction = "target",
) -> list[SideTokens]:
    """Tokenize sentences (with the tokenizer's special tokens or none) and align their target words.

    Under the sentence extraction each sentence has one word, every token from its first to its last
    that covers a character (``starts``/``ends`` are not read). A word may start at the first
    token; :func:`prefix_pairs` puts the prefix token in front of such pairs. Raises one
    GeceError listing every target word that covers no token and every sentence without a
    target word (target extraction), each named by ``names[k]`` (file, pair and row).
    """
    enc = tokenizer(list(sentences), add_special_tokens=special_tokens, return_offsets_mapping=True)
    out, problems, hints = [], [], []
    for k, (ids, offs) in enumerate(zip(enc["input_ids"], enc["offset_mapping"], strict=True)):
        where = f"{names[k]}: " if names is not None else ""
        spans = [(0, len(sentences[k]))] if extraction == "sentence" else list(zip(starts[k], ends[k], strict=True))
        if not spans:
            problems.append(
                f"{where}{sentences[k]!r} has no target word (the other sentence of the pair only adds "
                "words, or the two are the same)"
            )
            hints.append(NO_TARGET_HINT)
        words = []
        for s, e in spans:
            toks = word_tokens(offs, s, e)
            if not toks:
                what = "the sentence" if extraction == "sentence" else f"target word {sentences[k][s:e]!r} of"
                problems.append(f"{where}{what} {sentences[k]!r} covers no token")
                hints.append(NO_TOKEN_HINT)
            elif extraction == "sentence":  # contiguous, whatever zero-width tokens lie inside
                toks = list(range(toks[0], toks[-1] + 1))
            words.append(tuple(toks))
        out.append(SideTokens(tuple(int(i) for i in ids), tuple(words)))
    if problems:
        raise GeceError(
            f"{len(problems)} sentence(s) or target word(s) cannot be scored with this tokenizer; nothing was scored",
            problems=problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else []),
            hint="; or ".join(dict.fromkeys(hints)),
        )
    return out


def prefix_token(tokenizer: Any) -> int:
    """The token that predicts a sentence's first token (lm-evaluation-harness's ``prefix_token_id``):
    the tokenizer's BOS, else its EOS."""
    for name in ("bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise GeceError(
        f"{type(tokenizer).__name__} has neither a BOS nor an EOS token: nothing can predict a sentence's first token",
        hint="use a tokenizer with a BOS or EOS token, or (target rule) "
        "remove the pairs whose target word is the first word",
    )


def needs_prefix(side: SideTokens) -> bool:
    """A target word starts at the sentence's first token: nothing in the sentence predicts it."""
    return any(w and w[0] == 0 for w in side.words)


def prefix_pairs(
    sides: Sequence[tuple[SideTokens, SideTokens]], prefix_id: Callable[[], int]
) -> list[tuple[SideTokens, SideTokens]]:
    """Both sentences of every pair where either side :func:`needs_prefix`, with the prefix token
    (``prefix_id()``, asked only when some pair needs it) in front and their words shifted by one;
    other pairs unchanged, so that both sides of a pair are always fed alike."""
    out, tok = [], None
    for pair in sides:
        if any(needs_prefix(side) for side in pair):
            tok = prefix_id() if tok is None else tok
            pair = tuple(
                SideTokens((tok, *side.ids), tuple(tuple(t + 1 for t in w) for w in side.words), True) for side in pair
            )
        out.append(pair)
    return out


# -------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class SidePlan:
    """What one side feeds after the shared prefix, and where its target tokens are read.

    ``targets[w]`` lists (position, token id) for word w, position t-1 predicting token x_t,
    counted from the start of the side's sequence (prefix + suffix).
    """

    suffix: tuple[int, ...]
    targets: tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class PairPlan:
    index: int
    prefix: tuple[int, ...]
    more: SidePlan
    less: SidePlan

    @property
    def continued(self) -> bool:
        """True when some target is read beyond the shared prefix (or there is no shared prefix)."""
        return bool(self.more.suffix or self.less.suffix)

    @property
    def n_fed(self) -> int:
        return len(self.prefix) + len(self.more.suffix) + len(self.less.suffix)


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_pair(index: int, more: SideTokens, less: SideTokens) -> PairPlan:
    """Split a pair into a shared prefix and per-side suffixes, fed only up to the last target.

    Side s needs the hidden states at positions t-1 for its target tokens t, so it feeds
    F_s = max(t) tokens. The prefix is the longest common prefix of the two fed sequences
    (P <= min(F_more, F_less)); each side's suffix is its tokens P..F_s-1 (often empty).
    """
    feeds = []
    for side in (more, less):
        last = max(t for w in side.words for t in w)
        feeds.append(side.ids[:last])
    p = common_prefix_len(*feeds)
    plans = [
        SidePlan(tuple(feed[p:]), tuple(tuple((t - 1, side.ids[t]) for t in w) for w in side.words))
        for side, feed in zip((more, less), feeds, strict=True)
    ]
    return PairPlan(index, tuple(feeds[0][:p]), plans[0], plans[1])


def plans_for(
    tokenizer: Any, pairs: Any, special_tokens: bool, source: str | None = None, extraction: Extraction = "target"
) -> tuple[list[tuple[SideTokens, SideTokens]], list[PairPlan]]:
    """Tokenize and plan the prepared pairs (a frame with ``sent_*``, ``starts_*``, ``ends_*``, ``pair_id``)
    for an extraction (:func:`plan_of`): ``target`` (the target words) or ``sentence`` (the whole sentences);
    pairs with a word at the first token get the prefix token (:func:`prefix_pairs`).

    ``source`` (the prepared file) and each pair's ``row`` name the pair in alignment errors.
    """
    if extraction not in get_args(Extraction):
        raise ValueError(f"extraction must be {' or '.join(get_args(Extraction))}, got {extraction!r}")
    ids = list(pairs["pair_id"])
    rows = list(pairs["row"]) if "row" in pairs else [None] * len(ids)
    names = [
        f"{source + ': ' if source else ''}pair {pid}" + (f" (row {r} of the benchmark CSV)" if r else "")
        for pid, r in zip(ids, rows, strict=True)
    ]
    both = tokenize(
        tokenizer,
        [*pairs["sent_more"], *pairs["sent_less"]],  # both sides: one error lists all
        [*pairs["starts_more"], *pairs["starts_less"]],
        [*pairs["ends_more"], *pairs["ends_less"]],
        special_tokens,
        names + names,
        extraction,
    )
    sides = prefix_pairs(list(zip(both[: len(ids)], both[len(ids) :], strict=True)), lambda: prefix_token(tokenizer))
    return sides, [plan_pair(i, m, l) for i, (m, l) in enumerate(sides)]
