"""Scoring through vLLM (``backend: vllm`` in a registry entry): on CUDA GPUs (``pip install 'gece[vllm]'``) or on
the CPU with vLLM's CPU build (``make engines``: the environment ``.venv-engines``, whose ``gece`` runs it).

The same quantities as :mod:`gece.scoring.engine`, computed by vLLM's batched, paged-attention
prefill with the model split over ``tensor_parallel`` GPUs. Tokenization and word alignment
are gece's own (:func:`gece.scoring.planning.tokenize` with the model's Hugging Face tokenizer,
prompts passed as token ids), so both backends score exactly the same tokens. For a side whose
fed tokens are x_0..x_{F-1} (everything before its last target token x_F), the prompt is
x_0..x_F and, with ``prompt_logprobs``, vLLM returns for every prompt position t >= 1

    log P(x_t) = log softmax(z_{t-1})[x_t]

from the raw logits (temperature 1, no penalties: the processed and raw distributions are the
same), which is what the engine reads at position t-1. The word and side log-probabilities and
p follow exactly as in the engine. vLLM returns log-probabilities, not logits, so the score
file's ``logit_more``/``logit_less`` are null for this backend, and the meta's ``flops`` too
(vLLM does not expose the forward pass it ran).

Differences from the engine: vLLM's kernels are not batch-invariant on a GPU, so scores can move in the
last bits between runs with other batch sizes; with float32 weights the two backends agree
within 1e-3 in log-probability (``tests/test_vllm.py``: on the CPU build, measured; on a CUDA machine, where one is).

On vLLM's CPU build (:func:`cpu_environment`, :func:`engine_args`): float32 for ``dtype: auto``, eager execution
(no CUDA graphs to capture, and no compile at start-up), a KV cache of :data:`CPU_KV_CACHE_BYTES` (vLLM's default
reserves 92% of the machine's memory and refuses to start when less is free; ``VLLM_CPU_KVCACHE_SPACE``, in GiB,
overrides it), and the engine's processes started with ``TORCHDYNAMO_DISABLE=1``. vLLM's CPU build starts them with
spawn, and a spawned process runs the parent's main module again: for the ``gece`` command, gece's ``__init__``, which
sets ``ATEN_CPU_CAPABILITY`` to ``default`` (torch's portable kernels) before torch loads; they also inherit it from
this process, so vLLM's workers run torch's portable kernels under gece however it was started (lm-eval and ``vllm
serve``, which do not import gece, run the CPU's own kernels, whose scores differ in the last bits). Under the
portable kernels vLLM's inductor compile of the op that ranks the prompt tokens does not build (``'at::vec' has not
been declared``), hence ``TORCHDYNAMO_DISABLE``: that op runs eagerly, the same bits. ``tensor_parallel`` splits the
model over that many worker processes, each bound to its own share of the CPU cores this process may use.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gece.base.errors import GeceError
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import models
from gece.scoring.engine import PairScore, SideScore
from gece.scoring.packing import BatchStats
from gece.scoring.planning import PairPlan, SidePlan

MAX_MODEL_LEN = 4096  # benchmark sentences are short; a smaller context leaves vLLM more KV-cache blocks
AUTO_BATCH = 1024  # batch_size auto: vLLM schedules the prompts of one call itself
CPU_KV_CACHE_BYTES = 1 << 30  # the KV cache on vLLM's CPU build: a benchmark's prompts are short
INSTALL_HINT = (
    "on a CUDA GPU: pip install 'gece[vllm]'; on the CPU: make engines, then run .venv-engines/bin/gece "
    "(vLLM's CPU build, docs/models.md); or use backend: transformers"
)
CPU_ENV = {"TORCHDYNAMO_DISABLE": "1"}  # what vLLM's CPU processes start with (module docstring)


def _import_vllm():
    try:
        import vllm
    except ImportError as e:
        raise GeceError(f"backend vllm: vLLM is not installed ({e})", hint=INSTALL_HINT) from e
    return vllm


def model_dir(resolved: models.Resolved, weights: dict[str, str]) -> Path:
    """The transformers directory vLLM reads: the model directory, or a GGUF's converted copy."""
    if resolved.kind == "gguf":
        (sha,) = weights.values()
        return models.converted_dir(resolved.path, sha)
    return resolved.path


