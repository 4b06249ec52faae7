"""The scoring engine: target words' log-probabilities under a causal LM, exactly and fast.

For a sentence with tokens x_0..x_{T-1} and a target word covering tokens x_a..x_b (found by
offset mapping: the tokens whose character span intersects the word's span),

    log P(word) = sum_{t=a..b} log softmax(z_{t-1})[x_t]        (chain rule, ``chain``)
    log P(word) = max_{t=a..b} log softmax(z_{t-1})[x_t]        (the authors' rule, ``max``)

where z_{t-1} are the logits at position t-1. The engine computes every target token's log-probability
and raw logit (:meth:`PairScore.tokens`, what extract stores); the rules from there to a side's score and
the pair's confidence p (the word rule, the side rule: the words' joint probability by default) are
:mod:`gece.stats.pair_scores`, applied by the score stage, outside the code that determines a token file.

Nothing precedes a sentence's first token, so a target there (a == 0) is predicted from a
prefix token, lm-evaluation-harness's convention (:func:`gece.scoring.planning.prefix_token`: the tokenizer's BOS,
else its EOS): when a target of either side of a pair is its sentence's first token, both
sentences of the pair are fed with the prefix token in front (:func:`gece.scoring.planning.prefix_pairs`). A
tokenizer that adds its BOS itself (special tokens on) never needs it: that BOS is the prefix.

The sentence extraction (``extraction="sentence"``, which the whole-sentence rules read; the sentence rule
is lm-evaluation-harness's crows_pairs task) is the same computation with one "word" per side covering every
token of the sentence (after the prefix token, which it always has), so a side's log-probability is the
sentence's log-likelihood ``sum_{t>=1} log P(x_t | x_<t)`` (chain rule; the sum is :func:`math.fsum` of the float64
token log-probabilities, correctly rounded). The logits are
float32 (upcast from the model's dtype); log_softmax over the full vocabulary runs on them with
float64 accumulation (:func:`log_probs`: torch's float32 log_softmax loses up to 2.6e-5 over
Gemma's 262k-token vocabulary, float64 is exact to 1e-12 for the same float32 logits); results
are stored as float64.

The optimized path computes exactly these numbers with much less work:

- Only tokens up to the last target token are fed (x_{t-1} for the largest target t): nothing
  after a pair's last target word, and not even the last target token itself.
- The two sides of a pair share every token before their first difference. That prefix is fed
  once, and when every target position lies in it (the common case: the pronoun is the first
  difference and one token long) one hidden state scores both sides, reading two entries of
  one distribution. Pairs that share a beginning with other pairs ("The developer argued with
  the designer because ...") share its computation too: a batch's sequences form a trie, packed
  into rows with a 4-D attention mask (each token sees only its ancestors) and position ids
  equal to each token's depth (:mod:`gece.scoring.packing`).
- The decoder runs without its LM head; the head (and any final logit soft-capping) is applied
  only to the hidden states at positions that predict a target token.
- Pairs are sorted by their tokens (so shared beginnings fall in one batch) and batched.
- On a GPU, where kernels' bits depend on shapes, a batch is fed in forward passes of a shape fixed
  by the code (:mod:`gece.scoring.packing`: a fixed number of rows of a fixed length) and
  the LM head runs on :data:`HEAD_ROWS` states at a time, so the batch size changes no bit there
  either (docs/numerics.md, "On GPUs").

The naive reference (:func:`score_naive`) feeds whole sentences through the model's own forward
pass and reads its own full logits (on the CPU in right-padded batches, which give each sentence its
bits alone; elsewhere each sentence alone). On the CPU, with gece's numerics (correctly rounded matrix products,
portable kernels and layout-independent attention: :mod:`gece.scoring.exact`), the two paths
agree bit for bit, and so do any batch size, thread count and x86-64 CPU.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from gece.base.errors import GeceError
from gece.scoring import exact, exact_model, heap, packing
from gece.scoring.planning import PairPlan, SideTokens

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)
THREADS_ENV = "GECE_THREADS"
ENGINE_VERSION = "4"  # bump when a change alters what the engine produces (3: fixed pass shapes on GPUs; 4: token ids)


@dataclass(frozen=True)
class SideScore:
    token_logprobs: tuple[tuple[float, ...], ...]  # per word, per token
    token_logits: tuple[tuple[float, ...], ...] | None  # the raw logits, likewise (None: the backend gives
    # log-probabilities only)

    def joint_logprob(self) -> float:
        """log P of every target token together (the chain rule over the side's tokens): what the self-check
        compares. The score stage combines a side's tokens by the word and side rules
        (:mod:`gece.stats.pair_scores`)."""
        return math.fsum(v for word in self.token_logprobs for v in word)

    @property
    def first_logit(self) -> float | None:
        return None if self.token_logits is None else self.token_logits[0][0]

    @property
    def n_tokens(self) -> int:
        return sum(len(w) for w in self.token_logprobs)


@dataclass(frozen=True)
class PairScore:
    index: int
    more: SideScore
    less: SideScore

    def tokens(self) -> dict[str, Any]:
        """The pair's columns of a token file (:class:`gece.io.schemas.tokens.TokenRow`)."""
        return {
            "logprobs_more": self.more.token_logprobs,
            "logprobs_less": self.less.token_logprobs,
            "logits_more": self.more.token_logits,
            "logits_less": self.less.token_logits,
        }


def log_probs(logits):
    """log_softmax(z) of float32 logits, accumulated in float64 (rows over the whole vocabulary)."""
    return logits.double().log_softmax(dim=-1)


SOFTMAX_ROWS = 8  # rows of float64 log-softmax at a time where rows are computed apart (a CPU with gece's numerics)


def log_probs_at(logits, r: np.ndarray, tok: np.ndarray, apart: bool) -> np.ndarray:
    """:func:`log_probs` of ``logits`` (N, V) at the (row ``r``, token ``tok``) pairs, as float64.

    ``apart`` (a CPU with gece's numerics): the float64 log-softmax runs on the asked rows only,
    :data:`SOFTMAX_ROWS` at a time. Each row's log-softmax is computed from that row alone (torch's CPU
    kernel reduces each row on its own), so this changes no bit (tested), and the float64 arrays are
    (SOFTMAX_ROWS, V) instead of (N, V): for a 262,144-word vocabulary, 17 MB against 134 MB each at
    N = :data:`HEAD_ROWS`, two of them per scoring thread. Otherwise (a GPU) over all of ``logits`` at once,
    as the GPU path always has."""
    if not apart:
        return log_probs(logits).cpu().numpy()[r, tok]
    out = np.empty(len(r))
    want = np.unique(r)
    for s in range(0, len(want), SOFTMAX_ROWS):
        rows = want[s : s + SOFTMAX_ROWS]
        lp = log_probs(logits[rows.tolist()]).numpy()
        at = np.isin(r, rows)
        out[at] = lp[np.searchsorted(rows, r[at]), tok[at]]
    return out


# ------------------------------------------------------------------------- the model
def set_threads(n: int | None = None) -> int:
    """Use all the CPU cores this process may run on (or ``$GECE_THREADS``) for torch."""
    import torch

    if n is None:
        env = os.environ.get(THREADS_ENV)
        n = int(env) if env else len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = max(1, int(n or 1))
    torch.set_num_threads(n)
    return n


def execution_device(module: Any):
    """Where a module computes: its weights' device, or, for weights accelerate offloaded (to the
    CPU or disk, ``device: multi``), the device its hook moves them to."""
    hook = getattr(module, "_hf_hook", None)
    device = getattr(hook, "execution_device", None)
    if device is not None:
        import torch

        return torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    return module.weight.device


class Runner:
    """A causal LM split into its decoder and its head, so the head runs only where needed."""

    def __init__(self, model: Any, pad_id: int | None = None):
        import torch

        self.torch = torch
        self.model = model
        self.decoder = model.get_decoder()
        self.head = model.get_output_embeddings()
        if self.decoder is model or self.head is None:
            raise GeceError(
                f"{type(model).__name__}: cannot separate the decoder from the LM head",
                hint="gece supports transformers causal LMs with get_decoder() and an output embedding",
            )
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.device = execution_device(model.get_input_embeddings())
        self.exact = exact.rounded(self.device)  # gece's numerics: any layout gives the same bits
        if self.exact:
            exact_model.make_exact(model)
        # elsewhere (a GPU) every forward pass and LM-head call has a shape set by the code alone
        self.pass_rows = None if self.exact else packing.PASS_ROWS
        self.head_device = execution_device(self.head)
        self.pad_id = int(pad_id if pad_id is not None else (getattr(cfg, "pad_token_id", None) or 0))
        # sliding-window attention: layer types (Gemma-3's interleaved layers) get a mask each;
        # a model without layer types but with a window (Mistral) slides in every layer
        types = getattr(cfg, "layer_types", None) or []
        window = getattr(cfg, "sliding_window", None)
        self.window = (
            window
            if "sliding_attention" in types or (not types and window and getattr(cfg, "use_sliding_window", True))
            else None
        )
        self.mask_types = sorted(set(types)) if self.window and types else None
        self.additive_mask = getattr(model.config, "_attn_implementation", "") == "eager"
        self.cap: int | None = None  # most pairs per forward pass, set after an out-of-memory error
        # batches scored at once, one thread each (:func:`score`): on the CPU, as many as torch's threads;
        # one under accelerate (device: multi), whose hooks move a layer's weights in and out around each call
        self.workers = torch.get_num_threads() if self.exact and not getattr(model, "hf_device_map", None) else 1
        self.oom_retries = 0
        self._cap_lock = threading.Lock()  # workers that run out of memory at once halve the cap once

    def out_of_memory(self, size: int) -> None:
        """A forward pass over ``size`` pairs ran out of device memory: halve the pairs per pass
        for the rest of the run, or fail when a single pair does not fit. A pass larger than the cap already
        is retried at the cap (another worker lowered it meanwhile), not counted again."""
        with self._cap_lock:
            if self.cap is not None and size > self.cap:
                return
            self._halve(size)

    def _halve(self, size: int) -> None:
        if size <= 1:
            raise GeceError(
                "one pair does not fit in device memory"
                + (
                    f" (forward passes of {self.pass_rows} rows of {packing.ROW_TOKENS} tokens)"
                    if self.pass_rows
                    else ""
                ),
                hint="spread the model over several GPUs (device: multi, with max_memory), use dtype: bfloat16, "
                "or backend: vllm with tensor_parallel",
            )
        self.cap = size // 2
        self.oom_retries += 1
        log.warning("out of device memory with %d pairs per forward pass: retrying with %d", size, self.cap)
        if self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()

    def logits(self, hidden):
        """The model's logits for some hidden states: LM head, then soft-capping if the model has it."""
        z = self.head(hidden.to(self.head_device)).float()
        if self.softcap:  # the model's own steps, with a tanh that is the same on every CPU
            z = exact.tanh(z / self.softcap).float() * self.softcap
        return z

    def _mask(self, allowed):
        if not self.additive_mask:
            return allowed
        dtype = self.torch.float32 if self.exact else self.model.dtype  # a CPU model computes in float32
        return self.torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, self.torch.finfo(dtype).min)

    def hidden(self, packed: packing.Packed):
        """Final hidden states of the packed token forest, (rows, L, H).

        Each token attends to itself and its ancestors only (a 4-D mask) and sits at position
        ``depth``, so it computes exactly what it would at the end of its own sequence.
        """
        torch = self.torch
        ids = torch.tensor(packed.ids, dtype=torch.long)
        pos = torch.tensor(packed.positions, dtype=torch.long)
        allowed = torch.zeros((ids.shape[0], 1, ids.shape[1], ids.shape[1]), dtype=torch.bool)
        allowed[packed.mask_rows, 0, packed.mask_q, packed.mask_k] = True
        mask: Any
        sliding = allowed
        if self.window:  # keys less than `window` positions back (transformers' convention)
            sliding = allowed & ((pos[:, None, :, None] - pos[:, None, None, :]) < self.window)
        if self.mask_types:
            masks = {"full_attention": allowed, "sliding_attention": sliding}
            mask = {t: self._mask(masks.get(t, allowed)).to(self.device) for t in self.mask_types}
        else:
            mask = self._mask(sliding).to(self.device)
        out = self.decoder(
            input_ids=ids.to(self.device), attention_mask=mask, position_ids=pos.to(self.device), use_cache=False
        )
        return out.last_hidden_state


