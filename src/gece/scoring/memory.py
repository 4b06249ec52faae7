"""What a model needs in memory on the CPU, said before it loads, and what a process used.

:func:`estimate_memory` counts the weights files' headers as the gate checked them
(:mod:`gece.scoring.weights_gate`; no weight is read) and adds what scoring needs besides the weights:

    weights = values x bytes per value in the kept dtype (+ the non-float tensors as stored)
    scoring = threads x 2 x WEIGHT_BLOCK_BYTES      (each thread's float64 weight block and its product)
            + threads x vocabulary x head_bytes_per_word()
                        (each thread's LM-head arrays: HEAD_ROWS float32 logits, SOFTMAX_ROWS asked rows
                         copied and their float64 log-softmax, two arrays)
            + 2 x WEIGHT_BLOCK_BYTES + vocabulary x naive_bytes_per_word()
                        (the self-check's naive pass, in a thread of its own beside the scoring: its block
                         and product, and its NAIVE_ROWS float32 logits over the vocabulary)
            + vocabulary x TOKENIZER_BYTES_PER_WORD  (the fast tokenizer's tables)
            + RUNTIME_BYTES                          (torch, transformers, numba's code, a batch)

The two constants are measured (``make bench-size`` on 2 cores, docs/models.md): every model of the size
bench, the shipped ones included, peaked 0.04-0.17 GB under its estimate.

:func:`check_memory` compares the total with what the machine has left (``MemAvailable``, or less
under a cgroup v2 limit) and refuses the model before loading (E-MODEL-MEMORY) with the estimate
and what to do. :func:`peak_rss_mb` is the peak resident set of this process since it started
(``VmHWM``), which, unlike ``getrusage``'s ``ru_maxrss``, does not carry over the parent's peak
into a child started with ``fork``/``vfork`` and ``exec``.
"""

from __future__ import annotations

import contextlib
import math
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gece.base.errors import GeceError
from gece.scoring import exact, weights_gate
from gece.scoring import gguf as gguf_conversion

GB = 1e9
RUNTIME_BYTES = 0.75 * GB  # torch, transformers, numba's code and a batch's activations (measured)
TOKENIZER_BYTES_PER_WORD = 1400  # a fast tokenizer's vocabulary and merges (gemma-3-270m's 262,144 words: 0.35 GB)
# float32 copies of the weights a GGUF's conversion holds at its peak, the runtime aside (measured, gece.scoring.gguf):
GGUF_CONVERSION_COPIES = 1  # streamed, then loaded once to check it (peak 1.49 GB for gemma-3-270m, 1.07 GB)
GGUF_WHOLE_CONVERSION_COPIES = 3  # converted whole (architectures transformers reads with its newer GGUF loader)


def _vocab(config_dir: Path) -> int:
    """The vocabulary size of ``config_dir``'s ``config.json`` (or its ``text_config``), read by the gate's typed
    reader; 0 when there is no config (a GGUF not yet converted)."""
    if not (config_dir / "config.json").exists():
        return 0
    config = weights_gate.read_config(config_dir / "config.json", str(config_dir))
    text = config.get("text_config") or {}
    return int(config.get("vocab_size") or text.get("vocab_size") or 0)


@dataclass(frozen=True)
class MemoryEstimate:
    """What loading and scoring a model on the CPU needs (bytes): the weights in the dtype they are kept in,
    the float64 blocks of the products and the LM head's arrays over the vocabulary (one set per scoring
    thread), the tokenizer, and the runtime (the module's docstring)."""

    weights: float
    scoring: float
    dtype: str

    @property
    def total(self) -> float:
        return self.weights + self.scoring


