"""The self-check: a few pairs scored both ways before a model scores a benchmark.

The optimized path (pairs packed into a token trie, the LM head only where a target token is
predicted) assumes that a model's log-probabilities are ``log_softmax(head(decoder(x)))`` (plus
soft-capping where the model caps). An architecture that computes them otherwise would give wrong
scores silently, so extract scores :data:`SAMPLE` pairs of the benchmark with both the optimized path
and the model's own forward pass (:func:`gece.scoring.engine.score_naive`: whole sentences through
``model(...)``, its own full logits, unmodified), and refuses the model when they differ by more than the
model's numbers can explain. On the CPU with gece's numerics and attention the naive path feeds the
sample's sentences in one right-padded batch with an attention mask, which gives each sentence the bits
it has alone (tested: ``tests/test_scoring.py``), so the check reads the weights once instead of once
per sentence; the sample is the shortest pair of each part of the first batch the scoring yields, whose own
scores are the optimized side, and the naive pass runs in a thread beside the scoring (:func:`beside`), judged before
that batch is written. Elsewhere (:func:`run`: a GPU, stock attention, or a resumed first shard) the
sample is spread over the first window and scored both ways before the scoring, each sentence fed
alone. Over the target tokens of the sample:

    d_fast = max |lp_optimized - lp_naive|          (the same model, dtype and device)

1. **The CPU with gece's exact numerics** (the default ``attention: exact``): every product is
   correctly rounded and attention is laid out the same in every batch (:mod:`gece.scoring.exact`),
   so the two paths compute the same bits. Allowed: d_fast = 0.
2. **Elsewhere** (a GPU, or stock attention), two correct computations differ by their rounding,
   and how much depends on the dtype and the model. The sample's naive path is scored again one
   precision up (:data:`REFERENCE`: float32 for bfloat16 and float16, float64 for float32), by
   casting the model in place and back (both casts are exact), and

       d_ref   = max |lp_naive - lp_reference|      (what the dtype's rounding costs the model's own pass)
       allowed = FACTOR * d_ref + FLOOR[dtype]

   The optimized path rounds differently from the naive one, but not by more than a few times what
   rounding costs either of them, so FACTOR = 8 leaves room without admitting a wrong
   architecture, whose errors are of order 0.1 to 10 in log-probability. FLOOR keeps a sample whose
   reference happened to agree closely from refusing on one unlucky rounding.
3. **No reference**: on the CPU with stock attention (gece's CPU products are float32 whatever
   the input, so a float64 pass cannot be had), with a model spread over devices (``device:
   multi``), or when the cast model does not fit in memory, allowed = :data:`FALLBACK` [dtype]:
   1e-4 in float32, 0.1 in float16, 0.5 in bfloat16 (the differences measured on an H200 with the
   Llama-3.1-8B shape were 6.6e-5 in float32 and up to 0.15 in bfloat16).

The result (:class:`SelfCheck`) goes into the extract meta: d_fast, d_ref, the reference's dtype,
the allowed difference, and for bfloat16 and float16 the median and largest |p_dtype - p_float32|
of the sample's pairs (what the cheaper dtype costs the score itself, under the chain rule).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from gece.io.schemas.tokens import SelfCheck
from gece.scoring import attention as exact_attention
from gece.scoring import engine, planning

log = logging.getLogger(__name__)

SAMPLE = 4  # pairs scored both ways
FACTOR = 8.0
REFERENCE = {"float32": "float64", "bfloat16": "float32", "float16": "float32"}
FLOOR = {"float64": 0.0, "float32": 1e-5, "float16": 2.0**-9, "bfloat16": 2.0**-6}
FALLBACK = {"float64": 1e-8, "float32": 1e-4, "float16": 0.1, "bfloat16": 0.5}


def sample(n: int, k: int = SAMPLE) -> list[int]:
    """k indices spread evenly over range(n), first and last included (fewer when n < k)."""
    return sorted({round(float(i)) for i in np.linspace(0, n - 1, min(k, n))}) if n else []


def shortest_spread(first: Sequence[planning.PairPlan], sides: Sequence, k: int) -> list[int]:
    """The plans' indices of the shortest pair (its longer side's tokens; ties by position) in each of ``k``
    equal parts of ``first`` (a batch, ordered by its fed tokens): spread over the batch's beginnings as
    :func:`sample` is, and as short as a part allows, since the naive pass pads every sentence of the sample
    to the longest and computes each position's logits over the whole vocabulary."""
    parts = np.array_split(np.arange(len(first)), min(k, len(first)))

    def length(j: int) -> int:
        more, less = sides[first[j].index]
        return max(len(more.ids), len(less.ids))

    return [first[min(part.tolist(), key=lambda j: (length(j), j))].index for part in parts]