def max_model_len(path: Path) -> int:
    """:data:`MAX_MODEL_LEN`, or less when the model's context is shorter."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return MAX_MODEL_LEN
    text = config.get("text_config", config)
    return min(MAX_MODEL_LEN, int(text.get("max_position_embeddings") or MAX_MODEL_LEN))


def platform(vllm: Any) -> str:
    """Where this vLLM runs: ``cuda`` or ``cpu`` (its CPU build); a GeceError for any other platform."""
    from vllm.platforms import current_platform

    if current_platform.is_cuda():
        return "cuda"
    if current_platform.is_cpu():
        return "cpu"
    raise GeceError(
        f"backend vllm: vLLM {vllm.__version__} runs on {current_platform.device_name!r}, which gece does not support",
        hint=INSTALL_HINT,
    )


def cpu_cores() -> list[int]:
    """The CPU cores this process may run on."""
    return sorted(os.sched_getaffinity(0))


def placement(spec: ModelSpec, on: str) -> None:
    """Check the entry's ``device`` and ``tensor_parallel`` against the platform ``on`` (a GeceError naming the fix)."""
    import torch

    wanted = spec.device.split(":")[0]
    if wanted != "auto" and wanted != on:
        built = "its CPU build" if on == "cpu" else "a CUDA build"
        raise GeceError(f"backend vllm: device {spec.device}, but the vLLM here is {built}", hint=INSTALL_HINT)
    have, units = (torch.cuda.device_count(), "GPUs") if on == "cuda" else (len(cpu_cores()), "CPU cores")
    if spec.tensor_parallel > have:
        raise GeceError(
            f"backend vllm: tensor_parallel {spec.tensor_parallel} needs that many {units}; {have} available",
            hint="lower tensor_parallel in the registry entry",
        )


def cpu_binding(workers: int, cores: Sequence[int]) -> str:
    """vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` for ``workers`` tensor-parallel workers: the cores in as many equal
    runs, one per worker (``0,1|2,3``; the cores left over by the division go unused). vLLM's own choice binds the
    workers by NUMA node and stops where there are fewer nodes than workers."""
    share = len(cores) // workers
    return "|".join(",".join(map(str, cores[k * share : (k + 1) * share])) for k in range(workers))


