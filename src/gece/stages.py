"""The pipeline stages: read typed inputs, call the pure functions, write typed outputs.

Each function here is one DVC stage (``gece <stage>`` in dvc.yaml) and the only place,
besides :mod:`gece.schemas`, where files are read or written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from gece import ablation, benchmarks, metrics, plots, report
from gece.ablation import Run
from gece.errors import GeceError
from gece.params import AblateParams, CompareParams, ExtractParams, MetricsParams, ModelSpec, PrepareParams
from gece.schemas import (
    NEUTRAL_KEYS,
    BinningReport,
    BinsReport,
    CompareReport,
    ExtractMeta,
    MetricsReport,
    NeutralReport,
    PreparedPair,
    ReferenceRow,
    SampleSizeReport,
    ScoreRow,
    SpecialTokensReport,
    read_json,
    read_table,
    validate_records,
    write_figure,
    write_json,
    write_table,
    write_text,
)

log = logging.getLogger("gece")

# where the stages put things (see LAYOUT.md); paths are relative to the repository root
ARTIFACTS = Path("artifacts")
REPORTS = Path("reports")


def scores_path(benchmark: str, model: str) -> Path:
    return ARTIFACTS / "scores" / benchmark / f"{model}.parquet"


def metrics_path(benchmark: str, model: str) -> Path:
    return REPORTS / "metrics" / benchmark / f"{model}.json"


def prepare(csv: str | Path, out: str | Path, settings: PrepareParams = PrepareParams()) -> pd.DataFrame:
    """data/benchmarks/<b>.csv -> artifacts/prepared/<b>.parquet (validated, aligned pairs)."""
    csv = Path(csv)
    rows, warnings = benchmarks.load_benchmark(csv, settings.duplicates)
    for w in warnings:
        log.warning(w)
    prepared = benchmarks.prepare_pairs(rows, csv.stem)
    write_table(out, prepared, PreparedPair, meta={"benchmark": csv.stem, "source": str(csv)})
    multi = int((prepared["n_targets"] > 1).sum())
    log.info(
        "%s: %d pairs (%d with several differing words, %d cloze-last) -> %s",
        csv.stem, len(prepared), multi, int((prepared["position"] == "last").sum()), out,
    )
    return prepared


def reference(prepared: str | Path, csv: str | Path, out: str | Path, model: str) -> pd.DataFrame:
    """data/reference/<b>/<m>.csv -> artifacts/scores/<b>/paper-<m>.parquet (the score schema).

    The authors' rows are matched to the prepared pairs by position and checked sentence by
    sentence; their pronoun probabilities become the log-probabilities, their first-token
    logits the logits and their normalized score ``p``.
    """
    pairs, meta = read_table(prepared, PreparedPair)
    csv = Path(csv)
    if not csv.exists():
        raise GeceError(f"{csv}: file not found", hint="dvc pull data.dvc")
    ref = pd.read_csv(csv)
    validate_records(ref.to_dict(orient="records"), ReferenceRow, str(csv),
                     hint="the file is not one of the authors' result CSVs (see data/SOURCES.md)")
    if len(ref) != len(pairs):
        raise GeceError(f"{csv}: {len(ref)} rows, but {prepared} has {len(pairs)} pairs",
                        hint="reference scores must cover the whole benchmark, in its order")
    problems = []
    for i, (r, q) in enumerate(zip(ref.itertuples(index=False), pairs.itertuples(index=False), strict=True)):
        if (r.Sentence_more, r.Sentence_less) != (q.sent_more, q.sent_less):
            problems.append(f"row {i + 1}: sentences differ from {q.pair_id} of {prepared}")
        elif r.Pronoun_more.lower() not in {t.lower() for t in q.targets_more} or \
                r.Pronoun_less.lower() not in {t.lower() for t in q.targets_less}:
            problems.append(f"row {i + 1}: pronouns {r.Pronoun_more}/{r.Pronoun_less} are not the targets "
                            f"{list(q.targets_more)}/{list(q.targets_less)}")
        elif int(r.True_Label) != int(q.y):
            problems.append(f"row {i + 1}: True_Label {r.True_Label} but the benchmark says y={q.y}")
    if problems:
        raise GeceError(f"{csv}: does not match the benchmark {prepared}", problems=problems[:20],
                        hint="reference scores and benchmark must come from the same snapshot (dvc pull data.dvc)")
    scores = pairs[["pair_id", "row", "sent_more", "sent_less", "y", "bias_type", "targets_more", "targets_less",
                    "gender_more", "gender_less"]].copy()
    scores["n_tokens_more"] = None
    scores["n_tokens_less"] = None
    scores["logprob_more"] = np.log(ref["Pronoun_Probability_more"].to_numpy(np.float64))
    scores["logprob_less"] = np.log(ref["Pronoun_Probability_less"].to_numpy(np.float64))
    scores["logit_more"] = ref["Pronoun_Logit_more"].to_numpy(np.float64)
    scores["logit_less"] = ref["Pronoun_Logit_less"].to_numpy(np.float64)
    scores["p"] = ref["Normalized_Score_more"].to_numpy(np.float64)
    write_table(out, scores, ScoreRow, meta={"benchmark": meta.get("benchmark", ""), "model": model,
                                             "source": str(csv)})
    log.info("%s: %d pairs -> %s", model, len(scores), out)
    return scores


def run_metrics(scores: pd.DataFrame, settings: MetricsParams) -> tuple[dict, list[dict]]:
    """The metrics report and the paper-convention reliability bins of one score table."""
    p, y = scores["p"].to_numpy(np.float64), scores["y"].to_numpy(np.float64)
    report = metrics.summarize(
        p, y, scores["gender_more"].to_numpy(object), scores["gender_less"].to_numpy(object),
        n_bins=settings.n_bins, binning=settings.binning, draws=settings.bootstrap, seed=settings.seed,
        level=settings.ci,
    )
    bins = metrics.reliability_table(p, y, settings.n_bins, settings.binning).records() if len(p) else []
    return MetricsReport.model_validate(report).model_dump(), bins


def metrics_stage(
    scores_path: str | Path, out: str | Path | None, bins_out: str | Path | None, settings: MetricsParams
) -> tuple[dict, list[dict], dict[str, str]]:
    """artifacts/scores/<b>/<m>.parquet -> reports/metrics/<b>/<m>.json and reports/bins/<b>/<m>.json."""
    scores, meta = read_table(scores_path, ScoreRow)
    report, bins = run_metrics(scores, settings)
    if out:
        write_json(out, MetricsReport.model_validate(report))
    if bins_out:
        write_json(bins_out, bins, BinsReport)
    return report, bins, meta


# ----------------------------------------------------------------------- ablations
def load_run(path: str | Path) -> tuple[Run, dict[str, str]]:
    """A score file as the arrays the ablations take."""
    df, meta = read_table(path, ScoreRow)
    run = Run(
        df["pair_id"].to_numpy(object),
        df["p"].to_numpy(np.float64),
        df["y"].to_numpy(np.float64),
        df["gender_more"].to_numpy(object),
        df["gender_less"].to_numpy(object),
    )
    return run, meta


def ablate(
    scores_path: str | Path,
    sample_size_out: str | Path,
    binning_out: str | Path,
    figure_out: str | Path | None,
    m: MetricsParams,
    a: AblateParams,
) -> tuple[dict, dict]:
    """One run's sample-size and binning ablations (+ the sample-size figure)."""
    run, meta = load_run(scores_path)
    sizes = ablation.sample_size(run, a.sizes, a.draws, a.seed, m.n_bins, m.binning)
    write_json(sample_size_out, SampleSizeReport.model_validate(sizes))
    grid = ablation.binning_grid(run, a.bins)
    write_json(binning_out, grid, BinningReport)
    if figure_out:
        title = f"{meta.get('benchmark', '')} / {meta.get('model', '')}: ECE vs sample size"
        write_figure(figure_out, plots.sample_size_figure(sizes, title))
    return sizes, grid


