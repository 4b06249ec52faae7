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

``prompt`` names a prompt of params.yaml's ``prompts`` (:mod:`gece.io.settings.prompts`): gece passes it to lm-eval
as ``--apply_chat_template`` and ``--system_instruction`` (:func:`check_prompt` says which prompts lm-eval can
express; docs/lmeval.md "Prompts"). Those flags, and lm-eval's ``--fewshot_as_multiturn``, are never a launcher's
(:data:`PROMPT_FLAGS`).

Kept apart from :mod:`gece.io.settings.model_entry`, which is part of the code that determines a token file's bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from gece.io.schemas.schema_base import Section
from gece.io.settings.ids import Id
from gece.io.settings.model_entry import LMEVAL_PREFIX, MEMORY_SIZE, REFERENCE_PREFIX, ModelSpec
from gece.io.settings.prompts import BASELINE, PromptName, PromptSpec

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

COUNT = ("a whole number of 1 or more", lambda v: type(v) is int and 1 <= v <= 1 << 31)
SIZE = ("a size such as 70GiB, or a whole number of GiB", lambda v: COUNT[1](v) or bool(MEMORY_SIZE.fullmatch(str(v))))
FLAG = ("true or false", lambda v: type(v) is bool)
# what each model_args value must be (lm-eval reads them as these types; anything else it would misread)
ARG_VALUES: dict[str, tuple[str, Any]] = {
    "dtype": ("auto, float32, float16, bfloat16", lambda v: v in ("auto", "float32", "float16", "bfloat16")),
    "max_length": COUNT,
    "parallelize": FLAG,
    "max_memory_per_gpu": SIZE,
    "max_cpu_memory": SIZE,
    "max_batch_size": COUNT,
    "tensor_parallel_size": COUNT,
    "data_parallel_size": COUNT,
    "gpu_memory_utilization": ("a number above 0, at most 1", lambda v: type(v) in (int, float) and 0 < v <= 1),
    "max_model_len": COUNT,
    "enforce_eager": FLAG,
    "model": ("a name", lambda v: isinstance(v, str)),
    "base_url": (
        "an http:// or https:// address",
        lambda v: isinstance(v, str) and v.startswith(("http://", "https://")),
    ),
    "tokenizer_backend": ("huggingface or tiktoken", lambda v: v in ("huggingface", "tiktoken")),
    "num_concurrent": COUNT,
    "max_retries": ("a whole number of 0 or more", lambda v: type(v) is int and 0 <= v <= 1000),
}

# the model_args gece writes: the model directory it gated, and the BOS option of the export
GECE_ARGS = ("pretrained", "tokenizer", "add_bos_token")

ArgValue = str | int | float | bool


def arg_text(value: ArgValue) -> str:
    """A model argument's value as lm-eval's ``--model_args`` text holds it."""
    return str(value)


PYTHON = re.compile(r"python(3(\.\d+)?)?")  # a Python interpreter's program name
# accelerate launch's own options a launcher may give (each with its value), and its flags
ACCELERATE = {
    "--num_processes": re.compile(r"[1-9]\d{0,3}"),
    "--num_machines": re.compile(r"[1-9]\d{0,3}"),
    "--machine_rank": re.compile(r"\d{1,4}"),
    "--main_process_port": re.compile(r"[1-9]\d{0,4}"),
    "--gpu_ids": re.compile(r"all|\d{1,3}(,\d{1,3})*"),
    "--mixed_precision": re.compile(r"no|fp16|bf16"),
}
ACCELERATE_FLAGS = ("--multi_gpu", "--cpu")
# lm-eval's prompt formatting flags: gece writes the first two from the entry's prompt, and never the third
PROMPT_FLAGS = ("--apply_chat_template", "--system_instruction", "--fewshot_as_multiturn")
SHAPES = (
    "[lm_eval], [<path>/lm_eval] (another environment's), [python, -m, lm_eval] or "
    f"[accelerate, launch, <its options: {', '.join([*ACCELERATE, *ACCELERATE_FLAGS])}>, -m, lm_eval]"
)