HEAD_ROWS = 64  # LM-head rows at a time: with a 262,144-word vocabulary, about 200 MB of float64 per array


def score_batch(
    runner: Runner, plans: Sequence[PairPlan], lay: packing.BatchLayout | None = None
) -> tuple[list[PairScore], packing.BatchStats]:
    """Score a batch of planned pairs under ``torch.inference_mode`` (see :func:`_score_batch`)."""
    with runner.torch.inference_mode():
        return _score_batch(runner, plans, lay or packing.lay_out(plans, runner.pad_id, runner.pass_rows))


def _score_batch(
    runner: Runner, plans: Sequence[PairPlan], lay: packing.BatchLayout
) -> tuple[list[PairScore], packing.BatchStats]:
    """Score a batch of planned pairs laid out as ``lay`` (:func:`gece.scoring.packing.lay_out`).

    Every side's fed sequence (shared prefix + its own suffix) goes into a trie, so a token
    sequence shared by both sides of a pair, or by several pairs, is fed once. The trie is
    packed into rows with a 4-D attention mask (each token sees only its ancestors) and
    position ids equal to its depth, so each token's hidden state is what the model computes
    for it at the end of its own sequence: one forward pass on the CPU, passes of fixed shapes
    on a GPU. The LM head then runs once over the unique tokens whose hidden state predicts a
    target token.
    """
    torch = runner.torch
    reads, where = lay.reads, lay.where
    states = None  # (K, H): the LM head's inputs, in the order of ``where``
    for packed, read in zip(lay.passes, lay.heads, strict=True):
        hidden = runner.hidden(packed)
        if states is None:
            states = hidden.new_empty((len(where), hidden.shape[-1]))
        if read:
            krc = torch.tensor(read, dtype=torch.long, device=hidden.device)
            states[krc[:, 0]] = hidden[krc[:, 1], krc[:, 2]]
    asked: list[tuple[int, int]] = []  # (head row, token): every target token
    for pl, (nm, nl) in zip(plans, reads, strict=True):
        for sp, nodes in ((pl.more, nm), (pl.less, nl)):
            asked.extend((where[nodes[pos]], tok) for w in sp.targets for pos, tok in w)
    lp, lg = head_values(runner, states, np.array(asked, dtype=np.int64).reshape(-1, 2))
    lp_it, lg_it = iter(lp.tolist()), iter(lg.tolist())
    out = []
    for pl in plans:
        scores = []
        for sp in (pl.more, pl.less):
            shape = [len(w) for w in sp.targets]
            scores.append(
                SideScore(
                    tuple(tuple(next(lp_it) for _ in range(k)) for k in shape),
                    tuple(tuple(next(lg_it) for _ in range(k)) for k in shape),
                )
            )
        out.append(PairScore(pl.index, scores[0], scores[1]))
    return out, lay.stats