def neutral(model: str, metrics_paths: dict[str, Path], out: str | Path) -> dict:
    """Occupation vs gender-neutral wording: the metrics of one model on each benchmark variant."""
    rows = {}
    for benchmark, path in metrics_paths.items():
        report = read_json(path, MetricsReport)
        rows[benchmark] = {k: getattr(report, k) for k in NEUTRAL_KEYS} | {"n": report.n}
    write_json(out, rows, NeutralReport)
    log.info("%s: neutral wording over %s -> %s", model, ", ".join(metrics_paths), out)
    return rows


def special_tokens(
    runs: dict[str, tuple[Path, Path, Path, Path]], out: str | Path
) -> dict:
    """The same model with and without special tokens, per benchmark.

    ``runs``: {benchmark: (metrics with, scores with, metrics without, scores without)}.
    """
    result = {}
    for benchmark, (m_with, s_with, m_without, s_without) in runs.items():
        sides = {}
        for side, mpath, spath in (("with", m_with, s_with), ("without", m_without, s_without)):
            report = read_json(mpath, MetricsReport).model_dump()
            scores, _ = read_table(spath, ScoreRow)
            sides[side] = report | ablation.confidence_profile(scores["p"].to_numpy(np.float64))
        result[benchmark] = sides
    write_json(out, result, SpecialTokensReport)
    return result


