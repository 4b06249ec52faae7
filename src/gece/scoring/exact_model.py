"""A transformers model routed through :mod:`gece.scoring.exact`: the numerics that depend on the CPU
replaced by ones that give the same bits on every x86-64 CPU, the weights kept in their stored dtype.

:func:`make_exact` patches a loaded CPU model in place:

- every ``nn.Linear`` (the LM head included) computes a correctly rounded product
  (:func:`gece.scoring.exact.matmul_weights`), sibling layers that read one input (:data:`FUSED`) in one
  :class:`gece.scoring.exact.Product`;
- a model stored in bfloat16 or float16 computes in float32, its linear and embedding weights left in
  their dtype (:func:`compute_in_float32`; exact, since every such value is a float32 value);
- rotary embeddings with fixed frequencies compute cos/sin with :func:`gece.scoring.exact.rope_tables`;
- logit soft-capping uses :func:`gece.scoring.exact.tanh`.

:func:`portable_kernels` says whether torch runs its portable CPU kernels (``ATEN_CPU_CAPABILITY=default``),
which the rest of the model's elementwise steps rely on (docs/numerics.md).
"""

from __future__ import annotations

from typing import Any

from gece.scoring.exact import Product, rope_tables, tanh

FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # sibling layers that read one input


def cpu_kernels() -> str:
    """The instruction set of the CPU kernels torch runs ("DEFAULT": the portable ones)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def portable_kernels() -> bool:
    """True when torch runs its portable CPU kernels (``ATEN_CPU_CAPABILITY=default`` took effect)."""
    return cpu_kernels() == "DEFAULT"


STATIC_ROPE = {None, "default", "linear", "llama3", "yarn", "proportional"}  # frequencies fixed at load


def _rope_forward(module: Any):
    def forward(x, position_ids, layer_type=None, **kwargs):
        prefix = f"{layer_type}_" if layer_type else ""
        inv_freq = getattr(module, f"{prefix}inv_freq")
        scaling = getattr(module, f"{prefix}attention_scaling", getattr(module, "attention_scaling", 1.0))
        return rope_tables(position_ids, inv_freq, float(scaling), x.dtype)

    return forward


def _rope_types(module: Any) -> set:
    kind = getattr(module, "rope_type", None)
    return set(kind.values()) if isinstance(kind, dict) else {kind}


def _exact_tanh_mode():
    """A torch function mode in which ``torch.tanh`` and ``Tensor.tanh`` are :func:`tanh` (for the
    model's own logit soft-capping, which calls them)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ExactTanh(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.tanh, torch.Tensor.tanh) and not kwargs and len(args) == 1:
                return tanh(args[0]).to(args[0].dtype)
            return func(*args, **(kwargs or {}))

    return ExactTanh()


def _float32_embedding(module: Any):
    """An embedding's forward that looks its rows up in their stored dtype and returns them in float32
    (exact), times the embedding's ``embed_scale`` in float32 where it has one (Gemma's scaled embedding),
    as the model loaded in float32 computes it."""
    import torch

    def forward(input_ids):
        out = torch.nn.functional.embedding(input_ids, module.weight, module.padding_idx).float()
        scale = getattr(module, "embed_scale", None)
        return out if scale is None else out * scale.float()

    return forward


def compute_in_float32(model: Any) -> None:
    """Make a model whose weights are stored in bfloat16 or float16 compute in float32, as if it had been
    loaded in float32, while its linear and embedding weights (all but a few MB) stay in their dtype: every
    other parameter and buffer (norms, biases, scales) becomes float32 (exact: the values are float32
    values), the embeddings return float32 rows, and the linear layers' products read their stored weights
    (:func:`make_exact`). Buffers computed at construction (RoPE frequencies, embedding scales) must be
    the float32 model's, not rounded to the stored dtype: :func:`gece.scoring.models.load` restores them."""
    import torch

    kept = set()
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear | torch.nn.Embedding):
            kept.add(id(mod.weight))
            if isinstance(mod, torch.nn.Embedding) and mod.weight.dtype != torch.float32:
                mod.forward = _float32_embedding(mod)
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            if id(t) not in kept and t.is_floating_point() and t.dtype != torch.float32:
                t.data = t.data.float()


def _weight_of(module: Any):
    """A layer's current weight, read at each call (accelerate may swap it in and out)."""
    return lambda: module.weight


def _forward_of(prod: Product, part: int, module: Any):
    """A linear layer's forward through its share of a :class:`Product`."""
    return lambda x: prod(x, part, module.bias)


def make_exact(model: Any) -> Any:
    """Route a CPU model's CPU-dependent numerics through this module (idempotent):

    - every ``nn.Linear`` (the LM head included) computes its product with :func:`matmul_weights`,
      siblings that read one input (:data:`FUSED`) in one :class:`Product`. The weights stay as they
      are, in their stored dtype, and are upcast to float64 a block of rows at a time during the
      product (:class:`Weights`), so the model takes its checkpoint's size;
    - a model stored in bfloat16 or float16 computes in float32 (:func:`compute_in_float32`);
    - every rotary embedding with fixed frequencies computes cos/sin with :func:`rope_tables`;
    - a model that soft-caps its logits does it with :func:`tanh`.

    Attention is :mod:`gece.scoring.attention`'s when the model was loaded with ``attention:
    exact``. Raises ValueError for a rotary embedding whose frequencies change with the input
    (dynamic or LongRoPE scaling), which would need its own port.
    """
    import torch

    if getattr(model, "_gece_exact", False):
        return model
    for name, mod in model.named_modules():  # refuse before changing anything
        if hasattr(mod, "inv_freq") or any(n.endswith("inv_freq") for n, _ in mod.named_buffers(recurse=False)):
            if not _rope_types(mod) <= STATIC_ROPE:
                raise ValueError(
                    f"{name}: rotary embedding of type {_rope_types(mod)} changes with the input; "
                    "gece's exact numerics support fixed frequencies only"
                )
            mod.forward = _rope_forward(mod)
    offloaded = any(p.device.type == "meta" for p in model.parameters())  # accelerate moves them in per pass
    if not offloaded and any(p.is_floating_point() and p.dtype != torch.float32 for p in model.parameters()):
        compute_in_float32(model)
    for parent in list(model.modules()):
        children = dict(parent.named_children())
        linears = {n: c for n, c in children.items() if isinstance(c, torch.nn.Linear)}
        groups = [[n for n in names if n in linears] for names in FUSED] if not offloaded else []  # one by one
        groups = [g for g in groups if len(g) > 1 and len({linears[n].in_features for n in g}) == 1]
        grouped = {n for g in groups for n in g}
        groups += [[n] for n in linears if n not in grouped]
        for g in groups:
            prod = Product([_weight_of(linears[n]) for n in g], cached=not offloaded)
            for part, n in enumerate(g):
                mod = linears[n]
                fwd = _forward_of(prod, part, mod)
                setattr(mod, "_old_forward" if hasattr(mod, "_hf_hook") else "forward", fwd)  # behind accelerate's hook
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(cfg, "final_logit_softcapping", None):
        stock = model.forward

        def forward(*args, **kwargs):
            with _exact_tanh_mode():
                return stock(*args, **kwargs)

        model.forward = forward
    model._gece_exact = True
    return model
