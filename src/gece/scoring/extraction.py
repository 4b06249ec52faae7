"""One prepared benchmark scored by one loaded model -> a token file (every target token's log-probability and
logit), its metadata and its timing: the scoring entry point of the extract stage.

This module's import closure (:func:`gece.code.closure.closure`) is the code that determines a token file's bytes:
the engine and its numerics, model loading, tokenization and planning, the token file's schema
(:mod:`gece.io.schemas.tokens`) and writer (:mod:`gece.io.files.writer`), and ``gece/__init__.py``, which sets the
numeric
environment. :func:`scoring_code` hashes what that code does (its syntax trees, without comments or
docstrings), and :func:`fingerprint` puts the hash in every token file. The extract stage reuses a token file
whose fingerprint still holds (:mod:`gece.pipeline.extract`), so an edit anywhere else (a report, a command's
help, a reader, a comment here) re-scores nothing, and an edit that may change a score re-scores.

What this module reads comes through :class:`Inputs`, from readers outside this closure
(:mod:`gece.io.files.readers`): they validate and decode files whose bytes the fingerprint already holds (the
prepared pairs) or that this module wrote (its shards).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from gece.base import faults
from gece.base.errors import GeceError
from gece.code import closure
from gece.io.files import paired
from gece.io.files.json_writer import write_json
from gece.io.files.writer import ROW_GROUP_ROWS, TableWriter, write_table
from gece.io.schemas.tokens import ExtractMeta, ExtractTiming, TokenRow
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import planning

log = logging.getLogger("gece")

KEY_COLUMNS = ["pair_id", "row"]  # what a token file keeps of the prepared pair (the score stage joins the rest)
FINGERPRINT = "fingerprint"  # the token file's metadata key holding :func:`fingerprint`
CONTENT = "content"  # the token file's metadata key holding :func:`content_key`
SHARD_BATCHES = 4  # batches per resumable shard
WINDOW_PAIRS = ROW_GROUP_ROWS  # pairs read, tokenized, planned and ordered together: memory does not grow with n
COUNTS = ("multi_target_pairs", "multi_token_targets", "continued_pairs", "prefixed_sentences", "tokens_whole")


def digest(**parts: object) -> str:
    """sha256 of the JSON of everything a file's content depends on."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


BACKEND_MODULES = {"vllm": "vllm_module"}  # a backend -> this module's function that imports its adapter


@functools.cache
def scoring_code(backend: str = "transformers") -> str:
    """:func:`gece.code.closure.code_hash` of this module's import closure under ``backend``, docstrings left out:
    what the code that determines a token file's bytes does. The adapters of the other backends are left out (the
    functions of :data:`BACKEND_MODULES` that import them are not followed), so an edit to the vLLM adapter
    re-scores no model of the transformers backend. A comment, a docstring or a change to a module outside the
    closure leaves it unchanged; a rename of a module inside it changes it (docs/dvc.md, "Reuse by content")."""
    skip = {__name__: {f for b, f in BACKEND_MODULES.items() if b != backend}}
    return closure.code_hash(closure.closure([__name__], skip_functions=skip), docstrings=False)


def vllm_module() -> Any:
    """The vLLM adapter (:mod:`gece.scoring.vllm_backend`), imported on use: part of the scoring code of the vllm
    backend only (:func:`scoring_code`)."""
    from gece.scoring import vllm_backend

    return vllm_backend


def public_version(version: str) -> str:
    """A release without its local label (PEP 440): ``2.13.0+cpu`` and ``2.13.0+cu130`` are both ``2.13.0``, the
    same source built for the CPU alone or with CUDA (what pip takes differs by Python: the CPU wheel for one, the
    CUDA one from the index for another). On the CPU both run the same portable kernels (``gece/__init__.py``);
    on a GPU the CUDA version is recorded on its own (:func:`versions`, :func:`cuda_version`)."""
    return version.split("+", 1)[0]


