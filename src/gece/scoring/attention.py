"""``gece_exact``: attention whose result is the same bits on every CPU and in every batch layout.

A token's attention output must not depend on what else is in its forward pass: the optimized
path packs many pairs' tokens into rows (:mod:`gece.scoring.packing`; each token sees only its ancestors), the naive
path feeds one sentence alone, and out-of-memory halving or another batch size moves a token to
another row and column. Stock attention (eager or SDPA) sums each softmax row with vectorized code
whose grouping depends on the row's length and on where the visible keys sit in it, so the same
token's hidden state differs in its last bits between layouts. This implementation computes, per
query token,

    s_j  = round_f32(q . k_j)                 for the keys j it may see   (:func:`exact.matmul`; the
                                              others are never read, so never checked)
    w_j  = s_j * scale  (float64, soft-capped with :func:`exact.tanh` if the model caps)
    a    = softmax(w)   over a row of fixed length holding the visible keys in order, then
                        padding (-inf): the same row, so the same bits, in every layout
    out  = round_f32(sum_j round_f32(a_j) v_j)                             (:func:`exact.matmul`)

The two products are correctly rounded (their masked terms are exact zeros, so the layout cannot
change them either), and the softmax runs in float64 on torch's portable kernels (see
:mod:`gece.scoring.exact`). The result is at least as close to exact arithmetic as float32
attention. Attention is a small part of the work for sentence-length inputs; the projections and
MLPs dominate.

On a GPU (any device outside :data:`gece.scoring.exact.EXACT_DEVICES`) the products are torch's
float32 kernels, not correctly rounded, so where a visible key sits in the row would change how
the second product groups its terms (a tensor-core or split-K product sums blocks of keys). There
the second product reads canonical rows too: each query's visible values are gathered in order
into a row of the same fixed length,

    out  = sum_i a_(j_i) v_(j_i)   over the canonical row i = 0..n-1  (one batched float32 product)

so a query's output depends on its own keys and values and on the shapes of the product only,
which the engine fixes (forward passes of a fixed shape: :mod:`gece.scoring.packing`). The gathered
values take ``tokens x heads_kv x n x head_dim`` float32 per layer (1.1 GB for a pass of 2,048 tokens
of the Llama-3.1-8B shape, n = 128), freed after the layer.

Registered with transformers' attention and mask interfaces under the name ``gece_exact``
(masks in the eager, additive format); ``ModelSpec.attention`` selects it (the default) or a
stock implementation.
"""

from __future__ import annotations

import threading
from typing import Any

from gece.scoring import exact

NAME = "gece_exact"
ROW = 128  # the softmax row length: a query seeing more keys uses the next multiple of it


def _visible(attention_mask, t: int, s: int, device=None):
    """(B, 1|H, T, S) boolean: which keys each query may see (a causal mask when none is given)."""
    import torch

    if attention_mask is None:
        return torch.ones(t, s, dtype=torch.bool, device=device).tril(s - t)[None, None]
    m = attention_mask[..., :s]
    return m if m.dtype == torch.bool else m == 0


