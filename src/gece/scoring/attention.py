"""``gece_exact``: attention whose result does not depend on how many tokens are fed.

Stock float32 attention (eager or SDPA) reduces each softmax row with vectorized code whose
grouping depends on the row length, so the hidden state of token t differs in its last bits
between a 12-token prefix and the 19-token whole sentence (or a batch padded to 25 tokens);
through 30 layers that reaches ~2e-5 in log-probability. This implementation computes the
attention core in float64,

    A = softmax(Q K^T * scale + M) V        (Q, K, V, M and A upcast to float64),

and rounds A once to the model's dtype. Float64 rounding differences (~1e-16) almost never
survive that rounding, so a token's hidden state is the same bits whatever follows it or
pads the batch (with MKL's strict reproducible mode for the float32 matrix products, see
:mod:`gece.scoring`). The result is also closer to exact arithmetic than float32 attention.
For sentence-length inputs attention is a small part of the work (the T x T scores); the
projections and MLPs, which dominate, stay in the model's dtype.

Registered with transformers' attention and mask interfaces under the name ``gece_exact``
(masks in the eager, additive format); ``ModelSpec.attention`` selects it (the default) or a
stock implementation.
"""

from __future__ import annotations

from typing import Any

NAME = "gece_exact"


def exact_attention(
    module: Any, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
    softcap: float | None = None, **kwargs: Any,
) -> tuple[Any, None]:
    """Attention for one layer. query (B, Hq, T, d), key/value (B, Hkv, S, d), mask (B, 1, T, S),
    additive or boolean (True: attend)."""
    import torch

    if scaling is None:
        scaling = module.head_dim ** -0.5
    b, hq, t, d = query.shape
    hkv, s = key.shape[1], key.shape[2]
    g = hq // hkv  # query heads per key/value head (grouped-query attention), without copying K and V
    q = query.double().reshape(b, hkv, g * t, d)
    w = torch.matmul(q, key.double().transpose(2, 3)).reshape(b, hq, t, s) * scaling
    if softcap is not None:
        w = torch.tanh(w / softcap) * softcap
    if attention_mask is not None:
        m = attention_mask[..., :s]
        w = w.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else w + m.double()
    w = torch.softmax(w, dim=-1).reshape(b, hkv, g * t, s)
    out = torch.matmul(w, value.double()).reshape(b, hq, t, d).to(query.dtype)
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Register ``gece_exact`` with transformers (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(NAME, exact_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    return NAME