def _sig(x: float | None, digits: int = 3) -> float | None:
    """x to a few significant digits: the meta records magnitudes, not the last bits of a GPU's sums."""
    return x if x is None or not math.isfinite(x) else float(f"{x:.{digits - 1}e}")


def allowed_difference(exact: bool, dtype: str, reference_diff: float | None) -> tuple[str, float]:
    """The rule that applies and the largest d_fast it allows (see the module docstring)."""
    if exact:
        return "exact", 0.0
    if reference_diff is None or not math.isfinite(reference_diff):
        return "fallback", FALLBACK[dtype]
    return "reference", FACTOR * reference_diff + FLOOR[dtype]


def _cast_reference(model: Any, sides: Sequence, dtype: str) -> list[engine.PairScore] | None:
    """The naive path with the model cast to ``dtype`` and back (None when it does not fit in memory)."""
    import torch

    current = model.dtype
    scores = None
    try:
        model.to(getattr(torch, dtype))
        scores = engine.score_naive(model, sides)
    except torch.OutOfMemoryError:
        log.warning("the self-check's %s reference pass does not fit in memory: using the fixed tolerance", dtype)
    finally:
        model.to(current)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return scores


def _p(score: engine.PairScore) -> float:
    """sigmoid(joint log P of sent_more's target tokens - sent_less's), computed stably."""
    d = score.more.joint_logprob() - score.less.joint_logprob()
    return 1.0 / (1.0 + math.exp(-d)) if d >= 0 else math.exp(d) / (1.0 + math.exp(d))


def run(runner: engine.Runner, sides: Sequence, plans: Sequence[planning.PairPlan]) -> SelfCheck | None:
    """Score the :func:`sample` of ``plans`` (with their ``sides``) both ways, measure, and raise
    RuntimeError when the optimized path disagrees with the model's own forward pass by more than
    :func:`allowed_difference`. None when there is nothing to check (no pairs) or the model's own
    pass overflows on the sample (extract reports such pairs itself)."""
    picked = sample(len(plans))
    if not picked:
        return None
    model = runner.model
    together = runner.workers > 1 and engine.naive_batched(model)  # the CPU: both passes at once, a thread each

    def fast_path() -> list[engine.PairScore]:
        ((scores, _),) = engine.score(runner, [[plans[i] for i in picked]])  # one batch, halved on out-of-memory
        return sorted(scores, key=lambda s: s.index)  # the plans' order, as the naive path's

    def naive_path() -> list[engine.PairScore] | None:
        return _naive(runner, [sides[i] for i in picked], 1 if together else runner.workers)

    if together:
        fast, naive = engine.side_by_side(2, lambda path: path(), [fast_path, naive_path])
    else:
        fast, naive = fast_path(), naive_path()
    return _judge(runner, [sides[i] for i in picked], fast, naive)


def _naive(runner: engine.Runner, sides: Sequence, workers: int) -> list[engine.PairScore] | None:
    """The sample's naive path (None when it runs out of device memory)."""
    try:
        return engine.score_naive(runner.model, sides, workers)
    except runner.torch.OutOfMemoryError:
        return None