def head_values(
    runner: Runner, states: Any, asked: np.ndarray, rows: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The log-probabilities and the logits at ``asked`` ((head row, token) pairs) of the LM head over
    ``states`` (K, H), computed ``rows`` (:data:`HEAD_ROWS`) rows at a time: the (rows, vocabulary) logits and
    their float64 log-softmax are the largest arrays of a batch, and under the sentence rule K is every
    position. Each row's values do not depend on the other rows (exact products, row-wise softmax), so the
    chunking changes no bit."""
    rows = rows or HEAD_ROWS
    lp = np.empty(len(asked))
    lg = np.empty(len(asked))
    for start in range(0, states.shape[0], rows):
        chunk = states[start : start + rows]
        if runner.pass_rows and chunk.shape[0] < rows:  # a fixed shape (see Runner.pass_rows)
            chunk = runner.torch.cat([chunk, chunk.new_zeros((rows - chunk.shape[0], chunk.shape[1]))])
        logits = runner.logits(chunk)  # (rows, V), float32
        here = np.flatnonzero((asked[:, 0] >= start) & (asked[:, 0] < start + rows))
        r, tok = asked[here, 0] - start, asked[here, 1]
        lp[here] = log_probs_at(logits, r, tok, runner.exact)
        lg[here] = logits.cpu().numpy()[r, tok]
    return lp, lg


def order_plans(plans: Sequence[PairPlan]) -> list[PairPlan]:
    """Sort for batching by the fed tokens (lexicographically), so that pairs sharing a beginning
    fall in one batch and share its computation; ties by index."""
    return sorted(plans, key=lambda p: (p.prefix + p.more.suffix, p.less.suffix, p.index))


def batches(plans: Sequence[PairPlan], batch_size: int) -> list[list[PairPlan]]:
    ordered = order_plans(plans)
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]


def score(
    runner: Runner, batch_list: Sequence[Sequence[PairPlan]], on_batch: Callable[[int], None] | None = None
) -> Iterator[tuple[list[PairScore], packing.BatchStats]]:
    """Score batches; yields each batch's scores and stats, in order.

    On the CPU, ``runner.workers`` batches are scored at once, each in its own thread with
    single-threaded torch operations (:func:`side_by_side`). A forward pass that runs out of
    device memory (a GPU) is retried with half the pairs (:meth:`Runner.out_of_memory`; the smaller
    size holds for the rest of the run). The scores do not depend on how a batch is split or on the
    threads (gece's numerics are batch-invariant), and the stats are always those of the whole batch,
    so neither the score file nor the meta depends on the memory a device had free or on its cores.
    """
    results = side_by_side(runner.workers, functools.partial(_score_fitting, runner), batch_list)
    for b, res in zip(batch_list, results, strict=True):
        heap.release_free_memory()  # a done batch's arrays, which its thread's arena would otherwise keep
        if on_batch:
            on_batch(len(b))
        yield res


def side_by_side(workers: int, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
    """``fn(item)`` for each item, in order, ``workers`` at once (where there are several items), each in its
    own thread with torch's operations on one thread (restored after; the float64 products then run in
    numpy's OpenBLAS, :func:`gece.scoring.exact.matmul`). On the CPU several small forward passes side by
    side use two cores better than one pass whose float64 products are split over both: between its
    products a pass runs elementwise kernels, attention's gathers and the checks of
    :mod:`gece.scoring.exact`, mostly in one thread, which the other pass's work then overlaps
    (smollm2-135m on 2 cores: 1.33x on 300 WinoBias pairs, 1.25x on all 771; docs/numerics.md). The
    items are submitted at once and run ahead of the caller, ``workers`` at a time."""
    if workers <= 1 or len(items) <= 1:
        yield from map(fn, items)
        return
    from concurrent.futures import ThreadPoolExecutor

    import torch

    threads = torch.get_num_threads()
    pool = ThreadPoolExecutor(workers, thread_name_prefix="gece-score")
    torch.set_num_threads(1)
    try:
        futures = [pool.submit(fn, item) for item in items]
        for fut in futures:
            yield fut.result()
    finally:
        pool.shutdown(cancel_futures=True)
        torch.set_num_threads(threads)


class Background:
    """``fn(*args)`` computed in a daemon thread; :meth:`result` waits for it and re-raises its exception. Used
    where the work releases the GIL: a model's weights files hashed while transformers loads them (7.5 s of a
    1.2B checkpoint's 18 s load on 2 cores, :func:`gece.scoring.models.load`), the self-check's naive pass beside
    the scoring (:func:`gece.scoring.selfcheck.beside`). Work the caller abandons (a load that fails, a run that
    stops) finishes on its own: a daemon thread, where :mod:`concurrent.futures`' workers are joined at exit (a
    failed load would wait for the hash of a 16 GB checkpoint before the error reaches the user)."""

    def __init__(self, fn: Any, *args: Any):
        self._out: Any = None
        self._err: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True, name="gece-background")
        self._thread.start()

    def _run(self, fn: Any, args: tuple) -> None:
        try:
            self._out = fn(*args)
        except BaseException as e:  # re-raised in the caller's thread by result()
            self._err = e

    def result(self) -> Any:
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._out


def _score_fitting(runner: Runner, plans: Sequence[PairPlan]) -> tuple[list[PairScore], packing.BatchStats]:
    """One batch in forward passes of at most ``runner.cap`` pairs (all of them while no pass has
    run out of memory), halving the cap on out-of-memory and retrying from the failed pass."""
    oom = runner.torch.OutOfMemoryError  # torch.cuda.OutOfMemoryError is the same class
    whole = packing.lay_out(plans, runner.pad_id, runner.pass_rows)  # its stats are the batch's, however split
    out: list[PairScore] = []
    i = 0
    while i < len(plans):
        chunk = plans[i : i + (runner.cap or len(plans))]
        try:
            res, _ = score_batch(runner, chunk, whole if len(chunk) == len(plans) else None)
        except oom:
            res = None  # handled outside the except block, which still holds the failed pass's tensors
        if res is None:
            runner.out_of_memory(len(chunk))
            continue
        out += res
        i += len(chunk)
    return out, whole.stats


MAX_AUTO_BATCH = 1024
CPU_BATCH = 32  # batch_size auto on the CPU: compute-bound, larger batches gain nothing


def auto_batch_size(runner: Runner, plans: Sequence[PairPlan]) -> int:
    """``batch_size: auto``: :data:`CPU_BATCH` pairs where gece's numerics apply (the CPU), else
    :data:`MAX_AUTO_BATCH` (or every pair, if fewer).

    On a GPU the memory a batch takes does not grow with its pairs: they are fed in forward passes of a
    fixed shape (:data:`gece.scoring.packing.PASS_ROWS` rows of ``ROW_TOKENS`` tokens), one at a time, and
    only the LM head's inputs (one hidden state per predicting token) are kept between passes. A larger batch shares
    more beginnings between pairs and pads its last pass less, so the largest is the fastest; nothing is probed, so the
    choice, like the scores, does not depend on the memory a device has free."""
    if runner.exact:
        return CPU_BATCH
    return max(1, min(MAX_AUTO_BATCH, len(plans)))


# ------------------------------------------------------------------ naive reference
NAIVE_ROWS = 4 * HEAD_ROWS  # padded positions per batch of the naive path (their float32 logits over the vocabulary)


def naive_batched(model: Any) -> bool:
    """True where :func:`score_naive` scores its sentences in padded batches: a CPU model with gece's numerics and
    attention, where a sentence's bits in a right-padded batch are its bits alone (correctly rounded products,
    portable kernels, attention over rows laid out the same way in every batch: :mod:`gece.scoring.exact`).
    Elsewhere (a GPU, stock attention) each sentence is fed alone, since a batch's shape changes its bits."""
    from gece.scoring import attention

    device = model.get_input_embeddings().weight.device
    return exact.rounded(device) and getattr(model.config, "_attn_implementation", None) == attention.NAME


