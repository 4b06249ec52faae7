"""Stage extract: score every prepared pair of every benchmark with a model, loaded once ->
``artifacts/tokens/<m>/<b>.parquet`` (every target token's log-probability and logit) and its metadata.

The word rule and the side rule are not applied here but by the score stage (:mod:`gece.pipeline.score`),
so changing ``extract.word_prob`` runs no model. When the stage runs again because a benchmark was
added or changed, the benchmarks whose token files still fit (same prepared pairs, model, settings and
code) are taken from the last run (:mod:`gece.pipeline.reuse`) and only the others are scored.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from gece import command, faults, options
from gece.errors import GeceError
from gece.io import layout
from gece.io.disk import atomic_path, check_output, check_output_dir, check_unique_ids
from gece.io.files import (
    ROW_GROUP_ROWS,
    TableWriter,
    iter_table,
    pair_ids,
    parquet_rows,
    read_json,
    read_table,
    write_json,
    write_table,
)
from gece.io.params import ExtractParams, ModelSpec
from gece.io.schemas import ExtractMeta, ExtractTiming, PreparedPair, TokenRow
from gece.pipeline import reuse
from gece.rule_registry import RULE_NAMES, RuleName
from gece.scoring import planning
from gece.terminal import literal, plural

log = logging.getLogger("gece")


# ---------------------------------------------------------------------------- extract
KEY_COLUMNS = ["pair_id", "row"]  # what a token file keeps of the prepared pair (the score stage joins the rest)


FINGERPRINT = "fingerprint"  # the token file's metadata key holding :func:`fingerprint`
SHARD_BATCHES = 4  # batches per resumable shard


WINDOW_PAIRS = ROW_GROUP_ROWS  # pairs read, tokenized, planned and ordered together: memory does not grow with n


def _fingerprint(**parts: object) -> str:
    """sha256 of the JSON of everything a file's content depends on."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def effective(
    settings: ExtractParams, spec: ModelSpec, benchmark: str, rules: Mapping[str, RuleName] | None = None
) -> ExtractParams:
    """The settings that score ``benchmark`` with ``spec``: its rule (``rules[benchmark]``, the rule of its
    params.yaml entry, :attr:`gece.io.params.Params.rules`; else ``settings.rule``), and the smaller of
    ``extract.limit`` and ``registry.<model>.limit``."""
    limit = min((x for x in (settings.limit, spec.limit) if x is not None), default=None)
    return settings.model_copy(update={"rule": (rules or {}).get(benchmark, settings.rule), "limit": limit})


def fingerprint(prepared: Path, model_id: str, spec: ModelSpec, settings: ExtractParams) -> str:
    """What a token file's numbers depend on, known before the model loads: the prepared pairs' bytes, the
    model's registry entry, the settings that choose the scored tokens (the rule, the limit; not ``word_prob``,
    nor the batch size, which changes no bit), and the versions of torch, transformers and the engine. Stored in
    the file; a later run reuses the file only when it is unchanged."""
    from importlib.metadata import PackageNotFoundError, version

    from gece.scoring import engine, models

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return _fingerprint(
        prepared=models.sha256_file(prepared),
        model=model_id,
        spec=spec.model_dump(),
        rule=settings.rule,
        limit=settings.limit,
        torch=installed("torch"),
        transformers=installed("transformers"),
        engine=engine.ENGINE_VERSION,
    )