def compare(
    score_paths: list[Path],
    out: str | Path | None,
    markdown_out: str | Path | None,
    m: MetricsParams,
    c: CompareParams,
) -> dict:
    """Paired bootstrap between every two of ``score_paths`` (score files of one benchmark)."""
    runs: dict[str, Run] = {}
    benchmarks_seen = set()
    for path in score_paths:
        run, meta = load_run(path)
        name = meta.get("model") or Path(path).stem
        while name in runs:  # the same model twice (e.g. two revisions): keep both apart
            name = f"{name}'"
        runs[name] = run
        benchmarks_seen.add(meta.get("benchmark") or Path(path).parent.name)
    benchmark = " / ".join(sorted(benchmarks_seen))
    try:
        result = ablation.compare(runs, c.draws, c.seed, c.ci, c.alpha, m.n_bins, m.binning)
    except ValueError as e:
        raise GeceError(f"cannot compare {', '.join(map(str, score_paths.values()))}: {e}",
                        hint="compare score files of the same benchmark (same pairs, same order)") from e
    result = {"benchmark": benchmark, **result}
    CompareReport.model_validate(result)
    if out:
        write_json(out, result, CompareReport)
    if markdown_out:
        write_text(markdown_out, report.compare_markdown(result))
    return result
# ---------------------------------------------------------------------------- extract
SCORE_COLUMNS = ["pair_id", "row", "sent_more", "sent_less", "y", "bias_type", "targets_more", "targets_less",
                 "gender_more", "gender_less"]
SHARD_BATCHES = 4  # batches per resumable shard


def _fingerprint(**parts: object) -> str:
    """sha256 of the JSON of everything a shard's content depends on."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def shards_dir(out: str | Path) -> Path:
    """Where a run keeps its finished shards: ``<out without .parquet>.shards/`` beside the output."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".shards")


def meta_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".meta.json")