def naive_groups(lengths: Sequence[int], rows: int | None = None) -> list[list[int]]:
    """The sentences (by index, in order) of each padded batch of the naive path: as many as fit in ``rows``
    (:data:`NAIVE_ROWS`) padded positions (a longer sentence alone)."""
    rows = rows or NAIVE_ROWS
    groups: list[list[int]] = []
    width = 0
    for i, n in enumerate(lengths):
        if groups and (len(groups[-1]) + 1) * max(width, n) <= rows:
            groups[-1].append(i)
            width = max(width, n)
        else:
            groups.append([i])
            width = n
    return groups


def score_naive(
    model: Any, sides: Sequence[tuple[SideTokens, SideTokens]], workers: int = 1, batched: bool | None = None
) -> list[PairScore]:
    """The reference path: whole sentences through the model's own forward pass, its own full logits.

    log P(x_t) = log_softmax(model(x).logits[t-1])[x_t] (:func:`log_probs`), for every target token t.

    Where gece's numerics apply (:func:`naive_batched`, the default for ``batched``) the sentences go through the
    model in right-padded batches with an attention mask (:func:`naive_groups`): one pass over the weights for
    the self-check's eight sentences instead of eight, the same bits as each sentence alone (tested). Elsewhere
    each sentence is fed alone, with no mask, as it is when a batch runs out of memory. ``workers`` batches at
    once (:func:`side_by_side`; a CPU model's :attr:`Runner.workers`).
    """
    import torch

    device = model.get_input_embeddings().weight.device
    if exact.rounded(device):
        exact_model.make_exact(model)
    if batched is None:
        batched = naive_batched(model)
    flat = [side for pair in sides for side in pair]
    groups = naive_groups([len(s.ids) for s in flat]) if batched else [[i] for i in range(len(flat))]
    try:
        batches = [[flat[i] for i in g] for g in groups]
        done = list(side_by_side(workers, functools.partial(_naive_batch, model, device), batches))
    except torch.OutOfMemoryError:
        if not batched:
            raise
        return score_naive(model, sides, workers, batched=False)  # a batch did not fit: each sentence alone
    scores = [s for batch in done for s in batch]
    return [PairScore(i, scores[2 * i], scores[2 * i + 1]) for i in range(len(sides))]