def _judge(
    runner: engine.Runner, sides: Sequence, fast: list[engine.PairScore], naive: list[engine.PairScore] | None
) -> SelfCheck | None:
    """Compare the sample's two paths (``fast`` and ``naive`` in the order of ``sides``), with a reference pass one
    precision up where the rule needs one; raise RuntimeError beyond :func:`allowed_difference` (see :func:`run`)."""
    model = runner.model
    dtype = str(model.dtype).removeprefix("torch.")
    if naive is None:
        runner.out_of_memory(1)
    d_fast = engine.max_abs_diff(fast, naive)
    if math.isnan(d_fast) and not all(
        math.isfinite(v) for s in naive for side in (s.more, s.less) for w in side.token_logprobs for v in w
    ):
        return None
    exact = runner.exact and model.config._attn_implementation == exact_attention.NAME
    ref_dtype = ref_diff = None
    ref = None
    if not runner.exact and not getattr(model, "hf_device_map", None):
        ref_dtype = REFERENCE.get(dtype)
        ref = _cast_reference(model, sides, ref_dtype) if ref_dtype else None
        ref_diff = engine.max_abs_diff(naive, ref) if ref is not None else None
    rule, allowed = allowed_difference(exact, dtype, ref_diff)
    p_med = p_max = None
    if ref is not None and dtype in ("bfloat16", "float16"):
        dp = np.abs(np.array([_p(a) for a in naive]) - np.array([_p(b) for b in ref]))
        p_med, p_max = float(np.median(dp)), float(dp.max())
    if not d_fast <= allowed:
        raise RuntimeError(
            f"{type(model).__name__}: the optimized scoring path disagrees with the model's own forward pass by "
            f"{d_fast:.3g} in log-probability on {len(sides)} pairs, more than {dtype} rounding explains "
            f"(allowed {allowed:.3g}, rule {rule}"
            + (
                f": the {ref_dtype} reference differs from the {dtype} pass by {ref_diff:.3g}"
                if rule == "reference"
                else ""
            )
            + "); this architecture needs support in gece.scoring.engine.Runner.logits"
        )
    return SelfCheck(
        pairs=len(sides),
        rule=rule,
        max_abs_diff=_sig(d_fast),
        reference_dtype=ref_dtype if ref is not None else None,
        reference_diff=_sig(ref_diff),
        allowed=_sig(allowed),
        p_diff_median=_sig(p_med),
        p_diff_max=_sig(p_max),
    )


def beside(
    runner: engine.Runner, sides: Sequence, plans: Sequence[planning.PairPlan], first: Sequence[planning.PairPlan]
) -> Beside | None:
    """The self-check of the exact CPU path, run beside the scoring instead of before it; None where it does not
    apply (then :func:`run`): elsewhere than the CPU with gece's numerics and attention, or when ``first`` (the
    first batch the scoring will yield, from ``plans``) holds fewer than the :func:`sample` of ``plans``.

    There both paths must give the same bits, and the scoring gives a pair the same bits in any batch, so the
    optimized path's side of the check is the scoring's own first batch: the sample is the shortest pair of each
    part of ``first`` (:func:`shortest_spread`: where every product must agree to the bit, any position shows a
    wrong architecture, and the naive pass's cost grows with the sample's longest sentence), its naive pass
    starts at once in a thread of its own, and :meth:`Beside.watch` compares the two when the first batch's
    scores arrive, before the caller sees them (nothing of a refused model is written). The check no
    longer scores its pairs a second time, and its naive pass overlaps the scoring instead of running before it
    beside an optimized pass of 4 pairs on one thread (a first try of 32 pairs of a 1.2B model on 2 cores:
    docs/models.md)."""
    if not (runner.exact and engine.naive_batched(runner.model)) or getattr(runner.model, "hf_device_map", None):
        return None
    if len(first) < len(sample(len(plans))):
        return None
    picked = shortest_spread(first, sides, len(sample(len(plans))))
    return Beside(runner, [sides[i] for i in picked], picked)


class Beside:
    """A self-check under way (:func:`beside`): the naive pass of the sample ``sides`` (the plans ``picked``)
    computing in the background (:class:`gece.scoring.engine.Background`); :attr:`result` is the
    :class:`SelfCheck` once :meth:`watch` has judged it."""

    def __init__(self, runner: engine.Runner, sides: Sequence, picked: list[int]):
        self.runner, self.sides, self.picked = runner, sides, picked
        self.result: SelfCheck | None = None
        self._naive = engine.Background(_naive, runner, sides, 1)

    def watch(self, results: Iterator) -> Iterator:
        """``results`` (:func:`gece.scoring.engine.score`'s stream of (scores, stats)) passed through, judged when
        its first batch arrives: a disagreement raises before that batch reaches the caller."""
        try:
            for n, res in enumerate(results):
                if n == 0:
                    by_index = {score.index: score for score in res[0]}
                    fast = [by_index[i] for i in self.picked]
                    self.result = _judge(self.runner, self.sides, fast, self._naive.result())
                yield res
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()