def _layout(n: int, batch_size: int) -> list[tuple[int, int, int]]:
    """The windows of a run of n pairs: (first pair, end, number of shards), fixed before any scoring."""
    out = []
    for lo in range(0, n, WINDOW_PAIRS):
        hi = min(lo + WINDOW_PAIRS, n)
        n_batches = -(-(hi - lo) // batch_size)
        out.append((lo, hi, -(-n_batches // SHARD_BATCHES)))
    return out


def extract(
    prepared: str | Path,
    out: str | Path,
    model_id: str,
    spec: ModelSpec,
    settings: ExtractParams | None = None,
    *,
    meta_out: str | Path | None = None,
    on_shard: Callable[[int], None] | None = None,
    loaded: object | None = None,
    shards: str | Path | None = None,
    key: str | None = None,
    rules: Mapping[str, RuleName] | None = None,
) -> tuple[ExtractMeta, ExtractTiming]:
    """artifacts/prepared/<b>.parquet -> artifacts/tokens/<m>/<b>.parquet, <b>.meta.json and <b>.timing.json.

    Scores every pair with the model (docs/models.md; :mod:`gece.scoring.engine`), streaming: pairs are
    read, tokenized, ordered and batched ``WINDOW_PAIRS`` at a time, so memory does not grow
    with the benchmark. Work is written in shards of ``SHARD_BATCHES`` batches under ``shards`` (default
    :func:`gece.io.layout.shards_dir`, beside ``out``; the stage's are :func:`gece.io.layout.tokens_shards_dir`, outside
    the folder DVC removes before a run); a run that is killed and started again reuses the finished shards (when
    inputs, model and settings are unchanged), and the final file, assembled window by window
    from the shards, is byte-identical to an uninterrupted run's. The shards are removed once
    the output is written.

    The benchmark's rule (``rules[benchmark]``, else ``settings.rule``; :func:`effective`) says what is scored:
    the target words (``target``) or the whole
    sentences (``sentence``); a pair with a word at its sentence's first token is fed with the prefix
    token (BOS, else EOS) in front (:func:`gece.scoring.planning.prefix_pairs`; counted in the
    meta's ``prefixed_sentences``). Every pair is tokenized and aligned before any is scored: a
    target word that covers no token fails the run at once, listing every such pair with its row.
    A pair whose score is NaN or infinite (the model's logits overflowed, e.g. in float16) is
    never written: the run scores every pair, then fails listing the affected pairs, and
    writes no output. ``on_shard(i)`` is called after shard i is written, ``loaded`` is an
    already loaded :class:`gece.scoring.models.LoadedModel` of ``spec`` (tests, benchmarks), and ``key`` the
    :func:`fingerprint` of these arguments when the caller has it already (:func:`extract_model`).
    """
    import torch
    import transformers

    import gece
    from gece.progress import Progress
    from gece.scoring import engine, exact_model, memory, models, packing, selfcheck

    prepared, out, settings = Path(prepared), Path(out), settings or ExtractParams()
    meta_out = Path(meta_out) if meta_out else layout.meta_path(out)
    beside = f"remove it, or give OUT another name (the timing file and the shards directory are named after {out})"
    check_output(layout.timing_path(out), "the timing file", beside)
    sdir = Path(shards) if shards else layout.shards_dir(out)
    check_output_dir(sdir, "the shards directory", beside)
    resolved = models.resolve(spec)  # a missing package/file/hub id fails before any work
    n_rows, pmeta = parquet_rows(prepared, PreparedPair, whole=False)  # streamed
    benchmark = pmeta.get("benchmark", prepared.stem)
    settings = effective(settings, spec, benchmark, rules)
    n = n_rows if settings.limit is None else min(n_rows, settings.limit)
    check_unique_ids(prepared, pair_ids(prepared, n))  # one column read: a repeated pair fails before the model loads
    key = key or fingerprint(prepared, model_id, spec, settings)
    threads = engine.set_threads()
    backend: Any = engine
    lm: Any = loaded if loaded is not None else _load(spec, resolved)
    if spec.backend == "vllm":
        from gece.scoring import vllm_backend as backend

        runner = backend.Runner.for_model(lm)
    else:
        if not exact_model.portable_kernels():
            log.warning(
                "torch runs its %s CPU kernels, not the portable ones (ATEN_CPU_CAPABILITY=default was set "
                "after torch ran a kernel): scores may differ in the last bits between machines",
                exact_model.cpu_kernels(),
            )
        runner = engine.Runner(lm.model, lm.tokenizer.pad_token_id)

    text = functools.lru_cache(maxsize=None)(lambda tid: lm.tokenizer.decode([tid]))  # a token's text, decoded alone
    first: list = []
    for pairs in iter_table(prepared, PreparedPair, WINDOW_PAIRS, limit=n):  # every pair scorable, before any work
        _, plans = planning.plans_for(
            lm.tokenizer, pairs, spec.special_tokens, source=str(prepared), extraction=planning.plan_of(settings.rule)
        )
        first = first or plans
    batch_size = settings.batch_size if isinstance(settings.batch_size, int) else backend.auto_batch_size(runner, first)
    del first
    windows = _layout(n, batch_size)

    fp = _fingerprint(
        key=key,
        batch_size=batch_size,
        weights=lm.weights,
        dtype=lm.dtype,
        device=lm.device,
        attention=lm.attention,
        shards=SHARD_BATCHES,
        window=WINDOW_PAIRS,
    )
    manifest = sdir / "manifest.json"
    if sdir.exists() and (not manifest.exists() or read_json(manifest).get("fingerprint") != fp):
        log.info("%s: discarding shards of a run with other inputs", sdir)
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True, exist_ok=True)
    if not manifest.exists():
        write_json(manifest, {"fingerprint": fp, "shards": sum(w[2] for w in windows), "out": str(out)})
    faults.checkpoint("extract:loaded")

    stats = packing.BatchStats()
    counts = {
        "multi_target_pairs": 0,
        "multi_token_targets": 0,
        "continued_pairs": 0,
        "prefixed_sentences": 0,
        "tokens_whole": 0,
    }
    resumed, shard_no, bad = 0, 0, []
    checked = pending = None
    t_score = time.perf_counter()
    with Progress(f"extract {benchmark}/{model_id}", n) as progress:
        for w, pairs in enumerate(iter_table(prepared, PreparedPair, WINDOW_PAIRS, limit=n)):
            if not pairs["row"].is_monotonic_increasing:
                raise GeceError(
                    f"{prepared}: pairs are not in the order of their rows",
                    hint="the file was not written by gece prepare; rerun prepare",
                )
            sides, plans = planning.plans_for(
                lm.tokenizer,
                pairs,
                spec.special_tokens,
                source=str(prepared),
                extraction=planning.plan_of(settings.rule),
            )
            counts["multi_target_pairs"] += sum(1 for m, l in sides if len(m.words) > 1 or len(l.words) > 1)
            counts["multi_token_targets"] += sum(1 for pair in sides for side in pair for x in side.words if len(x) > 1)
            counts["continued_pairs"] += sum(1 for pl in plans if pl.continued)
            counts["prefixed_sentences"] += sum(side.prefixed for pair in sides for side in pair)
            counts["tokens_whole"] += sum(len(side.ids) for pair in sides for side in pair)
            batch_list = engine.batches(plans, batch_size)
            base = pairs[KEY_COLUMNS]
            shards = [batch_list[k : k + SHARD_BATCHES] for k in range(0, len(batch_list), SHARD_BATCHES)]
            paths = [sdir / f"shard-{shard_no + i:05d}.parquet" for i in range(len(shards))]
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
                    checked = selfcheck.run(runner, sides, plans)
                else:
                    stream = pending.watch(stream)
            scored = contextlib.closing(stream)
            with scored as results:
                for shard, path, d in zip(shards, paths, done, strict=True):
                    if d:
                        _, smeta = read_table(path, TokenRow)
                        stats.add(packing.BatchStats(**json.loads(smeta["stats"])))
                        resumed += 1
                        progress.advance(sum(len(b) for b in shard))
                    else:
                        broken, shard_stats = _write_shard(
                            itertools.islice(results, len(shard)), base, path, plans, text
                        )
                        stats.add(shard_stats)
                        bad += broken
                        if not broken:
                            faults.checkpoint(f"extract:shard:{shard_no}")
                            if on_shard:
                                on_shard(shard_no)
                    shard_no += 1
    seconds = time.perf_counter() - t_score
    checked = pending.result if pending is not None else checked
    if bad:
        raise GeceError(
            f"{prepared}: {model_id} gave NaN or infinite scores for {len(bad)} of {n} pairs; no output was written",
            problems=bad[:20] + ([f"... and {len(bad) - 20} more"] if len(bad) > 20 else []),
            hint="the model's logits overflowed: in float16 use dtype: bfloat16 or float32 for this model under "
            "registry in params.yaml; in float32 the weights themselves are broken",
        )

    file_meta = {
        "benchmark": benchmark,
        "model": model_id,
        "source": spec.source,
        "weights_sha256": ",".join(f"{k}={v}" for k, v in lm.weights.items()),
        "special_tokens": spec.special_tokens,
        "dtype": lm.dtype,
        "device": lm.device,
        "attention": lm.attention,
        "rule": settings.rule,
        FINGERPRINT: key,
    }
    with TableWriter(out, TokenRow, file_meta) as writer:  # window by window, in the prepared order
        first = 0
        for _, _, n_shards in windows:
            parts = [read_table(sdir / f"shard-{i:05d}.parquet", TokenRow)[0] for i in range(first, first + n_shards)]
            writer.write(pd.concat(parts, ignore_index=True).sort_values("row", kind="stable", ignore_index=True))
            first += n_shards
        if not windows:
            writer.write(pd.DataFrame(columns=list(TokenRow.model_fields)))

    total_flops = engine.flops(lm.model, stats.tokens_fed, stats.head_positions) if backend is engine else None
    meta = ExtractMeta(
        benchmark=benchmark,
        model=model_id,
        backend=spec.backend,
        source=spec.source,
        kind=lm.kind,
        weights=lm.weights,
        dtype=lm.dtype,
        device=lm.device,
        attention=lm.attention,
        special_tokens=spec.special_tokens,
        word_prob=None,
        rule=settings.rule,
        batch_size=settings.batch_size,
        limit=settings.limit,
        torch=torch.__version__,
        transformers=transformers.__version__,
        gece=gece.__version__,
        pairs=n,
        **counts,
        tokens=stats.tokens_fed,
        tokens_padded=stats.tokens_padded,
        head_positions=stats.head_positions,
        flops=total_flops,
        flops_per_pair=total_flops / n if n and total_flops is not None else None,
        shards=shard_no,
        self_check=checked,
    )
    timing = ExtractTiming(
        benchmark=benchmark,
        model=model_id,
        pairs=n,
        threads=threads,
        shards_resumed=resumed,
        batch_size=batch_size,
        oom_retries=runner.oom_retries,
        seconds=round(seconds, 3),
        load_seconds=round(lm.load_seconds, 3),
        pairs_per_s=round(n / seconds, 3) if n and seconds > 0 else None,
        peak_rss_mb=round(memory.peak_rss_mb(), 1),
    )
    write_json(meta_out, meta)
    write_json(layout.timing_path(out), timing)
    shutil.rmtree(sdir, ignore_errors=True)
    log.info(
        "%s/%s: %d pairs in %.1f s (%.1f pairs/s; %d multi-target pairs, %d multi-token targets, "
        "%d shards resumed; peak RSS %.0f MB) -> %s",
        benchmark,
        model_id,
        n,
        seconds,
        timing.pairs_per_s or 0,
        meta.multi_target_pairs,
        meta.multi_token_targets,
        resumed,
        timing.peak_rss_mb,
        out,
    )
    return meta, timing


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


def _load(spec: ModelSpec, resolved: object | None = None) -> object:
    """The model of ``spec``, loaded by its backend."""
    from gece.scoring import models

    resolved = resolved or models.resolve(spec)
    if spec.backend == "vllm":
        from gece.scoring import vllm_backend

        return vllm_backend.load(spec, resolved)
    return models.load(spec, resolved=resolved)


def pairs_key(prepared: Path, limit: int | None) -> str:
    """What the extracted tokens of a prepared file depend on among its pairs: the rows and sentences of its
    first ``limit`` pairs (not the pair ids nor the file's metadata, which name the benchmark)."""
    pairs, _ = read_table(prepared, PreparedPair)
    pairs = pairs.head(limit) if limit is not None else pairs
    return _fingerprint(rows=pairs[["row", "sent_more", "sent_less"]].to_numpy().tolist())


def copy_tokens(model_id: str, source: str, benchmark: str, rule: str, key: str) -> None:
    """The token file (and its meta and timing, where it has one) of ``benchmark`` from those of ``source``,
    scored in this run from the same pairs: the same rows with ``benchmark``'s pair ids, its name, rule and
    fingerprint."""
    src = layout.tokens_path(model_id, source)
    frame, file_meta = read_table(src, TokenRow)
    pairs, _ = read_table(layout.prepared_path(benchmark), PreparedPair)
    frame = frame.assign(pair_id=frame["row"].map(dict(zip(pairs["row"], pairs["pair_id"], strict=True))))
    out = layout.tokens_path(model_id, benchmark)
    write_table(out, frame, TokenRow, meta=file_meta | {"benchmark": benchmark, "rule": rule, FINGERPRINT: key})
    meta = read_json(layout.meta_path(src), ExtractMeta)
    write_json(layout.meta_path(out), meta.model_copy(update={"benchmark": benchmark, "rule": rule}))
    if layout.timing_path(src).exists():  # not when ``source`` was itself reused from a checkout (DVC ignores timings)
        timing = read_json(layout.timing_path(src), ExtractTiming)
        write_json(layout.timing_path(out), timing.model_copy(update={"benchmark": benchmark}))


@dataclasses.dataclass
class ModelRun:
    """What ``gece extract --model`` did: the benchmarks it scored (with their timings) and those it reused."""

    scored: dict[str, ExtractTiming]
    reused: list[str]


def extract_model(
    model_id: str,
    spec: ModelSpec,
    benchmarks: list[str],
    settings: ExtractParams,
    *,
    rules: Mapping[str, RuleName] | None = None,
    loaded: object | None = None,
    lock: str | Path = reuse.LOCK,
) -> ModelRun:
    """The extract stage of one model: every benchmark's prepared pairs -> ``artifacts/tokens/<model>/``, each
    scored under its rule (``rules[b]``, else ``settings.rule``).

    The model is loaded once, and only when a benchmark needs scoring: a benchmark whose token file the last
    recorded run wrote (:func:`gece.pipeline.reuse.previous_outputs`: ``dvc.lock`` and DVC's cache, with the
    stage's code unchanged) with the same :func:`fingerprint` is copied from there instead.
    """
    missing = [f"{b}: {layout.prepared_path(b)}" for b in benchmarks if not layout.prepared_path(b).is_file()]
    if missing:
        raise GeceError(
            f"{len(missing)} prepared benchmark(s) of {model_id} are missing",
            problems=missing,
            hint="run the prepare stages first: dvc repro prepare (or gece prepare --benchmark <b>)",
        )
    previous = reuse.previous_outputs(layout.tokens_dir(model_id), lock)
    run = ModelRun({}, [])
    lm = loaded
    scored_as: dict[tuple[str, str], str] = {}  # (the pairs, what is extracted) -> the benchmark scored so
    for b in benchmarks:
        prepared, out = layout.prepared_path(b), layout.tokens_path(model_id, b)
        eff = effective(settings, spec, b, rules)
        key = fingerprint(prepared, model_id, spec, eff)
        same = (pairs_key(prepared, eff.limit), planning.plan_of(eff.rule))
        if same in scored_as:  # a variant of a benchmark scored in this run (benchmarks.<b>.rule): no model runs
            copy_tokens(model_id, scored_as[same], b, eff.rule, key)
            log.info("%s/%s: the same pairs as %s, extracted once -> %s", b, model_id, scored_as[same], out)
            run.reused.append(b)
            continue
        scored_as[same] = b
        old, old_meta = previous.get(out.name), previous.get(layout.meta_path(out).name)
        if old and old_meta and parquet_rows(old, TokenRow)[1].get(FINGERPRINT) == key:
            for src, dest in ((old, out), (old_meta, layout.meta_path(out))):
                with atomic_path(dest) as tmp:
                    shutil.copyfile(src, tmp)
            log.info("%s/%s: unchanged since the recorded run, reused -> %s", b, model_id, out)
            run.reused.append(b)
            continue
        lm = lm or _load(spec)
        run.scored[b] = extract(
            prepared,
            out,
            model_id,
            spec,
            settings,
            loaded=lm,
            shards=layout.tokens_shards_dir(model_id, b),
            key=key,
            rules=rules,
        )[1]
    if benchmarks:
        with contextlib.suppress(OSError):  # the shards' folder, once no benchmark has shards left in it
            layout.tokens_shards_dir(model_id, benchmarks[0]).parent.rmdir()
    return run


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "score every prepared benchmark with a registered model, loaded once -> every target token's log-probability "
    "and logit (DVC stage extract)"
)
EXAMPLES = (
    "gece extract --model smollm2-135m   # the DVC stage: every benchmark of params.yaml",
    "gece extract artifacts/prepared/winobias.parquet /tmp/t.parquet --model smollm2-135m --limit 50",
    "gece try ./my-model --benchmark winobias --limit 100   # a model not in params.yaml",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "prepared",
        type=Path,
        nargs="?",
        help="artifacts/prepared/<benchmark>.parquet: score this one "
        "file (default: every benchmark of params.yaml's benchmarks, to artifacts/tokens/<model>/)",
    )
    p.add_argument("out", type=Path, nargs="?", help="the token file to write, with PREPARED")
    p.add_argument(
        "--model",
        required=True,
        help="model id, an entry of registry in params.yaml (a path or hub id: use gece try, or add it under registry)",
    )
    p.add_argument(
        "--meta-out", type=Path, help="run metadata JSON, with PREPARED (default: <out>.meta.json beside the output)"
    )
    p.add_argument(
        "--batch-size",
        type=options.setting(ExtractParams, "batch_size"),
        help="pairs per forward pass, a number or auto (default: {params:extract.batch_size})",
    )
    p.add_argument(
        "--limit",
        type=options.setting(ExtractParams, "limit"),
        help="score only the first N pairs (default: {params:extract.limit}; "
        "registry.<model>.limit also applies, the smaller wins)",
    )
    p.add_argument(
        "--rule",
        choices=RULE_NAMES,
        help="what a side's tokens are, with PREPARED: the target words' (target) or the whole sentence's "
        "(sentence, lm-evaluation-harness's crows_pairs; mean and shared read the same tokens, docs/metrics.md "
        "#scoring-rules) (default: the rule of the benchmark's entry, "
        "benchmarks.<b>.rule, else {params:extract.rule})",
    )
    p.set_defaults(outputs={"OUT": "out", "--meta-out": "meta_out"}, inputs=("prepared",))


def model_hint(model: str) -> str:
    return (
        f"add it to params.yaml (under registry: `my-model: {{source: {model}}}`, and to models), or try it "
        f"first without editing params.yaml: gece try {model} --benchmark winobias --limit 100"
    )


def run(args: argparse.Namespace) -> int:
    from gece.io.params import ID_HELP, is_id

    if not is_id(args.model):  # a path or a hub id, most likely: say where it goes
        raise GeceError(
            f"--model {args.model!r} is not a valid id",
            hint=f"{ID_HELP}. A path or hub id names a model's source: {model_hint(args.model)}",
        )
    if (args.prepared is None) != (args.out is None) or (args.prepared is None and (args.meta_out or args.rule)):
        raise GeceError(
            "give PREPARED and OUT together (one benchmark), or neither (every benchmark of params.yaml; "
            "then --meta-out and --rule do not apply)",
            hint=f"for example: {EXAMPLES[1]}",
        )
    params = command.require_params(args)
    if args.model not in params.registry:
        raise GeceError(
            f"--model {args.model!r} has no entry under registry in {args.params}",
            hint=f"registered models: {', '.join(params.registry) or '(none)'}; {model_hint(args.model)}",
        )
    spec = params.registry[args.model]
    if spec.reference is not None:
        raise GeceError(
            f"--model {args.model!r} has source {spec.source}: released scores are read, not extracted",
            hint="the stages after extract read them (gece metrics --benchmark ...); extract scores a model of models",
        )
    settings = command.override(params.extract, batch_size=args.batch_size, limit=args.limit, rule=args.rule)
    rules = {} if args.rule is not None else params.rules  # --rule scores this benchmark with it, whatever its entry
    if args.prepared is None:
        done = extract_model(args.model, spec, list(params.benchmarks), settings, rules=rules)
        pairs = sum(t.pairs for t in done.scored.values())
        seconds = sum(t.seconds for t in done.scored.values())
        command.out.print(
            f"[green]scored[/] {plural(len(done.scored), 'benchmark')} with "
            f"{literal(args.model)} ({plural(pairs, 'pair')} in {seconds:.1f} s), reused "
            f"{len(done.reused)} -> {literal(str(layout.tokens_dir(args.model)))}",
            highlight=False,
        )
        return 0
    meta, timing = extract(args.prepared, args.out, args.model, spec, settings, meta_out=args.meta_out, rules=rules)
    command.out.print(
        f"[green]scored[/] {plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
        f"{literal(meta.model)} in {timing.seconds:.1f} s ({timing.pairs_per_s or 0:.1f} pairs/s) -> "
        f"{literal(str(args.out))}",
        highlight=False,
    )
    return 0