def estimate_memory(weights: Sequence[weights_gate.WeightsHeader], config_dir: Path, dtype: str, threads: int = 2,
                    gguf: weights_gate.WeightsHeader | None = None) -> MemoryEstimate:  # fmt: skip
    """:class:`MemoryEstimate` of a model kept in ``dtype`` on the CPU, counted from the checked headers of its
    safetensors files ``weights`` (:func:`gece.scoring.weights_gate.check_directory`: no weight is read) and the
    vocabulary in ``config_dir``. A GGUF not yet converted (``gguf``, its header from
    :func:`gece.scoring.weights_gate.read_gguf`, given; ``weights`` empty) is counted from its tensor list at what
    its conversion holds (:data:`GGUF_CONVERSION_COPIES` float32 copies, :data:`GGUF_WHOLE_CONVERSION_COPIES` for an
    architecture converted whole), which is at least what the converted model then takes in ``dtype``."""
    size = {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]
    if weights or gguf is None:
        counts = [h.counts() for h in weights]
        values, other = sum(c[0] for c in counts), sum(c[1] for c in counts)
    else:
        values = gguf.counts()[0]
        copies = GGUF_CONVERSION_COPIES if gguf_conversion.streamed(gguf.architecture) else GGUF_WHOLE_CONVERSION_COPIES
        values, other, size = copies * values, 0, 4  # the conversion is in float32, whatever dtype keeps
    vocab = _vocab(config_dir)
    per_thread = 2 * exact.WEIGHT_BLOCK_BYTES + vocab * head_bytes_per_word()
    naive = 2 * exact.WEIGHT_BLOCK_BYTES + vocab * naive_bytes_per_word()
    return MemoryEstimate(
        values * size + other, threads * per_thread + naive + vocab * TOKENIZER_BYTES_PER_WORD + RUNTIME_BYTES, dtype
    )


def head_bytes_per_word() -> int:
    """Bytes per vocabulary word of one scoring thread's LM-head arrays (:func:`gece.scoring.engine.head_values`):
    :data:`~gece.scoring.engine.HEAD_ROWS` rows of float32 logits, and :data:`~gece.scoring.engine.SOFTMAX_ROWS`
    asked rows copied (float32) with their float64 log-softmax (two arrays)."""
    from gece.scoring.engine import HEAD_ROWS, SOFTMAX_ROWS

    return HEAD_ROWS * 4 + SOFTMAX_ROWS * (4 + 2 * 8)


def naive_bytes_per_word() -> int:
    """Bytes per vocabulary word of the self-check's naive pass (:func:`gece.scoring.engine.score_naive`): the
    model's own float32 logits at up to :data:`~gece.scoring.engine.NAIVE_ROWS` padded positions, and its
    :data:`~gece.scoring.engine.SOFTMAX_ROWS` rows at a time as :func:`head_bytes_per_word` counts them."""
    from gece.scoring.engine import NAIVE_ROWS, SOFTMAX_ROWS

    return NAIVE_ROWS * 4 + SOFTMAX_ROWS * (4 + 2 * 8)


def available_memory() -> float:
    """Bytes this process may still use: the kernel's MemAvailable, or less under a cgroup (v2) limit."""
    avail = math.inf
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            avail = min(avail, int(limit) - used)
    return float(avail)


def check_memory(source: str, est: MemoryEstimate) -> MemoryEstimate:
    """Refuse, before loading, a CPU model (named by ``source``) that would not fit in the memory available
    (E-MODEL-MEMORY), with the estimate and what to do; return the estimate otherwise."""
    dtype = est.dtype
    avail = available_memory()
    if est.total > avail:
        half = "" if dtype != "float32" else ", dtype: bfloat16 (half the weights, scored exactly from them)"
        raise GeceError(
            f"model {source}: needs about {est.total / GB:.1f} GB of memory on the CPU "
            f"({est.weights / GB:.1f} GB of {dtype} weights + {est.scoring / GB:.1f} GB to score), "
            f"and {avail / GB:.1f} GB is available",
            hint="free memory or use a machine with more" + half + ", spread the model with device: multi "
            "(accelerate offloads layers to disk), a GPU (device: cuda), or a smaller model; "
            "a smaller slice (--limit) does not shrink the weights",
        )
    return est


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (``VmHWM`` / 1024, from ``/proc/self/status``;
    ``ru_maxrss`` where that file is missing)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        lines = Path("/proc/self/status").read_text().splitlines()
        return int(next(ln.split()[1] for ln in lines if ln.startswith("VmHWM:"))) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