def extract(
    prepared: str | Path, out: str | Path, model_id: str, spec: ModelSpec, settings: ExtractParams = ExtractParams(),
    *, meta_out: str | Path | None = None, on_shard: Callable[[int], None] | None = None,
    loaded: object | None = None,
) -> tuple[pd.DataFrame, ExtractMeta]:
    """artifacts/prepared/<b>.parquet -> artifacts/scores/<b>/<m>.parquet and <m>.meta.json.

    Scores every pair with the model (SPEC §3; :mod:`gece.scoring.engine`). Work is written in
    shards of ``SHARD_BATCHES`` batches under :func:`shards_dir`; a run that is killed and
    started again reuses the finished shards (when inputs, model and settings are unchanged),
    and the final file is byte-identical to an uninterrupted run's. The shards are removed
    once the output is written. ``on_shard(i)`` is called after shard i is written, and
    ``loaded`` is an already loaded :class:`gece.scoring.models.LoadedModel` of ``spec`` (tests,
    benchmarks).
    """
    import resource

    import torch
    import transformers

    import gece
    from gece.progress import Progress
    from gece.scoring import engine, models

    t_start = time.perf_counter()
    prepared, out = Path(prepared), Path(out)
    meta_out = Path(meta_out) if meta_out else meta_path(out)
    resolved = models.resolve(spec)  # a missing package/file/hub id fails before any work
    pairs, pmeta = read_table(prepared, PreparedPair)
    if settings.limit is not None:
        pairs = pairs.head(settings.limit).reset_index(drop=True)
    benchmark = pmeta.get("benchmark", prepared.stem)
    threads = engine.set_threads()
    lm = loaded if loaded is not None else models.load(spec, resolved=resolved)
    if not engine.blas_is_batch_invariant():
        log.warning("MKL is not in its strict reproducible mode (MKL_CBWR=AUTO,STRICT was set too late): "
                    "scores may differ from the naive path in the last bits")
    sides, plans = engine.plans_for(lm.tokenizer, pairs, spec.special_tokens)
    runner = engine.Runner(lm.model, lm.tokenizer.pad_token_id)
    if plans:
        engine.self_check(runner, sides[0], plans[0])
    batch_list = engine.batches(plans, settings.batch_size)
    shard_list = [batch_list[i : i + SHARD_BATCHES] for i in range(0, len(batch_list), SHARD_BATCHES)]

    fp = _fingerprint(prepared=models.sha256_file(prepared), limit=settings.limit, batch_size=settings.batch_size,
                      word_prob=settings.word_prob, spec=spec.model_dump(), weights=lm.weights, dtype=lm.dtype,
                      device=lm.device, attention=lm.attention, torch=torch.__version__,
                      transformers=transformers.__version__, shards=SHARD_BATCHES, engine=engine.ENGINE_VERSION)
    sdir = shards_dir(out)
    manifest = sdir / "manifest.json"
    if sdir.exists() and (not manifest.exists() or read_json(manifest).get("fingerprint") != fp):
        log.info("%s: discarding shards of a run with other inputs", sdir)
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True, exist_ok=True)
    if not manifest.exists():
        write_json(manifest, {"fingerprint": fp, "shards": len(shard_list), "out": str(out)})

    base = pairs[SCORE_COLUMNS]
    stats = engine.BatchStats()
    resumed = 0
    t_score = time.perf_counter()
    with Progress(f"extract {benchmark}/{model_id}", len(plans)) as progress:
        for i, shard in enumerate(shard_list):
            path = sdir / f"shard-{i:05d}.parquet"
            n_pairs = sum(len(b) for b in shard)
            if path.exists():
                _, smeta = read_table(path, ScoreRow)
                stats.add(engine.BatchStats(**json.loads(smeta["stats"])))
                resumed += 1
                progress.advance(n_pairs)
                continue
            recs: list[dict] = []
            shard_stats = engine.BatchStats()
            for scores, st in engine.score(runner, shard, on_batch=progress.advance):
                shard_stats.add(st)
                for s in scores:
                    recs.append({"_index": s.index, **s.record(settings.word_prob)})
            recs.sort(key=lambda r: r["_index"])
            idx = [r.pop("_index") for r in recs]
            frame = pd.concat([base.iloc[idx].reset_index(drop=True), pd.DataFrame(recs)], axis=1)
            write_table(path, frame, ScoreRow, meta={"stats": json.dumps(dataclasses.asdict(shard_stats))})
            stats.add(shard_stats)
            if on_shard:
                on_shard(i)
    seconds = time.perf_counter() - t_score

    parts = [read_table(sdir / f"shard-{i:05d}.parquet", ScoreRow)[0] for i in range(len(shard_list))]
    scores = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(ScoreRow.model_fields))
    order = {pid: k for k, pid in enumerate(pairs["pair_id"])}
    scores = scores.sort_values("pair_id", key=lambda s: s.map(order)).reset_index(drop=True)
    file_meta = {"benchmark": benchmark, "model": model_id, "source": spec.source,
                 "weights_sha256": ",".join(f"{k}={v}" for k, v in lm.weights.items()),
                 "special_tokens": spec.special_tokens, "word_prob": settings.word_prob, "dtype": lm.dtype,
                 "device": lm.device, "attention": lm.attention}
    write_table(out, scores, ScoreRow, meta=file_meta)

    n = len(plans)
    total_flops = engine.flops(lm.model, stats.tokens_fed, stats.head_positions)
    meta = ExtractMeta(
        benchmark=benchmark, model=model_id, source=spec.source, kind=lm.kind, weights=lm.weights, dtype=lm.dtype,
        device=lm.device, attention=lm.attention, special_tokens=spec.special_tokens, word_prob=settings.word_prob,
        batch_size=settings.batch_size, limit=settings.limit, torch=torch.__version__,
        transformers=transformers.__version__, gece=gece.__version__, threads=threads, pairs=n,
        multi_target_pairs=sum(1 for m, l in sides if len(m.words) > 1 or len(l.words) > 1),
        multi_token_targets=sum(1 for pair in sides for side in pair for w in side.words if len(w) > 1),
        continued_pairs=sum(1 for p in plans if p.continued),
        tokens=stats.tokens_fed, tokens_padded=stats.tokens_padded,
        tokens_whole=sum(len(s.ids) for pair in sides for s in pair), head_positions=stats.head_positions,
        flops=total_flops, flops_per_pair=total_flops / n if n else None, shards=len(shard_list),
        shards_resumed=resumed, seconds=round(seconds, 3), load_seconds=round(lm.load_seconds, 3),
        pairs_per_s=round(n / seconds, 3) if n and seconds > 0 else None,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    write_json(meta_out, meta)
    shutil.rmtree(sdir, ignore_errors=True)
    log.info("%s/%s: %d pairs in %.1f s (%.1f pairs/s; %d multi-target pairs, %d multi-token targets, "
             "%d shards resumed; %.1f s in total) -> %s", benchmark, model_id, n, seconds, meta.pairs_per_s or 0,
             meta.multi_target_pairs, meta.multi_token_targets, resumed, time.perf_counter() - t_start, out)
    return scores, meta