def _installed(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return public_version(version(name))
    except PackageNotFoundError:
        return None


def cuda_version() -> str | None:
    """The CUDA version torch was built with when an NVIDIA GPU is visible (a ``/dev/nvidia<N>`` device, and
    ``CUDA_VISIBLE_DEVICES`` neither empty nor -1), else None: CPU runs do not depend on it. Read from torch's
    ``version.py`` (its ``cuda = '13.0'``) without importing torch: the fingerprint is checked before any model
    loads, and a run reused by content loads none."""
    import ast
    import os
    from importlib.metadata import PackageNotFoundError, distribution

    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return None
    if not any(Path("/dev").glob("nvidia[0-9]*")):
        return None
    try:
        source = Path(str(distribution("torch").locate_file("torch/version.py"))).read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (PackageNotFoundError, OSError, UnicodeDecodeError, SyntaxError):
        return None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(value, ast.Constant):
            return value.value if isinstance(value.value, str) else None
    return None


def versions(backend: str = "transformers") -> dict[str, object]:
    """What outside this package a score depends on: the libraries that compute it, by release (vLLM's under the
    vllm backend; CUDA's where a GPU is visible), and the scoring code of the backend. The same on every Python
    for the same releases, so a token file scored under one is reused under another."""
    from gece.scoring import engine

    libraries = {"torch": _installed("torch"), "transformers": _installed("transformers")}
    if backend == "vllm":
        libraries["vllm"] = _installed("vllm")
    cuda = cuda_version()
    if cuda is not None:
        libraries["cuda"] = cuda
    return libraries | {"engine": engine.ENGINE_VERSION, "code": scoring_code(backend)}


def fingerprint(prepared: Path, model_id: str, spec: ModelSpec, rule: str, limit: int | None) -> str:
    """What a token file's numbers depend on, known before the model loads: the prepared pairs' bytes, the
    model's registry entry, the settings that choose the scored tokens (the rule, the limit; not ``word_prob``,
    nor the batch size, which changes no bit), the versions of torch and transformers, and the scoring code
    (:func:`versions`). Stored in the file; a later run reuses the file while it is unchanged."""
    from gece.scoring import models

    return digest(
        prepared=models.sha256_file(prepared),
        model=model_id,
        spec=spec.scoring_settings(),
        rule=rule,
        limit=limit,
        **versions(spec.backend),
    )


def content_key(spec: ModelSpec, plans: Iterable[tuple[pd.DataFrame, list]]) -> str:
    """What a token file's content is a function of, whatever the registry entry is called: the ids fed and read
    for every pair (the ``plans`` of each window, with the window's key columns), the entry's settings that
    choose the weights and the numerics (all but ``special_tokens`` and ``limit``, which act through the plans),
    and :func:`versions`. Two entries with the same key feed the same token ids to the same weights: one scores,
    the other takes its file (the weights' hashes, checked on reuse, guard a directory whose files changed)."""
    h = hashlib.sha256()
    for base, window in plans:
        for (pid, row), plan in zip(base[KEY_COLUMNS].itertuples(index=False), window, strict=True):
            h.update(json.dumps([pid, int(row), dataclasses.asdict(plan)], default=str).encode())
    weights = spec.scoring_settings(frozenset({"special_tokens", "limit"}))
    return digest(plans=h.hexdigest(), spec=weights, **versions(spec.backend))


def planned(tokenizer: Any, inputs: Inputs, spec: ModelSpec, rule: str) -> tuple[list, str]:
    """Every pair tokenized and planned before any is scored (a target word that covers no token fails here,
    listing every such pair with its row), window by window: the first non-empty window's plans (what
    ``batch_size: auto`` sizes its batches on) and the :func:`content_key` of all of them."""
    first: list = []

    def windows() -> Iterator[tuple[pd.DataFrame, list]]:
        nonlocal first
        for pairs in inputs.windows():
            _, plans = planning.plans_for(
                tokenizer, pairs, spec.special_tokens, source=str(inputs.prepared), extraction=planning.plan_of(rule)
            )
            first = first or plans
            yield pairs, plans

    content = content_key(spec, windows())
    return first, content


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What extract reads, through readers outside the scoring code: the prepared pairs (``windows()``: the first
    ``pairs`` of them, ``WINDOW_PAIRS`` at a time, in row order, validated) and a shard this module wrote
    (``read_tokens``: a token file -> its rows and key-value metadata)."""

    prepared: Path
    benchmark: str
    pairs: int
    windows: Callable[[], Iterator[pd.DataFrame]]
    read_tokens: Callable[[Path], tuple[pd.DataFrame, dict[str, str]]]


@dataclasses.dataclass(frozen=True)
class Outputs:
    """Where extract writes: the token file, its metadata, its timing and its resumable shards."""

    tokens: Path
    meta: Path
    timing: Path
    shards: Path


@dataclasses.dataclass(frozen=True)
class Scoring:
    """How a benchmark is scored: the model's entry, the rule and limit in force (:func:`gece.pipeline.extract.
    effective`), the batch size as set, and the fingerprint the caller computed with :func:`fingerprint`."""

    model_id: str
    spec: ModelSpec
    rule: str
    limit: int | None
    batch_size: int | str
    key: str


def windows_layout(n: int, batch_size: int) -> list[tuple[int, int, int]]:
    """The windows of a run of n pairs: (first pair, end, number of shards), fixed before any scoring."""
    out = []
    for lo in range(0, n, WINDOW_PAIRS):
        hi = min(lo + WINDOW_PAIRS, n)
        n_batches = -(-(hi - lo) // batch_size)
        out.append((lo, hi, -(-n_batches // SHARD_BATCHES)))
    return out


def load(spec: ModelSpec, resolved: object | None = None) -> object:
    """The model of ``spec``, loaded by its backend."""
    from gece.scoring import models

    resolved = resolved or models.resolve(spec)
    if spec.backend == "vllm":
        return vllm_module().load(spec, resolved)
    return models.load(spec, resolved=resolved)


def _runner(lm: Any, spec: ModelSpec) -> tuple[Any, Any]:
    """The backend module and its runner for a loaded model."""
    from gece.scoring import engine, exact_model

    if spec.backend == "vllm":
        adapter = vllm_module()
        return adapter, adapter.Runner.for_model(lm)
    if not exact_model.portable_kernels():
        log.warning(
            "torch runs its %s CPU kernels, not the portable ones (ATEN_CPU_CAPABILITY=default was set "
            "after torch ran a kernel): scores may differ in the last bits between machines",
            exact_model.cpu_kernels(),
        )
    return engine, engine.Runner(lm.model, lm.tokenizer.pad_token_id)


def _shards_for(outputs: Outputs, fp: str, windows: list[tuple[int, int, int]]) -> None:
    """The shards directory of this run: kept when its manifest names the same run (a resume), else emptied."""
    sdir, manifest = outputs.shards, outputs.shards / "manifest.json"
    same = manifest.exists() and json.loads(manifest.read_text(encoding="utf-8")).get("fingerprint") == fp
    if sdir.exists() and not same:
        log.info("%s: discarding shards of a run with other inputs", sdir)
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True, exist_ok=True)
    if not manifest.exists():
        write_json(manifest, {"fingerprint": fp, "shards": sum(w[2] for w in windows), "out": str(outputs.tokens)})


def extract(
    inputs: Inputs,
    outputs: Outputs,
    scoring: Scoring,
    *,
    loaded: object | None = None,
    on_shard: Callable[[int], None] | None = None,
    resolved: object | None = None,
) -> tuple[ExtractMeta, ExtractTiming]:
    """Score every pair of ``inputs`` with the model -> ``outputs`` (docs/models.md; :mod:`gece.scoring.engine`).

    Streaming: pairs are read, tokenized, ordered and batched ``WINDOW_PAIRS`` at a time, so memory does not
    grow with the benchmark. Work is written in shards of ``SHARD_BATCHES`` batches under ``outputs.shards``;
    a run that is killed and started again reuses the finished shards (when inputs, model and settings are
    unchanged), and the final file, assembled window by window from the shards, is byte-identical to an
    uninterrupted run's. The shards are removed once the output is written.

    Every pair is tokenized and aligned before any is scored (:func:`planned`). A pair whose score is NaN
    or infinite (the model's logits overflowed, e.g. in float16) is never written: the run scores every pair,
    then fails listing the affected pairs, and writes no output. ``on_shard(i)`` is called after shard i is
    written; ``loaded`` is an already loaded model of ``scoring.spec`` (tests, benchmarks), ``resolved`` its
    :func:`gece.scoring.models.resolve` when the caller has it already.
    """
    from gece.scoring import engine, models

    spec, n = scoring.spec, inputs.pairs
    resolved = resolved or models.resolve(spec)  # a missing package/file/hub id fails before any work
    threads = engine.set_threads()
    lm: Any = loaded if loaded is not None else load(spec, resolved)
    backend, runner = _runner(lm, spec)
    first, content = planned(lm.tokenizer, inputs, spec, scoring.rule)
    batch_size = scoring.batch_size if isinstance(scoring.batch_size, int) else backend.auto_batch_size(runner, first)
    del first
    windows = windows_layout(n, batch_size)
    fp = digest(
        key=scoring.key,
        batch_size=batch_size,
        weights=lm.weights,
        dtype=lm.dtype,
        device=lm.device,
        attention=lm.attention,
        shards=SHARD_BATCHES,
        window=WINDOW_PAIRS,
    )
    _shards_for(outputs, fp, windows)
    faults.checkpoint("extract:loaded")
    t_score = time.perf_counter()
    run = _score_windows(inputs, outputs.shards, scoring, lm, backend, runner, batch_size, on_shard)
    seconds = time.perf_counter() - t_score
    if run.bad:
        raise GeceError(
            f"{inputs.prepared}: {scoring.model_id} gave NaN or infinite scores for {len(run.bad)} of {n} pairs; "
            "no output was written",
            problems=run.bad[:20] + ([f"... and {len(run.bad) - 20} more"] if len(run.bad) > 20 else []),
            hint="the model's logits overflowed: in float16 use dtype: bfloat16 or float32 for this model under "
            "registry in params.yaml; in float32 the weights themselves are broken",
        )
    meta = _meta(inputs, scoring, lm, run, backend is engine)
    _assemble(inputs, outputs, file_meta(meta, scoring.key, content), windows)
    timing = ExtractTiming(
        benchmark=inputs.benchmark,
        model=scoring.model_id,
        pairs=n,
        threads=threads,
        shards_resumed=run.resumed,
        batch_size=batch_size,
        oom_retries=runner.oom_retries,
        seconds=round(seconds, 3),
        load_seconds=round(lm.load_seconds, 3),
        pairs_per_s=round(n / seconds, 3) if n and seconds > 0 else None,
        peak_rss_mb=round(_peak_rss_mb(), 1),
    )
    meta = paired.describing(meta, outputs.tokens)
    write_json(outputs.meta, meta)
    write_json(outputs.timing, timing)
    shutil.rmtree(outputs.shards, ignore_errors=True)
    log.info(
        "%s/%s: %d pairs in %.1f s (%.1f pairs/s; %d multi-target pairs, %d multi-token targets, "
        "%d shards resumed; peak RSS %.0f MB) -> %s",
        inputs.benchmark,
        scoring.model_id,
        n,
        seconds,
        timing.pairs_per_s or 0,
        meta.multi_target_pairs,
        meta.multi_token_targets,
        run.resumed,
        timing.peak_rss_mb,
        outputs.tokens,
    )
    return meta, timing


def _peak_rss_mb() -> float:
    from gece.scoring import memory

    return memory.peak_rss_mb()


@dataclasses.dataclass
class _Run:
    """What scoring the windows gave: the batches' stats, the plan counts of :data:`COUNTS`, the shards resumed,
    the pairs with non-finite scores and the self-check's result."""

    stats: Any
    counts: dict[str, int]
    resumed: int = 0
    shards: int = 0
    bad: list[str] = dataclasses.field(default_factory=list)
    checked: Any = None


def _count(counts: dict[str, int], sides: list, plans: list) -> None:
    """Add a window's plan counts (:data:`COUNTS`) to ``counts``."""
    counts["multi_target_pairs"] += sum(1 for m, l in sides if len(m.words) > 1 or len(l.words) > 1)
    counts["multi_token_targets"] += sum(1 for pair in sides for side in pair for x in side.words if len(x) > 1)
    counts["continued_pairs"] += sum(1 for pl in plans if pl.continued)
    counts["prefixed_sentences"] += sum(side.prefixed for pair in sides for side in pair)
    counts["tokens_whole"] += sum(len(side.ids) for pair in sides for side in pair)


def _score_windows(
    inputs: Inputs,
    sdir: Path,
    scoring: Scoring,
    lm: Any,
    backend: Any,
    runner: Any,
    batch_size: int,
    on_shard: Callable[[int], None] | None,
) -> _Run:
    """Score every window into its shards (finished shards of a killed run are counted, not scored again), with
    the self-check on the first batch, beside the scoring or before it (:mod:`gece.scoring.selfcheck`)."""
    from gece.base.progress import Progress
    from gece.scoring import engine, packing, selfcheck

    spec = scoring.spec
    text = functools.lru_cache(maxsize=None)(lambda tid: lm.tokenizer.decode([tid]))  # a token's text, alone
    run = _Run(packing.BatchStats(), dict.fromkeys(COUNTS, 0))
    pending = None
    with Progress(f"extract {inputs.benchmark}/{scoring.model_id}", inputs.pairs) as progress:
        for w, pairs in enumerate(inputs.windows()):
            if not pairs["row"].is_monotonic_increasing:
                raise GeceError(
                    f"{inputs.prepared}: pairs are not in the order of their rows",
                    hint="the file was not written by gece prepare; rerun prepare",
                )
            sides, plans = planning.plans_for(
                lm.tokenizer,
                pairs,
                spec.special_tokens,
                source=str(inputs.prepared),
                extraction=planning.plan_of(scoring.rule),
            )
            _count(run.counts, sides, plans)
            base = pairs[KEY_COLUMNS]
            batch_list = engine.batches(plans, batch_size)
            shards = [batch_list[k : k + SHARD_BATCHES] for k in range(0, len(batch_list), SHARD_BATCHES)]
            paths = [sdir / f"shard-{run.shards + i:05d}.parquet" for i in range(len(shards))]
            done = [p.exists() for p in paths]
            # the window's batches still to score, in one stream: the backend runs ahead across shards
            stream = backend.score(
                runner,
                [b for shard, d in zip(shards, done, strict=True) if not d for b in shard],
                on_batch=progress.advance,
            )
            if w == 0 and plans and spec.backend == "transformers":  # the self-check, beside the scoring or before it
                pending = selfcheck.beside(runner, sides, plans, batch_list[0]) if not done[0] else None
                if pending is None:
                    run.checked = selfcheck.run(runner, sides, plans)
                else:
                    stream = pending.watch(stream)
            with contextlib.closing(stream) as results:
                for shard, path, d in zip(shards, paths, done, strict=True):
                    if d:
                        _, smeta = inputs.read_tokens(path)
                        run.stats.add(packing.BatchStats(**json.loads(smeta["stats"])))
                        run.resumed += 1
                        progress.advance(sum(len(b) for b in shard))
                    else:
                        broken, shard_stats = _write_shard(
                            itertools.islice(results, len(shard)), base, path, plans, text
                        )
                        run.stats.add(shard_stats)
                        run.bad += broken
                        if not broken:
                            faults.checkpoint(f"extract:shard:{run.shards}")
                            if on_shard:
                                on_shard(run.shards)
                    run.shards += 1
    run.checked = pending.result if pending is not None else run.checked
    return run


def _assemble(inputs: Inputs, outputs: Outputs, meta: dict[str, object], windows: list[tuple[int, int, int]]) -> None:
    """The token file from the shards, window by window, in the prepared order, with its metadata ``meta``."""
    with TableWriter(outputs.tokens, TokenRow, meta) as writer:
        first = 0
        for _, _, n_shards in windows:
            parts = [
                inputs.read_tokens(outputs.shards / f"shard-{i:05d}.parquet")[0] for i in range(first, first + n_shards)
            ]
            writer.write(pd.concat(parts, ignore_index=True).sort_values("row", kind="stable", ignore_index=True))
            first += n_shards
        if not windows:
            writer.write(pd.DataFrame(columns=list(TokenRow.model_fields)))


FILE_META = ("special_tokens", "dtype", "device", "attention", "rule")  # fields of the meta the token file repeats


def file_meta(meta: ExtractMeta, key: str, content: str) -> dict[str, object]:
    """The token file's key-value metadata, from its meta file's fields: which run wrote it (benchmark, model,
    source, the weights' hashes and :data:`FILE_META`), its :func:`fingerprint` and its :func:`content_key`."""
    weights = ",".join(f"{k}={v}" for k, v in meta.weights.items())
    named = {"benchmark": meta.benchmark, "model": meta.model, "source": meta.source, "weights_sha256": weights}
    return named | {k: getattr(meta, k) for k in FILE_META} | {FINGERPRINT: key, CONTENT: content}


def _meta(inputs: Inputs, scoring: Scoring, lm: Any, run: _Run, counted: bool) -> ExtractMeta:
    """The token file's metadata file: what scored the pairs and how much work it was (``counted``: the
    engine's forward passes, whose FLOPs are known; vLLM's are not)."""
    import torch
    import transformers

    import gece
    from gece.scoring import engine

    n, spec = inputs.pairs, scoring.spec
    total_flops = engine.flops(lm.model, run.stats.tokens_fed, run.stats.head_positions) if counted else None
    return ExtractMeta(
        benchmark=inputs.benchmark,
        model=scoring.model_id,
        backend=spec.backend,
        source=spec.source,
        kind=lm.kind,
        weights=lm.weights,
        dtype=lm.dtype,
        device=lm.device,
        attention=lm.attention,
        special_tokens=spec.special_tokens,
        word_prob=None,
        rule=scoring.rule,
        batch_size=scoring.batch_size,
        limit=scoring.limit,
        torch=public_version(torch.__version__),
        cuda=None if lm.device == "cpu" else torch.version.cuda,
        transformers=public_version(transformers.__version__),
        gece=gece.__version__,
        pairs=n,
        **run.counts,
        tokens=run.stats.tokens_fed,
        tokens_padded=run.stats.tokens_padded,
        head_positions=run.stats.head_positions,
        flops=total_flops,
        flops_per_pair=total_flops / n if n and total_flops is not None else None,
        shards=run.shards,
        self_check=run.checked,
    )


def token_columns(plan: Any, text: Callable[[int], str]) -> dict[str, list[list[Any]]]:
    """The ids and texts (``text(id)``: the token decoded alone) of a pair's stored tokens, per side, per word, in
    the order of its log-probabilities (:class:`gece.scoring.planning.SidePlan`'s targets)."""
    out = {}
    for side in ("more", "less"):
        words = getattr(plan, side).targets
        out[f"token_ids_{side}"] = [[tid for _, tid in w] for w in words]
        out[f"token_text_{side}"] = [[text(tid) for _, tid in w] for w in words]
    return out


def _write_shard(
    results: Iterable[tuple[list, Any]],
    base: pd.DataFrame,
    path: Path,
    plans: list,
    text: Callable[[int], str],
) -> tuple[list[str], Any]:
    """Write one shard from its batches' results (a backend's ``score``: :mod:`gece.scoring.engine` or
    :mod:`gece.scoring.vllm_backend`), its pairs in their window's order, the key columns from ``base`` (the
    window's pairs), the token ids and texts from the window's ``plans`` (:func:`token_columns`). Returns the
    pairs with non-finite scores (then nothing is written, so a rerun scores them again) and the shard's stats."""
    from gece.scoring import engine, packing

    recs: list[dict] = []
    shard_stats = packing.BatchStats()
    for scores, st in results:
        shard_stats.add(st)
        recs += [{"_index": sc.index, **sc.tokens(), **token_columns(plans[sc.index], text)} for sc in scores]
    recs.sort(key=lambda r: r["_index"])
    idx = [r.pop("_index") for r in recs]
    frame = pd.concat([base.iloc[idx].reset_index(drop=True), pd.DataFrame(recs)], axis=1)
    broken = [
        f"pair {pid} (row {row}): {', '.join(fields)}"
        for pid, row, fields in zip(frame["pair_id"], frame["row"], map(engine.non_finite, recs), strict=True)
        if fields
    ]
    if not broken:
        write_table(path, frame, TokenRow, meta={"stats": json.dumps(dataclasses.asdict(shard_stats))})
    return broken, shard_stats
