"""A model's entry of params.yaml's registry (:class:`ModelSpec`).

Kept apart from :mod:`gece.io.settings.params` (the other sections and the file's loader) because the scoring code
reads a :class:`ModelSpec`: this module is part of the code that determines a token file's bytes
(:func:`gece.scoring.extraction.scoring_code`), and an edit to another stage's settings re-scores no model.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from gece.io.schemas.schema_base import Section
from gece.io.settings.ids import ID_HELP, Id, is_id


def _plain_file_name(value: str | None) -> str | None:
    if value is not None and (not value or any(bad in value for bad in ("/", "\\", ".."))):
        raise ValueError(
            f"{value!r} is not a plain file name (no '/', '\\' or '..'): gguf_file names a "
            "file inside the source directory or package"
        )
    return value


MEMORY_DEVICE = re.compile(r"\d+|cpu|mps|disk")


MEMORY_SIZE = re.compile(r"\d+(\.\d+)?\s*([KMGT]i?B)", re.IGNORECASE)


def _memory_device(value: str) -> str:
    if not MEMORY_DEVICE.fullmatch(str(value)):
        raise ValueError(f"max_memory key {value!r} is not a device: use a GPU index ('0', '1', ...), cpu, mps or disk")
    return str(value)


def _memory_size(value: str) -> str:
    if not MEMORY_SIZE.fullmatch(str(value).strip()):
        raise ValueError(f"max_memory value {value!r} is not a size such as '70GiB' or '500MB'")
    return str(value).strip()


def memory_caps(max_memory: dict[str, str] | None) -> dict[int | str, str] | None:
    """params.yaml's ``max_memory`` as accelerate wants it: GPU indices as ints."""
    if max_memory is None:
        return None
    return {int(k) if k.isdigit() else k: v for k, v in max_memory.items()}


REFERENCE_PREFIX = "reference:"


LMEVAL_PREFIX = "lmeval:"  # a registry source: lmeval:<lm-evaluation-harness output directory> (docs/lmeval.md)


# the keys of any run, whatever its source; every other key sets how gece loads and scores a model
RUN_KEYS = frozenset({"source", "checked_against"})


class ModelSpec(Section):
    """Where a run's scores come from. ``source`` is a Hugging Face hub id, a local model directory,
    a local ``.gguf`` file, or ``package:<distribution>`` for a GGUF shipped in an installed
    Python package: a model that the extract stage scores. Or ``reference:<name>``: scores
    released by others, read from ``data/reference/<benchmark>/<name>.csv`` for every benchmark
    that has that file (the authors' runs of the paper); nothing is extracted."""

    source: str = Field(min_length=1)
    gguf_file: Annotated[str | None, AfterValidator(_plain_file_name)] = None
    revision: str | None = None
    special_tokens: bool = True
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = Field(
        "auto",
        pattern=r"^(auto|cpu|multi|mps|cuda(:\d+)?)$",
        description="auto (a GPU if visible, else cpu), cpu, cuda[:N], mps, or multi "
        "(device_map='auto': spread a model too large for one device)",
    )
    attention: Literal["exact", "sdpa", "eager"] = Field(
        "exact",
        description="exact: gece's float64-core attention, bit-identical whatever the batch "
        "(gece.scoring.attention); sdpa/eager: transformers' stock float32 kernels",
    )
    max_memory: (
        dict[
            Annotated[str, BeforeValidator(str), AfterValidator(_memory_device)],
            Annotated[str, AfterValidator(_memory_size)],
        ]
        | None
    ) = Field(
        None,
        description="device: multi only: the most memory accelerate may fill on each device, "
        "e.g. {'0': '70GiB', '1': '70GiB', cpu: '200GiB'}",
    )
    backend: Literal["transformers", "vllm"] = Field(
        "transformers",
        description="transformers: gece's exact engine; vllm: vLLM's prompt log-probabilities "
        "(CUDA GPUs with pip install 'gece[vllm]', or vLLM's CPU build with device: cpu; same output schema)",
    )
    tensor_parallel: int = Field(
        1, ge=1, description="backend vllm: workers (GPUs, or CPU processes) one model is split over"
    )
    checked_against: Id | None = Field(
        None,
        description="another run of the same model (its registry id): the compare stage reports how far this run's "
        "scores are from that run's on the pairs both score (docs/lmeval.md, 'Engine agreement')",
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="score only the first N pairs of each benchmark with this "
        "model (a cheap first try that leaves the other models' extract stages up to date); "
        "with extract.limit too, the smaller applies",
    )

    def scoring_settings(self, exclude: frozenset[str] = frozenset()) -> dict:
        """The entry as the token files' fingerprints hash it: every key but ``checked_against`` (which run to
        check this one against changes no score) and ``exclude``."""
        return self.model_dump(exclude={"checked_against", *exclude})

    @property
    def reference(self) -> str | None:
        """The ``<name>`` of a ``reference:<name>`` source, else None."""
        return self.source.removeprefix(REFERENCE_PREFIX) if self.source.startswith(REFERENCE_PREFIX) else None

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.source.startswith(LMEVAL_PREFIX):
            if not self.source.removeprefix(LMEVAL_PREFIX).strip():
                raise ValueError(
                    f"source {self.source!r}: no directory after {LMEVAL_PREFIX!r}; "
                    f"write {LMEVAL_PREFIX}<lm_eval's --output_path> (docs/lmeval.md)"
                )
            loading = sorted(self.model_fields_set - RUN_KEYS)
            if loading:
                raise ValueError(
                    f"{', '.join(loading)}: settings of a model that gece loads and scores, but source "
                    f"{self.source!r} imports lm-eval's samples (set them in lm_eval's --model_args); remove them"
                )
        if self.reference is not None:
            if not is_id(self.reference):
                raise ValueError(
                    f"source {self.source!r}: {self.reference!r} is not a valid id (the name after "
                    f"{REFERENCE_PREFIX!r} is a file name of data/reference/<benchmark>/); {ID_HELP}"
                )
            loading = sorted(self.model_fields_set - RUN_KEYS)
            if loading:
                raise ValueError(
                    f"{', '.join(loading)}: settings of a model that is loaded and scored, but source "
                    f"{self.source!r} reads released scores; remove them"
                )
        if self.max_memory is not None and self.device != "multi":
            raise ValueError(
                f"max_memory caps the devices of device: multi (device_map='auto'), but device is "
                f"{self.device!r}; set device: multi or remove max_memory"
            )
        if self.backend == "vllm":
            if self.tensor_parallel > 1 and self.device not in ("auto", "cuda", "cpu"):
                raise ValueError("tensor_parallel spreads the model over workers: use device: auto, cuda or cpu")
            if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
                raise ValueError(
                    f"backend vllm runs on CUDA GPUs (device: auto or cuda) or on vLLM's CPU build (device: cpu); "
                    f"device {self.device!r} is for the transformers backend"
                )
            if self.max_memory is not None:
                raise ValueError("max_memory is for the transformers backend; vLLM sizes its own memory")
        elif self.tensor_parallel > 1:
            raise ValueError(
                "tensor_parallel is for backend: vllm; the transformers backend spreads a model over "
                "GPUs with device: multi"
            )
        return self