def _naive_batch(model: Any, device: Any, batch: Sequence[SideTokens]) -> list[SideScore]:
    """Some sentences through the model's own forward pass: one alone as it is, several right-padded to the
    longest with an attention mask (the padding's positions are never read)."""
    import torch

    width = max(len(side.ids) for side in batch)
    with torch.inference_mode():
        ids = torch.tensor([list(side.ids) + [0] * (width - len(side.ids)) for side in batch], device=device)
        if len(batch) == 1:
            logits = model(input_ids=ids).logits.float()
        else:
            mask = torch.tensor([[1] * len(s.ids) + [0] * (width - len(s.ids)) for s in batch], device=device)
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        apart = exact.rounded(device)
        out = []
        for b, side in enumerate(batch):
            z = logits[b, : len(side.ids)]
            t = np.array([t for w in side.words for t in w], dtype=np.int64)
            ids = np.asarray(side.ids, dtype=np.int64)
            lp = iter(log_probs_at(z, t - 1, ids[t], apart).tolist())
            words = tuple(tuple(next(lp) for _ in w) for w in side.words)
            raw = tuple(tuple(float(z[t - 1, side.ids[t]]) for t in w) for w in side.words)
            out.append(SideScore(words, raw))
    return out


# ---------------------------------------------------------------------------- costs
def non_embedding_params(model: Any) -> int:
    """Parameters used per fed token: all but the input embedding and the LM head."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    skip = {id(emb), id(head)}
    return int(sum(p.numel() for p in model.parameters() if id(p) not in skip))


def flops(model: Any, tokens_fed: int, head_positions: int) -> float:
    """Forward FLOPs, analytic: 2 N_body tokens_fed + 2 H V head_positions (attention ignored)."""
    head = model.get_output_embeddings().weight
    return 2.0 * non_embedding_params(model) * tokens_fed + 2.0 * head.shape[0] * head.shape[1] * head_positions


def non_finite(tokens: dict[str, Any]) -> list[str]:
    """The columns of a pair's token record (:meth:`PairScore.tokens`) that hold a NaN or an infinity (a
    model overflow, e.g. in float16); the token ids and texts beside them are not scores."""
    return [
        f"{k}={[list(w) for w in v]}"
        for k, v in tokens.items()
        if k.startswith(("logprobs_", "logits_")) and v is not None and not all(math.isfinite(x) for w in v for x in w)
    ]


def max_abs_diff(a: Sequence[PairScore], b: Sequence[PairScore]) -> float:
    """Largest |difference| between two scorings' token log-probabilities (same pairs, same order)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        for sx, sy in ((x.more, y.more), (x.less, y.less)):
            va = np.array([v for w in sx.token_logprobs for v in w])
            vb = np.array([v for w in sy.token_logprobs for v in w])
            d = float(np.max(np.abs(va - vb)))
            if math.isnan(d):  # max() would drop a NaN
                return math.nan
            worst = max(worst, d)
    return worst