def _launcher(words: list[str]) -> list[str]:
    """One of :data:`SHAPES`, checked word by word: lm-eval's parser takes option prefixes and ``--opt=value``, so
    a launcher may carry no word lm-eval would read (``--trust_remote_code``), only the program that starts it."""
    if any(not word or "\0" in word for word in words):
        raise ValueError("launcher: every word is a non-empty argument (the launcher runs as a list, no shell)")
    for word in words:
        option = word.split("=", 1)[0]
        if len(option) > 2 and any(flag.startswith(option) for flag in PROMPT_FLAGS):  # lm-eval takes prefixes
            raise ValueError(
                f"launcher: {word!r} is lm-eval's prompt formatting, which gece passes itself: set the entry's "
                "prompt: to a prompt of prompts (docs/lmeval.md, Prompts), and remove it from the launcher"
            )
    names = [PurePosixPath(w).name for w in words]
    if names == ["lm_eval"] or (len(words) == 3 and PYTHON.fullmatch(names[0]) and words[1:] == ["-m", "lm_eval"]):
        return words
    if len(words) >= 4 and names[0] == "accelerate" and words[1] == "launch" and words[-2:] == ["-m", "lm_eval"]:
        rest = iter(words[2:-2])
        for word in rest:
            if word in ACCELERATE_FLAGS:
                continue
            if word not in ACCELERATE:
                raise ValueError(f"launcher: {word!r} is not an option of accelerate launch gece passes ({SHAPES})")
            value = next(rest, "")
            if not ACCELERATE[word].fullmatch(value):
                raise ValueError(f"launcher: {word} {value!r}: not a value of {word} ({ACCELERATE[word].pattern})")
        return words
    raise ValueError(f"launcher {words}: not a shape gece runs; a launcher is {SHAPES}")


def _batch_size(value: int | str) -> int | str:
    if value != "auto" and not 1 <= int(value) <= 1 << 20:
        raise ValueError(f"{value} is not a batch size: a whole number of 1 or more (at most 1048576), or auto")
    return value


class Harness(Section):
    """``registry.<m>.harness``: how lm_eval runs the model (its flags' names)."""

    model: Backend
    model_args: dict[str, ArgValue] = Field(default_factory=dict)
    batch_size: Annotated[int | Literal["auto"], AfterValidator(_batch_size)] = Field(
        1, description="lm_eval's --batch_size: a number of 1 or more, or auto"
    )
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
            kind, fits = ARG_VALUES[key]
            if not fits(value):
                raise ValueError(f"model_args.{key}: {value!r} is not {kind}")
        if self.device is not None and self.model != "hf":
            raise ValueError(
                f"device: lm_eval's --device is for the hf backend; {self.model} places the model itself (model_args)"
            )
        return self


# gguf_file as gece's own entries check it (a plain file name inside the source directory or package)
PlainFileName = Annotated[str | None, *ModelSpec.model_fields["gguf_file"].metadata]


class HarnessSpec(Section):
    """A registry entry with ``engine: lm-eval``: a model gece gates and lm-eval scores (module docstring)."""

    source: str = Field(min_length=1)
    engine: Literal["lm-eval"]
    harness: Harness
    gguf_file: PlainFileName = None
    revision: str | None = None
    special_tokens: bool = True
    limit: int | None = Field(None, ge=1, description="only the first N pairs of each benchmark")
    checked_against: Id | None = Field(
        None, description="a run of the same model to report this run against (docs/lmeval.md, 'Engine agreement')"
    )
    prompt: PromptName | None = Field(
        None, description="a prompt of prompts, passed as lm-eval's chat flags (docs/lmeval.md, 'Prompts'); none: bare"
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


def check_prompt(model: str, entry: HarnessSpec, prompts: Mapping[str, PromptSpec]) -> PromptSpec | None:
    """The prompt registry entry ``model`` is scored under (None: none set, the bare sentence), or a ValueError
    naming ``registry.<model>.prompt``: a name not under ``prompts``; a prompt lm-eval's flags cannot express for
    gece's tasks (a template with text around ``{sentence}``: lm-eval's ``--apply_chat_template`` and
    ``--system_instruction`` wrap the exported context, they add no text to it); a chat prompt on an API backend
    that would not render the chat template with the model's tokenizer (``tokenizer_backend: huggingface``)."""
    name, key = entry.prompt, f"registry.{model}.prompt"
    if name is None:
        return None
    if name not in prompts:
        raise ValueError(f"{key} names {name!r}, which is not under prompts ({', '.join(prompts)}); name one")
    spec = prompts[name]
    if spec.parts[::2] != ("", ""):
        raise ValueError(
            f"{key}: prompt {name!r} has template {spec.template!r}, which lm-eval cannot pass: its flags add a chat "
            "template (chat: true) and a system message (system), no text around the sentence in gece's exported "
            "tasks; use a prompt whose template is {sentence}, or gece's own engine (docs/lmeval.md, Prompts)"
        )
    backend = entry.harness.model_args.get("tokenizer_backend")
    if spec.chat and entry.harness.model == "local-completions" and backend != "huggingface":
        raise ValueError(
            f"{key}: prompt {name!r} is a chat prompt, which lm-eval's local-completions backend renders with the "
            "model's own tokenizer only with model_args.tokenizer_backend: huggingface (else it sends the messages "
            f"as JSON text); set it, or use prompt {BASELINE}"
        )
    return spec


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
