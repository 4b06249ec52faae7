"""A registry entry that lm-evaluation-harness scores (:class:`HarnessSpec`, docs/lmeval.md "One entry").

``engine: lm-eval`` says who scores the model: lm-evaluation-harness (``lm_eval``, run by the ``lmeval`` stage,
:mod:`gece.lmeval.stage`) instead of gece's own engine. Its settings are the ``harness:`` block
(:class:`Harness`), named after lm_eval's own flags: ``model`` (lm_eval's ``--model``: ``hf``, ``vllm`` or
``local-completions``), ``model_args``, ``batch_size``, ``device`` and the ``launcher`` that starts it. Three
names that look alike mean different things:

- ``engine: lm-eval``: a model that lm-eval scores inside the pipeline (this module);
- ``source: lmeval:<directory>``: lm-eval samples produced elsewhere and imported (:mod:`gece.lmeval.samples`);
- ``backend: transformers|vllm``: how gece's own engine runs a model (:class:`gece.io.settings.model_entry.ModelSpec`).

The source is any source gece reads (a directory, a hub id, a ``.gguf`` or ``package:`` GGUF, whose converted
directory lm-eval loads). gece's own engine settings mean nothing to lm-eval and are refused by name
(:data:`GECE_ONLY`). ``model_args`` pass an allow-list of keys per backend (:data:`ALLOWED_ARGS`), and a value
may not hold ``,`` or ``=`` (lm-eval splits its ``--model_args`` text on them): an entry cannot smuggle in
``trust_remote_code`` or another argument. gece writes ``pretrained`` (or the API's ``tokenizer``) and
``add_bos_token`` itself (:data:`GECE_ARGS`).

Kept apart from :mod:`gece.io.settings.model_entry`, which is part of the code that determines a token file's bytes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from gece.io.schemas.schema_base import Section
from gece.io.settings.ids import Id
from gece.io.settings.model_entry import LMEVAL_PREFIX, REFERENCE_PREFIX

ENGINE = "lm-eval"  # registry.<m>.engine of a model lm-eval scores
Backend = Literal["hf", "vllm", "local-completions"]

# gece's own engine settings, refused beside engine: lm-eval (with what to write instead)
GECE_ONLY = {
    "backend": "lm-eval's backend is harness.model (hf, vllm, local-completions)",
    "device": "lm-eval's device is harness.device (hf), or its launcher and model_args (vllm)",
    "attention": "lm-eval runs transformers' stock attention; gece's exact attention is gece's engine only",
    "tensor_parallel": "vLLM's is harness.model_args.tensor_parallel_size",
    "dtype": "lm-eval's dtype is harness.model_args.dtype",
    "max_memory": "lm-eval's HF backend takes harness.model_args.max_memory_per_gpu",
}

# the model_args keys an entry may set, per backend (lm-eval 0.4's own keyword arguments)
ALLOWED_ARGS: dict[str, tuple[str, ...]] = {
    "hf": ("dtype", "max_length", "parallelize", "max_memory_per_gpu", "max_cpu_memory", "max_batch_size"),
    "vllm": (
        "dtype",
        "tensor_parallel_size",
        "data_parallel_size",
        "gpu_memory_utilization",
        "max_model_len",
        "max_length",
        "enforce_eager",
    ),
    "local-completions": ("model", "base_url", "tokenizer_backend", "num_concurrent", "max_retries", "max_length"),
}

REMOTE_CODE = "trust_remote_code"  # refused in model_args: gece never runs a model's own code

# the model_args gece writes: the model directory it gated, and the BOS option of the export
GECE_ARGS = ("pretrained", "tokenizer", "add_bos_token")

ArgValue = str | int | float | bool


def arg_text(value: ArgValue) -> str:
    """A model argument's value as lm-eval's ``--model_args`` text holds it."""
    return str(value)


def _launcher(value: list[str]) -> list[str]:
    if any(not word or "\0" in word for word in value):
        raise ValueError("launcher: every word is a non-empty argument (the launcher runs as a list, no shell)")
    return value


class Harness(Section):
    """``registry.<m>.harness``: how lm_eval runs the model (its flags' names)."""

    model: Backend
    model_args: dict[str, ArgValue] = Field(default_factory=dict)
    batch_size: int | Literal["auto"] = Field(1, description="lm_eval's --batch_size: a number or auto")
    device: str | None = Field(None, pattern=r"^(cpu|mps|cuda(:\d+)?)$", description="lm_eval's --device (hf)")
    launcher: Annotated[list[str], AfterValidator(_launcher)] = Field(
        default_factory=lambda: ["lm_eval"],
        min_length=1,
        description="the argument list that starts lm-eval, e.g. [accelerate, launch, -m, lm_eval]",
    )

    @model_validator(mode="after")
    def _arguments(self) -> Harness:
        allowed = ALLOWED_ARGS[self.model]
        for key, value in self.model_args.items():
            if key == REMOTE_CODE:
                raise ValueError(f"model_args.{REMOTE_CODE} is refused: gece never runs a model's own code")
            if key in GECE_ARGS:
                raise ValueError(
                    f"model_args.{key}: gece writes it (the model directory it checked, and the BOS option of "
                    "the export, docs/lmeval.md); remove it"
                )
            if key not in allowed:
                raise ValueError(
                    f"model_args.{key}: not an argument of lm-eval's {self.model} backend that gece "
                    f"passes (allowed: {', '.join(allowed)})"
                )
            text = arg_text(value)
            if any(c in text for c in ",=") or not text.strip() or not text.isprintable():
                raise ValueError(
                    f"model_args.{key}: {text!r} holds ',' or '=' or is empty: lm-eval splits --model_args on "
                    "them, so a value would add arguments"
                )
        if self.device is not None and self.model != "hf":
            raise ValueError(
                f"device: lm_eval's --device is for the hf backend; {self.model} places the model itself (model_args)"
            )
        return self


class HarnessSpec(Section):
    """A registry entry with ``engine: lm-eval``: a model gece gates and lm-eval scores (module docstring)."""

    source: str = Field(min_length=1)
    engine: Literal["lm-eval"]
    harness: Harness
    gguf_file: str | None = None
    revision: str | None = None
    special_tokens: bool = True
    limit: int | None = Field(None, ge=1, description="only the first N pairs of each benchmark")
    checked_against: Id | None = Field(
        None, description="a run of the same model to report this run against (docs/lmeval.md, 'Engine agreement')"
    )

    @property
    def reference(self) -> None:
        """No released scores: lm-eval scores this model (as :attr:`ModelSpec.reference`)."""
        return None

    @model_validator(mode="before")
    @classmethod
    def _gece_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key in GECE_ONLY:
                    raise ValueError(
                        f"{key}: a setting of gece's own engine, which means nothing to engine: {ENGINE}; "
                        f"{GECE_ONLY[key]} (docs/lmeval.md); remove it"
                    )
        return data

    @model_validator(mode="after")
    def _a_model(self) -> HarnessSpec:
        if self.source.startswith((LMEVAL_PREFIX, REFERENCE_PREFIX)):
            raise ValueError(
                f"source {self.source!r} holds scores, not a model lm-eval can load: engine: {ENGINE} takes any "
                "source gece scores (a directory, a hub id, a .gguf or package:)"
            )
        return self


def is_harness(spec: object) -> bool:
    """Whether a registry entry is scored by lm-eval (``engine: lm-eval``)."""
    return isinstance(spec, HarnessSpec)


def entry_kind(value: Any) -> str:
    """The schema of a registry entry as written: :class:`HarnessSpec` when it names an ``engine`` or a
    ``harness`` block, else gece's :class:`~gece.io.settings.model_entry.ModelSpec`."""
    if isinstance(value, dict) and ("engine" in value or "harness" in value):
        return "HarnessSpec"
    if isinstance(value, HarnessSpec):
        return "HarnessSpec"
    return "ModelSpec"