def _layout(visible, b: int, t: int, s: int) -> list:
    """Where each query's canonical row takes its keys from: per row length n, (n, k, take, keep) with
    ``take`` (B, 1|H, T, k) the visible keys' columns in order and ``keep`` (B, 1|H, T, n) the row
    entries that hold one (for the queries whose row is n long)."""
    import torch

    vis = visible.expand(b, visible.shape[1], t, s)
    count = vis.sum(dim=-1)  # (B, 1|H, T): keys each query sees
    order = torch.sort((~vis).to(torch.uint8), dim=-1, stable=True).indices  # visible keys first, in order
    length = ((count + ROW - 1) // ROW).clamp_min(1) * ROW
    out = []
    for n in torch.unique(length).tolist():
        k = min(n, s)
        out.append(
            (n, k, order[..., :k], (torch.arange(n, device=count.device) < count[..., None]) & (length == n)[..., None])
        )
    return out


class _Mask:
    """What every layer of a forward pass derives from one attention mask: the canonical rows'
    layout (:func:`_layout`) and the visible (query, key) entries of the grouped score products."""

    def __init__(self, attention_mask, b: int, hq: int, hkv: int, t: int, s: int, device):
        visible = _visible(attention_mask, t, s, device)
        self.layout = _layout(visible, b, t, s)
        self.keep = None
        if device is None or exact.rounded(device):  # (p, i, j) of the (b hkv, g t, s) scores: query heads
            grouped = visible.expand(b, hq, t, s).reshape(b * hkv, (hq // hkv) * t, s)  # sharing a key head
            self.keep = tuple(x.numpy() for x in grouped.nonzero(as_tuple=True))


_MASKS_KEPT = 4  # masks kept per thread; models with sliding-window layers alternate between two
_MASKS = threading.local()  # .kept: (id of the mask object, shapes) -> (the mask object, its _Mask), shared by the
# layers of a forward pass; one dict per thread, since engine.score runs forward passes in several at once


def _mask(attention_mask, b: int, hq: int, hkv: int, t: int, s: int, device) -> _Mask:
    key = (id(attention_mask), b, hq, hkv, t, s)
    kept = _MASKS.__dict__.setdefault("kept", {})
    hit = kept.get(key)
    if hit is None or hit[0] is not attention_mask:
        if len(kept) >= _MASKS_KEPT:
            kept.clear()
        hit = kept[key] = (attention_mask, _Mask(attention_mask, b, hq, hkv, t, s, device))
    return hit[1]


def _row_probs(w, n: int, k: int, take, keep):
    """The softmax of the queries whose canonical row is ``n`` long (one entry of :func:`_layout`): each
    query's visible keys gathered in order from w (B, H, T, S), then -inf up to ``n`` (a query's row length
    depends on its own key count only). Returns (B, H, T, k), the probabilities of the row's first k entries,
    zeros for the queries of other row lengths (whose rows here are NaN)."""
    import torch

    b, h, t, _ = w.shape
    rows = torch.gather(w, -1, take.expand(b, h, t, k))
    if n > k:
        rows = torch.nn.functional.pad(rows, (0, n - k), value=float("-inf"))
    probs = torch.softmax(rows.masked_fill(~keep, float("-inf")), dim=-1)[..., :k]
    return torch.where(keep[..., :k], probs, 0.0)


def _canonical_softmax(w, layout):
    """softmax over each query's visible keys, computed on rows laid out the same in every batch
    (:func:`_row_probs`) and put back where the keys sit. Returns w's shape, with zeros where a key is not
    visible."""
    import torch

    b, h, t, _ = w.shape
    out = torch.zeros_like(w)
    for n, k, take, keep in layout:
        out.scatter_add_(-1, take.expand(b, h, t, k), _row_probs(w, n, k, take, keep))
    return out


def _canonical_output(w, value, layout):
    """Attention's output on a device without correctly rounded products: softmax over each query's canonical
    row (:func:`_row_probs`), then the weighted sum of the values gathered into the same row, as one batched
    product of a shape set by the pass. w (B, H, T, S) float64 scores, value (B, Hkv, S, d) float32.
    Returns (B, H, T, d) float32."""
    import torch

    b, h, t, _ = w.shape
    hkv, s, d = value.shape[1:]
    g = h // hkv
    out = torch.zeros((b, h, t, d), dtype=torch.float32, device=w.device)
    for n, k, take, keep in layout:
        probs = _row_probs(w, n, k, take, keep).float()  # (B, H, T, k)
        if take.shape[1] == 1:  # every head sees the same keys: gather each key/value head once
            idx = take.expand(b, hkv, t, k)[..., None].expand(b, hkv, t, k, d)
            vals = torch.gather(value[:, :, None].expand(b, hkv, t, s, d), 3, idx)  # (B, Hkv, T, k, d)
            grouped = probs.reshape(b, hkv, g, t, k).transpose(2, 3)  # (B, Hkv, T, g, k)
            res = torch.matmul(grouped, vals).transpose(2, 3).reshape(b, h, t, d)
        else:  # a mask per head
            idx = take.expand(b, h, t, k)[..., None].expand(b, h, t, k, d)
            per_head = value.repeat_interleave(g, dim=1)[:, :, None].expand(b, h, t, s, d)
            res = torch.matmul(probs[..., None, :], torch.gather(per_head, 3, idx))[..., 0, :]
        out = torch.where(keep[..., :1], res, out)  # the queries of this row length
    return out


def exact_attention(
    module: Any,
    query,
    key,
    value,
    attention_mask,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Attention for one layer. query (B, Hq, T, d), key/value (B, Hkv, S, d), mask (B, 1, T, S),
    additive or boolean (True: attend)."""
    if scaling is None:
        scaling = module.head_dim**-0.5
    b, hq, t, d = query.shape
    hkv, s = key.shape[1], key.shape[2]
    g = hq // hkv  # query heads per key/value head (grouped-query attention), without copying K and V
    mask = _mask(attention_mask, b, hq, hkv, t, s, query.device)
    q = query.float().reshape(b, hkv, g * t, d)
    scores = exact.matmul(q, key.float().transpose(2, 3), keep=mask.keep).reshape(b, hq, t, s)
    w = scores.double() * scaling
    if softcap is not None:
        w = exact.tanh(w / softcap) * softcap
    if exact.rounded(query.device):
        probs = _canonical_softmax(w, mask.layout).float()
        out = exact.matmul(probs.reshape(b, hkv, g * t, s), value.float()).reshape(b, hq, t, d)
    else:
        out = _canonical_output(w, value.float(), mask.layout)
    return out.to(query.dtype).transpose(1, 2).contiguous(), None


def register() -> str:
    """Register ``gece_exact`` with transformers (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(NAME, exact_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    return NAME