@contextlib.contextmanager
def cpu_environment(workers: int) -> Iterator[None]:
    """The environment vLLM's CPU workers start in (module docstring), restored afterwards: they are started,
    and inherit it, while the engine is built."""
    changes = dict(CPU_ENV)
    if workers > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        changes["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binding(workers, cpu_cores())
    saved = {k: os.environ.get(k) for k in changes}
    try:
        os.environ.update(changes)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def engine_args(spec: ModelSpec, path: Path, dtype: str, on: str) -> dict[str, Any]:
    """The arguments of ``vllm.LLM`` for the model directory ``path`` on platform ``on`` (module docstring)."""
    args: dict[str, Any] = {
        "model": str(path),
        "tokenizer": str(path),
        "dtype": dtype,
        "tensor_parallel_size": spec.tensor_parallel,
        "trust_remote_code": False,
        "seed": 0,
        "max_model_len": max_model_len(path),
    }
    if on == "cpu":
        args |= {"enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    return args


def load(spec: ModelSpec, resolved: models.Resolved, **overrides: Any) -> models.LoadedModel:
    """A vLLM engine over the model's weights (safetensors; GGUFs through gece's converted cache),
    with the model's fast tokenizer for gece's word alignment. ``overrides``: more arguments of ``vllm.LLM``
    (``max_num_seqs``, say: tests and benchmarks)."""
    from transformers import AutoTokenizer

    t0 = time.perf_counter()
    vllm = _import_vllm()
    on = platform(vllm)
    placement(spec, on)
    dtype = str(models.resolve_dtype(spec.dtype, "cuda")).removeprefix("torch.")  # auto: float32, on the CPU too
    weights = models.weight_hashes(resolved)
    path = model_dir(resolved, weights)
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    models.require_offsets(tok, spec.source)
    args = engine_args(spec, path, dtype, on) | overrides
    with cpu_environment(spec.tensor_parallel) if on == "cpu" else contextlib.nullcontext():
        llm = vllm.LLM(**args)
    device = on if spec.tensor_parallel == 1 else f"{on} x{spec.tensor_parallel}"
    return models.LoadedModel(
        model=llm,
        tokenizer=tok,
        source=spec.source,
        kind=resolved.kind,
        weights=weights,
        dtype=dtype,
        device=device,
        attention="vllm",
        special_tokens=spec.special_tokens,
        load_seconds=time.perf_counter() - t0,
        loaded_from=str(path),
    )


def close(lm: models.LoadedModel) -> None:
    """Stop the engine's processes now, while this interpreter is whole. Left to exit, vLLM's own finalizer and
    its thread that watches the engine process both shut it down, and the two could race: the process then ended
    in ``terminate called without an active exception`` (SIGABRT) after every file was written."""
    lm.model.llm_engine.engine_core.shutdown()


@dataclass
class Runner:
    """A vLLM engine and its sampling settings (one generated token, prompt log-probabilities)."""

    llm: Any
    sampling: Any
    oom_retries: int = 0  # vLLM sizes its own memory: never retried here

    @classmethod
    def for_model(cls, lm: models.LoadedModel) -> Runner:
        vllm = _import_vllm()
        sampling = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0, detokenize=False)
        return cls(lm.model, sampling)


def side_prompt(prefix: Sequence[int], side: SidePlan) -> list[int]:
    """The side's fed tokens and its last target token: every target t is read at prompt position t."""
    fed = list(prefix) + list(side.suffix)
    last_pos, last_tok = max(target for w in side.targets for target in w)
    if last_pos != len(fed) - 1:
        raise AssertionError("a side's fed tokens end just before its last target token")
    return [*fed, last_tok]


def _logprob(entry: Any, token: int, where: str) -> float:
    """The log-probability of ``token`` in one prompt position's entry ({token id: Logprob})."""
    if entry is None or token not in entry:
        raise GeceError(
            f"vLLM returned no log-probability for token {token} at {where}",
            hint="this vLLM version's prompt_logprobs format is not supported; please report it",
        )
    value = entry[token]
    return float(getattr(value, "logprob", value))


def read_pair(plan: PairPlan, outputs: tuple[Any, Any]) -> PairScore:
    """A pair's scores from the vLLM outputs of its two prompts (more, less)."""
    scores = []
    for name, side, out in (("more", plan.more, outputs[0]), ("less", plan.less, outputs[1])):
        prompt = list(out.prompt_token_ids)
        entries = out.prompt_logprobs
        if entries is None or len(entries) != len(prompt):
            raise GeceError("vLLM returned no prompt log-probabilities", hint="please report this vLLM version")
        words = []
        for w in side.targets:
            vals = []
            for pos, tok in w:
                if prompt[pos + 1] != tok:
                    raise AssertionError("prompt and target tokens disagree")
                vals.append(_logprob(entries[pos + 1], tok, f"pair {plan.index} {name}, position {pos + 1}"))
            words.append(tuple(vals))
        scores.append(SideScore(tuple(words), None))
    return PairScore(plan.index, scores[0], scores[1])


def score(
    runner: Runner, batch_list: Sequence[Sequence[PairPlan]], on_batch: Callable[[int], None] | None = None
) -> Iterator[tuple[list[PairScore], BatchStats]]:
    """Score batches in order, one ``LLM.generate`` call (two prompts per pair) per batch."""
    for b in batch_list:
        prompts = [side_prompt(pl.prefix, sp) for pl in b for sp in (pl.more, pl.less)]
        outs = runner.llm.generate([{"prompt_token_ids": p} for p in prompts], runner.sampling, use_tqdm=False)
        scores = [read_pair(pl, (outs[2 * k], outs[2 * k + 1])) for k, pl in enumerate(b)]
        fed = sum(len(p) for p in prompts)
        stats = BatchStats(tokens_fed=fed, tokens_padded=fed, head_positions=fed - len(prompts), forward_calls=1)
        if on_batch:
            on_batch(len(b))
        yield scores, stats


def auto_batch_size(runner: Runner, plans: Sequence[PairPlan]) -> int:
    """``batch_size: auto`` for vLLM: large calls (:data:`AUTO_BATCH` pairs); vLLM schedules them
    within its own memory budget."""
    return AUTO_BATCH
