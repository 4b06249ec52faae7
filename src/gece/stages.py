"""The pipeline stages: read typed inputs, call the pure functions, write typed outputs.

Each function here is one DVC stage (``gece <stage>`` in dvc.yaml) and the only place,
besides :mod:`gece.schemas`, where files are read or written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gece import ablation, benchmarks, calibration, faults, metrics, plots, registry
from gece.report import html as report_html
from gece.report import markdown as report_md
from gece.report import tables as report_tables
from gece.ablation import Run
from gece.errors import GeceError
from gece.files import check_input_dir, check_output, check_output_dir, clear_output_dir, write_bytes
from gece.params import (
    AblateParams,
    CalibrateParams,
    CompareParams,
    ExtractParams,
    MetricsParams,
    ModelSpec,
    Params,
    PrepareParams,
    check_id,
)
from gece.report.tables import ReportData
from gece.schemas import (
    NEUTRAL_KEYS,
    BinningReport,
    BinsReport,
    CalibratedRow,
    CalibrationBinsReport,
    CalibrationReport,
    CompareReport,
    ExtractMeta,
    ExtractTiming,
    MetricsReport,
    NeutralReport,
    PreparedPair,
    ReferenceRow,
    SampleSizeReport,
    ScoreRow,
    SpecialTokensReport,
    SummaryReport,
)
from gece.io import (
    TableWriter,
    iter_table,
    pair_ids,
    parquet_rows,
    read_json,
    read_table,
    require_file,
    validate_records,
    png_size,
    png_text,
    write_figure,
    write_json,
    write_table,
)
from gece.files import check_unique_ids, write_text

log = logging.getLogger("gece")

# where the stages put things (see LAYOUT.md); paths are relative to the repository root
ARTIFACTS = Path("artifacts")
REPORTS = Path("reports")
DATA = Path("data")
DATA_HINT = "pull the data (`gece pull`, or `dvc pull data.dvc`), or fix the id in params.yaml"


def benchmark_csv(benchmark: str) -> Path:
    """``data/benchmarks/<benchmark>.csv``; an id that is no plain name is a GeceError."""
    return DATA / "benchmarks" / f"{check_id(benchmark, 'benchmark')}.csv"


def reference_csv(benchmark: str, model: str) -> Path:
    """``data/reference/<benchmark>/<model>.csv``, the authors' scores of a paper model."""
    return DATA / "reference" / check_id(benchmark, "benchmark") / f"{check_id(model, 'model')}.csv"


def check_data(params: Params, source: str | Path) -> None:
    """Every data file that ``params`` (read from ``source``) names must exist.

    A GeceError names each params key and its missing file (or says that data/ itself is missing).
    """
    named = [(f"benchmarks[{i}] {b!r}", benchmark_csv(b)) for i, b in enumerate(params.benchmarks)]
    named += [(f"paper.models[{j}] {m!r} (paper.benchmarks {b!r})", reference_csv(b, m))
              for b in params.paper.benchmarks for j, m in enumerate(params.paper.models)]
    missing = [f"{key}: {path} not found" for key, path in named if not path.is_file()]
    if not missing:
        return
    if not DATA.exists():
        require_file(named[0][1], hint=DATA_HINT)
    raise GeceError(f"{source}: names {len(missing)} data file(s) that do not exist",
                    problems=missing[:benchmarks.MAX_SHOWN], hint=DATA_HINT)


def scores_path(benchmark: str, model: str) -> Path:
    """``artifacts/scores/<benchmark>/<model>.parquet``; an id that is no plain name is a GeceError."""
    return ARTIFACTS / "scores" / check_id(benchmark, "benchmark") / f"{check_id(model, 'model')}.parquet"


def metrics_path(benchmark: str, model: str) -> Path:
    """``reports/metrics/<benchmark>/<model>.json``; an id that is no plain name is a GeceError."""
    return REPORTS / report_tables.src_metrics(check_id(benchmark, "benchmark"), check_id(model, "model"))


def prepare(csv: str | Path, out: str | Path, settings: PrepareParams = PrepareParams()) -> pd.DataFrame:
    """data/benchmarks/<b>.csv -> artifacts/prepared/<b>.parquet (validated, aligned pairs)."""
    csv = Path(csv)
    name = benchmarks.benchmark_id(csv)
    rows, warnings = benchmarks.load_benchmark(csv, settings.duplicates)
    for w in warnings:
        log.warning(w)
    prepared = benchmarks.prepare_pairs(rows, name)
    write_table(out, prepared, PreparedPair, meta={"benchmark": name, "source": str(csv)})
    multi = int((prepared["n_targets"] > 1).sum())
    log.info(
        "%s: %d pairs (%d with several differing words, %d cloze-last) -> %s",
        name, len(prepared), multi, int((prepared["position"] == "last").sum()), out,
    )
    return prepared


REFERENCE_HINT = "restore the authors' file with `dvc pull data.dvc` (see data/SOURCES.md)"


def read_reference(csv: str | Path) -> pd.DataFrame:
    """The authors' released scores for one benchmark and model, every row checked (``ReferenceRow``)."""
    csv = require_file(csv, hint=f"{REFERENCE_HINT}; the file is data/reference/<benchmark>/<model>.csv",
                       size_limit="csv_bytes")
    try:
        ref = pd.read_csv(csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise GeceError(f"{csv}: not a readable CSV ({e})", hint=REFERENCE_HINT) from e
    missing = [c for c in ReferenceRow.model_fields if c not in ref.columns]
    if missing:
        raise GeceError(f"{csv}: missing column(s) {', '.join(missing)}",
                        hint=f"the file is not one of the authors' result CSVs; {REFERENCE_HINT}")
    validate_records(ref.to_dict(orient="records"), ReferenceRow, str(csv),
                     hint=f"rows are numbered from 1 after the header; {REFERENCE_HINT}")
    return ref


def reference(prepared: str | Path, csv: str | Path, out: str | Path, model: str) -> pd.DataFrame:
    """data/reference/<b>/<m>.csv -> artifacts/scores/<b>/paper-<m>.parquet (the score schema).

    The authors' rows are matched to the prepared pairs by position and checked sentence by
    sentence; their pronoun probabilities become the log-probabilities, their first-token
    logits the logits and their normalized score ``p``.
    """
    check_id(model, "model")
    ref = read_reference(csv)
    pairs, meta = read_table(prepared, PreparedPair)
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


def metrics_report(
    p: np.ndarray, y: np.ndarray, gender_more: np.ndarray, gender_less: np.ndarray, settings: MetricsParams
) -> dict:
    """The metrics report (``MetricsReport``) of scores p against y with the ``metrics`` settings."""
    report = metrics.summarize(
        p, y, gender_more, gender_less, n_bins=settings.n_bins, binning=settings.binning,
        draws=settings.bootstrap, seed=settings.seed, level=settings.ci,
    )
    return MetricsReport.model_validate(report).model_dump()


def as_run(scores: pd.DataFrame) -> Run:
    """A score table (``ScoreRow`` columns) as the typed arrays the pure functions take."""
    return Run(
        scores["pair_id"].to_numpy(object),
        scores["p"].to_numpy(np.float64),
        scores["y"].to_numpy(np.float64),
        scores["gender_more"].to_numpy(object),
        scores["gender_less"].to_numpy(object),
    )


RUN_COLUMNS = ["pair_id", "row", "y", "gender_more", "gender_less", "p"]
READ_ROWS = 8192  # rows validated at a time when only a run's arrays are needed


def read_run(path: str | Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """A score file's ``RUN_COLUMNS``, every row validated, read ``READ_ROWS`` rows at a time.

    Memory holds the few columns the metrics need, never the sentences of the whole file.
    """
    _, meta = parquet_rows(path, ScoreRow)  # within the limits of a file read whole
    parts = [chunk[RUN_COLUMNS] for chunk in iter_table(path, ScoreRow, READ_ROWS)]
    scores = pd.concat(parts, ignore_index=True) if parts else read_table(path, ScoreRow)[0][RUN_COLUMNS]
    check_unique_ids(path, scores["pair_id"])
    return scores, meta


def run_metrics(scores: pd.DataFrame, settings: MetricsParams) -> tuple[dict, list[dict]]:
    """The metrics report and the paper-convention reliability bins of one score table."""
    r = as_run(scores)
    report = metrics_report(r.p, r.y, r.gender_more, r.gender_less, settings)
    bins = metrics.reliability_table(r.p, r.y, settings.n_bins, settings.binning).records() if len(r.p) else []
    return report, bins


def metrics_stage(
    scores_path: str | Path, out: str | Path | None, bins_out: str | Path | None, settings: MetricsParams
) -> tuple[dict, list[dict], dict[str, str]]:
    """artifacts/scores/<b>/<m>.parquet -> reports/metrics/<b>/<m>.json and reports/bins/<b>/<m>.json."""
    scores, meta = read_run(scores_path)
    report, bins = run_metrics(scores, settings)
    if out:
        write_json(out, MetricsReport.model_validate(report))
    if bins_out:
        write_json(bins_out, bins, BinsReport)
    return report, bins, meta


# ----------------------------------------------------------------------- ablations
def load_run(path: str | Path) -> tuple[Run, dict[str, str]]:
    """A score file as the arrays the ablations take."""
    df, meta = read_run(path)
    return as_run(df), meta


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
            sides[side] = report | ablation.confidence_profile(load_run(spath)[0].p)
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
        shared = ablation.shared_pairs(runs)
        paper_runs = [name for name in shared if name.startswith("paper-")]
        result = ablation.compare(shared, c.draws, c.seed, c.ci, c.alpha, m.n_bins, m.binning, power=c.power,
                                  power_runs=paper_runs)
    except ValueError as e:
        raise GeceError(f"cannot compare {', '.join(map(str, score_paths))}: {e}",
                        hint="compare score files of the same benchmark (same pairs, same labels)") from e
    partial = {name: len(r.pair_id) for name, r in runs.items() if len(r.pair_id) != result["n"]}
    if partial:
        log.warning("compare %s: only the %d pairs every run scores are compared (%s)", benchmark, result["n"],
                    ", ".join(f"{k} has {v}" for k, v in partial.items()))
    result = {"benchmark": benchmark, **result}
    CompareReport.model_validate(result)
    if out:
        write_json(out, result, CompareReport)
    if markdown_out:
        write_text(markdown_out, report_md.compare_markdown(result))
    return result


def run_calibration(
    scores: pd.DataFrame, settings: CalibrateParams, metric_settings: MetricsParams, source: str = "the score file"
) -> tuple[dict, pd.DataFrame, list[dict]]:
    """Calibrate one score table under both protocols (SPEC §5).

    Returns the calibration report (``CalibrationReport``), the per-pair calibrated scores
    (``CalibratedRow``) and the reliability bins before and after (``CalibrationBinRecord``).
    Metrics are those of :func:`gece.metrics.summarize` with the ``metrics`` settings, computed
    on the evaluation pairs only: the held-out part of the split, every pair (out of fold)
    under cross-fitting.
    """
    r = as_run(scores)
    p, y, gm, gl = r.p, r.y, r.gender_more, r.gender_less
    counts = {int(c): int((y == c).sum()) for c in (0, 1)}
    if min(counts.values()) < settings.folds:
        missing = [c for c in (1, 0) if counts[c] < 2]
        raise GeceError(
            f"{source}: calibration needs at least {settings.folds} pairs of each label "
            f"(calibrate.folds), got {counts[1]} with y=1 and {counts[0]} with y=0",
            hint=(f"{source} has {'no' if not counts[missing[0]] else 'one'} pair with y={missing[0]}, so no setting "
                  "can calibrate it: calibrate the score file of a benchmark with both labels") if missing else
            f"lower calibrate.folds (or --folds) to at most {min(counts.values())} for {source}, or calibrate "
            "a larger benchmark",
        )
    makers = calibration.factories(settings.histogram_bins)
    try:
        split = calibration.run_split(p, y, settings.methods, settings.fraction, settings.seed, makers)
    except ValueError as e:  # scikit-learn: a part would lack a label
        raise GeceError(f"{source}: cannot split {len(p)} pairs with calibrate.fraction={settings.fraction}: {e}",
                        hint="choose a calibrate.fraction that leaves both labels on each side") from e
    cross = calibration.run_crossfit(p, y, settings.methods, settings.folds, settings.seed, makers)

    bins: list[dict] = []

    def evaluate(protocol: str, method: str, idx: np.ndarray, q: np.ndarray | None) -> dict | None:
        if q is None:
            return None
        table = metrics.reliability_table(q[idx], y[idx], metric_settings.n_bins, metric_settings.binning)
        bins.extend({"protocol": protocol, "method": method, **r} for r in table.records())
        return metrics_report(q[idx], y[idx], gm[idx], gl[idx], metric_settings)

    ev, every = split.eval_idx, np.arange(len(p))
    report = {
        "split": {
            "n_fit": int(split.fit_idx.size), "n_eval": int(ev.size), "fraction": settings.fraction,
            "uncalibrated": evaluate("split", "uncalibrated", ev, p),
            "methods": {
                name: {"status": m.status, "reason": m.reason, "params": m.params,
                       "metrics": evaluate("split", name, ev, m.scores)}
                for name, m in split.methods.items()
            },
        },
        "crossfit": {
            "n_fit": cross.n_fit, "n_eval": len(p), "folds": settings.folds,
            "uncalibrated": evaluate("crossfit", "uncalibrated", every, p),
            "methods": {
                name: {"status": m.status, "reason": m.reason, "params": {"folds": m.params},
                       "fold_status": m.fold_status, "metrics": evaluate("crossfit", name, every, m.scores)}
                for name, m in cross.methods.items()
            },
        },
    }
    report = CalibrationReport.model_validate(report).model_dump()

    out = scores[["pair_id", "row", "y", "gender_more", "gender_less", "p"]].copy()
    split_part = np.full(len(p), "fit", dtype=object)
    split_part[ev] = "eval"
    out["split"] = split_part
    out["fold"] = cross.fold
    for protocol, outcome in (("split", split), ("crossfit", cross)):
        for name in calibration.METHODS:
            m = outcome.methods.get(name)
            out[f"{protocol}_{name}"] = m.scores if m is not None and m.scores is not None else np.nan
    return report, out, bins


def calibrate(
    scores_path: str | Path,
    out: str | Path | None,
    scores_out: str | Path | None,
    bins_out: str | Path | None,
    settings: CalibrateParams,
    metric_settings: MetricsParams,
) -> tuple[dict, dict[str, str]]:
    """artifacts/scores/<b>/<m>.parquet -> reports/calibration/<b>/<m>.json,
    artifacts/calibrated/<b>/<m>.parquet and reports/calibration_bins/<b>/<m>.json."""
    scores, meta = read_table(scores_path, ScoreRow)
    report, calibrated, bins = run_calibration(scores, settings, metric_settings, str(scores_path))
    run = f"{meta.get('benchmark', '?')}/{meta.get('model', scores_path)}"
    for protocol in ("split", "crossfit"):
        for name, m in report[protocol]["methods"].items():
            if m["status"] != "ok":
                log.warning("%s, %s: %s is %s: %s", run, protocol, name, m["status"], m["reason"])
    if out:
        write_json(out, report, CalibrationReport)
    if scores_out:
        write_table(scores_out, calibrated, CalibratedRow,
                    meta={"benchmark": meta.get("benchmark", ""), "model": meta.get("model", ""),
                          "source": str(scores_path)})
    if bins_out:
        write_json(bins_out, bins, CalibrationBinsReport)
    log.info("%s: calibrated %d pairs (%s) -> %s", run, len(scores), ", ".join(settings.methods), out)
    return report, meta


# -------------------------------------------------------------------------- report
REPORT_PACKAGES = ("gece", "numpy", "scipy", "pandas", "pyarrow", "pydantic", "matplotlib", "scikit-learn", "betacal",
                   "torch", "transformers", "gguf", "dvc")


def _package_versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in REPORT_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _code_sha256() -> str:
    """sha256 over the package's Python sources (relative path and bytes, sorted): names the code
    that built the report without the git revision, which changes with every commit."""
    import hashlib

    import gece

    root = Path(gece.__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _data_snapshot(data_dvc: Path) -> dict:
    from gece.params import load_yaml

    if not data_dvc.exists():
        return {"data_md5": "unknown (no data.dvc)", "data_nfiles": "?"}
    hint = "restore it with `git checkout data.dvc`"
    raw = load_yaml(data_dvc, hint=hint)
    outs = (raw.get("outs") if isinstance(raw, dict) else None) or [{}]
    if not isinstance(outs, list) or not isinstance(outs[0], dict):
        raise GeceError(f"{data_dvc}: not a DVC file (no outs: list of mappings)", hint=hint)
    return {"data_md5": outs[0].get("md5", "unknown"), "data_nfiles": outs[0].get("nfiles", "?")}


def _missing_line(what: str, items: list[tuple[str, str]], expected: dict[str, list[str]]) -> str | None:
    """'what: model (all benchmarks); model on b1, b2' from (benchmark, model) pairs."""
    if not items:
        return None
    by_model: dict[str, list[str]] = {}
    for b, m in items:
        by_model.setdefault(m, []).append(b)
    parts = []
    for m, bs in by_model.items():
        everywhere = [b for b, ms in expected.items() if m in ms]
        parts.append(f"{m} (all {len(bs)} benchmarks)" if len(bs) > 1 and sorted(bs) == sorted(everywhere)
                     else f"{m} on {', '.join(bs)}")
    return f"{what}: " + "; ".join(parts)


def _read_optional(path: Path, model=None) -> Any:
    """A JSON report, validated when a schema is given; None when the file does not exist."""
    if not path.exists():
        return None
    data = read_json(path)
    if model is not None:
        read_json(path, model)  # validation only: the tables read the raw JSON, the values as written
    return data


def load_report_data(params: Params, reports_dir: Path, scores_dir: Path, out_dir: Path) -> ReportData:
    """Every JSON report the page is built from; what is missing is listed, not an error."""
    benchmarks = list(dict.fromkeys([*params.benchmarks, *params.paper.benchmarks]))
    if (reports_dir / "metrics").is_dir():
        benchmarks += sorted(d.name for d in (reports_dir / "metrics").iterdir() if d.is_dir() and d.name not in
                             benchmarks)
    paper = [f"paper-{m}" for m in params.paper.models]
    expected = {b: (list(params.models) if b in params.benchmarks else []) + (paper if b in params.paper.benchmarks
                                                                               else []) for b in benchmarks}
    data = report_tables.ReportData(benchmarks=benchmarks, runs={}, special_pairs=dict(params.ablate.special_tokens))
    lost: dict[str, list[tuple[str, str]]] = {k: [] for k in (
        "metrics", "bins", "sample-size ablation", "binning ablation", "calibration", "calibration bins",
        "scores (for the equal-mass diagrams)", "extract metadata")}
    for b in benchmarks:
        found = sorted(p.stem for p in (reports_dir / "metrics" / b).glob("*.json"))
        data.runs[b] = [m for m in expected[b] if m in found] + [m for m in found if m not in expected[b]]
        lost["metrics"] += [(b, m) for m in expected[b] if m not in found]
        for m in data.runs[b]:
            key = (b, m)
            data.metrics[key] = _read_optional(reports_dir / report_tables.src_metrics(b, m), MetricsReport)
            for what, store, rel, schema in (
                ("bins", data.bins, report_tables.src_bins(b, m), BinsReport),
                ("sample-size ablation", data.sample_size, report_tables.src_sample_size(b, m), SampleSizeReport),
                ("binning ablation", data.binning, report_tables.src_binning(b, m), BinningReport),
                ("calibration", data.calibration, report_tables.src_calibration(b, m), CalibrationReport),
                ("calibration bins", data.calibration_bins, report_tables.src_calibration_bins(b, m),
                 CalibrationBinsReport),
            ):
                value = _read_optional(reports_dir / rel, schema)
                if value is None:
                    lost[what].append(key)
                else:
                    store[key] = value
            png = reports_dir / report_tables.src_sample_size(b, m).replace(".json", ".png")
            if png.exists():
                data.sample_size_figures[key] = Path(os.path.relpath(png, out_dir)).as_posix()
            if not (scores_dir / b / f"{m}.parquet").exists():
                lost["scores (for the equal-mass diagrams)"].append(key)
            if not m.startswith("paper-"):
                meta = _read_optional(meta_path(scores_dir / b / f"{m}.parquet"), ExtractMeta)
                if meta is None:
                    lost["extract metadata"].append(key)
                else:
                    data.meta[key] = meta
    for m in params.models:
        rep = _read_optional(reports_dir / report_tables.src_neutral(m), NeutralReport)
        if rep is not None:
            data.neutral[m] = rep
    for m in params.ablate.special_tokens:
        rep = _read_optional(reports_dir / report_tables.src_special_tokens(m), SpecialTokensReport)
        if rep is not None:
            data.special_tokens[m] = rep
    for b in benchmarks:
        rep = _read_optional(reports_dir / report_tables.src_compare(b), CompareReport)
        if rep is not None:
            data.compare[b] = rep

    missing = [_missing_line(what, items, expected) for what, items in lost.items()]
    if params.models and not data.neutral:
        missing.append(f"gender-neutral wording ablation (reports/ablation/neutral/): none of {', '.join(params.models)}")
    else:
        missing.append(_missing_line("gender-neutral wording ablation", [
            ("genderlex", m) for m in params.models if m not in data.neutral], {}))
    missing.append(_missing_line("special-token ablation", [
        ("all benchmarks", m) for m in params.ablate.special_tokens if m not in data.special_tokens], {}))
    lacking = [b for b in benchmarks if len(data.runs[b]) > 1 and b not in data.compare]
    if lacking:
        missing.append(f"model comparison (reports/compare/): {', '.join(lacking)}")
    data.missing = [x for x in missing if x]
    return data


FIGURE_KEY = "gece-inputs"  # PNG text chunk: sha256 of what the figure was drawn from
FIGURE_DPI = 100


def _figure_code() -> str:
    """What every figure also depends on: the drawing code, matplotlib's version and the resolution."""
    import hashlib

    import matplotlib

    return hashlib.sha256(Path(plots.__file__).read_bytes() + f"{matplotlib.__version__}:{FIGURE_DPI}".encode()
                          ).hexdigest()


def _figure_key(code: str, name: str, args: tuple, kwargs: dict) -> str:
    """sha256 of a figure's drawing function and inputs (JSON; tuple keys as lists) and of ``code``."""
    import hashlib

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return [[plain(k), plain(v)] for k, v in x.items()]
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        return x

    text = json.dumps([code, name, plain(args), plain(kwargs)], default=repr, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _draw_figure(task: tuple) -> None:
    path, key, draw, args, kwargs = task
    fig = draw(*args, **kwargs)
    write_figure(path, fig, dpi=FIGURE_DPI, text={FIGURE_KEY: key})
    plots.plt.close(fig)


def _draw_figures(todo: list[tuple]) -> None:
    """Draw the figures of ``todo``, in as many processes as there are CPUs (matplotlib is single-threaded);
    each figure is a function of its task alone, so the bytes do not depend on the number of processes."""
    workers = min(len(todo), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if workers < 2 or len(todo) < 4:
        for task in todo:
            _draw_figure(task)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import sys

    # fork is cheap; a process that has loaded torch (its thread pools do not survive a fork) starts fresh ones
    fork = "fork" in multiprocessing.get_all_start_methods() and "torch" not in sys.modules
    context = multiprocessing.get_context("fork" if fork else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        list(pool.map(_draw_figure, todo, chunksize=max(1, len(todo) // (4 * workers))))


def report_stage(
    params: Params,
    reports_dir: str | Path = REPORTS,
    scores_dir: str | Path = ARTIFACTS / "scores",
    out_dir: str | Path | None = None,
    data_dvc: str | Path = Path("data.dvc"),
) -> dict:
    """reports/** (+ artifacts/scores for the equal-mass diagrams and the confidently wrong
    pairs) -> reports/figures/, reports/tables/*.md and reports/index.html. Returns what was written."""
    reports_dir, scores_dir = Path(reports_dir), Path(scores_dir)
    check_input_dir(reports_dir, "--reports", "the JSON reports")
    check_input_dir(scores_dir, "--scores", "the score files")
    out_dir = check_output_dir(Path(out_dir) if out_dir is not None else reports_dir, "--out")
    data = load_report_data(params, reports_dir, scores_dir, out_dir)
    data.provenance = {**_data_snapshot(Path(data_dvc)), "code_sha256": _code_sha256(),
                       "gece_version": _package_versions().get("gece"), "params": params.model_dump(mode="json"),
                       "packages": _package_versions()}
    clear_output_dir(out_dir / "tables", (".md",), "--out")  # stale tables of removed runs go too
    clear_output_dir(out_dir / "figures", (".png",), "--out", keep=list((out_dir / "figures").rglob("*")))  # checked
    # here; the figures that were not drawn again are removed below

    figures: dict[str, dict] = {"grid": {}, "calibration": {}, "runs": {}, "sizes": {}}
    written: list[str] = []
    reused: list[str] = []
    todo: list[tuple] = []  # figures to draw: (path, key, draw, args, kwargs)
    code = _figure_code()

    def save(rel: str, draw: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        """Draw ``draw(*args, **kwargs)`` into ``rel`` unless the PNG there was drawn from the same inputs
        (its ``FIGURE_KEY`` text chunk): an unchanged figure is not drawn again."""
        key = _figure_key(code, draw.__name__, args, kwargs)
        path = out_dir / rel
        if png_text(path).get(FIGURE_KEY) == key:
            reused.append(rel)
        else:
            todo.append((path, key, draw, args, kwargs))
        written.append(rel)
        return rel

    for key, rel in list(data.sample_size_figures.items()):  # --out elsewhere: the page takes a copy along
        if rel.startswith("../") or Path(rel).is_absolute():
            src = reports_dir / report_tables.src_sample_size(*key).replace(".json", ".png")
            copy = report_tables.fig_sample_size(*key)
            if not (out_dir / copy).exists() or (out_dir / copy).read_bytes() != src.read_bytes():
                write_bytes(out_dir / copy, src.read_bytes())
            written.append(copy)
            data.sample_size_figures[key] = copy
        figures["sizes"][data.sample_size_figures[key]] = png_size(out_dir / data.sample_size_figures[key])

    for b in data.benchmarks:
        panels, entries = [], []
        for m in data.runs[b]:
            key = (b, m)
            scores = scores_dir / b / f"{m}.parquet"
            df = read_table(scores, ScoreRow)[0] if scores.exists() else None
            if df is not None:
                data.examples[key] = report_tables.confident_mistakes(df[list(report_tables.EXAMPLE_COLUMNS)].to_dict("records"))
            if key not in data.bins:
                continue
            rep = data.metrics[key]
            n_bins, binning = rep["n_bins"], rep["binning"]
            label = f"{n_bins} {binning.replace('_', '-')} bins"
            images = [(save(report_tables.fig_reliability(b, m), plots.reliability_figure, data.bins[key], m, rep["ece"],
                            subtitle=f"{b} · {label}"), label)]
            if df is not None:
                other = "equal_mass" if binning == "equal_width" else "equal_width"
                table = metrics.reliability_table(df["p"].to_numpy(np.float64), df["y"].to_numpy(np.float64),
                                                  n_bins, other).records() if len(df) else []
                other_label = f"{n_bins} {other.replace('_', '-')} bins"
                images.append((save(report_tables.fig_reliability(b, m, other), plots.reliability_figure, table, m,
                                    plots.bins_ece(table), subtitle=f"{b} · {other_label}"), other_label))
            if key in data.sample_size_figures:
                images.append((data.sample_size_figures[key], "ECE against sample size"))
            entries.append((m, images))
            panels.append((m, data.bins[key], rep["ece"]))
        if panels:
            figures["grid"][b] = save(report_tables.fig_grid(b), plots.reliability_grid, panels, f"{b}: reliability diagrams")
            figures["runs"][b] = entries
        cal_models = [m for m in data.runs[b] if (b, m) in data.calibration_bins and (b, m) in data.calibration]
        if cal_models:
            methods = [x for x in registry.METHOD_NAMES
                       if any(x in data.calibration[(b, m)].get("split", {}).get("methods", {}) for m in cal_models)]
            cells = {}
            for m in cal_models:
                split = data.calibration[(b, m)].get("split", {})
                records = [r for r in data.calibration_bins[(b, m)] if r.get("protocol") == "split"]
                unc = split.get("uncalibrated") or {}
                cells[(m, "uncalibrated")] = ([r for r in records if r["method"] == "uncalibrated"], unc.get("ece"),
                                              "ok")
                for x in methods:
                    mrep = split.get("methods", {}).get(x, {})
                    cells[(m, x)] = ([r for r in records if r["method"] == x],
                                     (mrep.get("metrics") or {}).get("ece"), mrep.get("status", "missing"))
            figures["calibration"][b] = save(report_tables.fig_calibration(b), plots.calibration_grid, cal_models, methods,
                                             cells, f"{b}: before and after calibration (held-out split)")
    _draw_figures(todo)
    figures["sizes"].update({rel: png_size(out_dir / rel) for rel in written})
    clear_output_dir(out_dir / "figures", (".png",), "--out", keep=[out_dir / rel for rel in written])

    docs, examples = report_tables.build_tables(data), report_tables.examples_docs(data)
    for doc in docs + examples:
        write_text(out_dir / "tables" / f"{doc.name}.md", report_md.doc_markdown(doc))
    write_text(out_dir / "index.html", report_html.render_html(data, docs, figures))
    log.info("report: %d figures (%d unchanged, not redrawn), %d tables -> %s", len(written), len(reused),
             len(docs) + len(examples), out_dir / "index.html")
    for line in data.missing:
        log.warning("report: missing %s", line)
    from gece.findings import findings

    return {"figures": written, "tables": [f"tables/{d.name}.md" for d in docs + examples], "missing": data.missing,
            "html": str(out_dir / "index.html"), "reused": reused, "findings": findings(data)}
def summary_stage(params: Params, reports_dir: str | Path = REPORTS, out: str | Path | None = None):
    """reports/** -> reports/summary.json (the DVC metrics: :func:`gece.findings.summary`); returns
    the summary and the findings (:func:`gece.findings.findings`)."""
    from gece import findings

    reports_dir = Path(reports_dir)
    check_input_dir(reports_dir, "--reports", "the JSON reports")
    data = load_report_data(params, reports_dir, ARTIFACTS / "scores", reports_dir)
    result = findings.summary(data)
    if out:
        write_json(out, result, SummaryReport)
        log.info("summary: %d values -> %s", len(findings.flatten(result)), out)
    return result, findings.findings(data)


# ---------------------------------------------------------------------------- extract
SCORE_COLUMNS = ["pair_id", "row", "sent_more", "sent_less", "y", "bias_type", "targets_more", "targets_less",
                 "gender_more", "gender_less"]
SHARD_BATCHES = 4  # batches per resumable shard
WINDOW_PAIRS = 2048  # pairs read, tokenized, planned and ordered together: memory does not grow with n


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


def timing_path(out: str | Path) -> Path:
    """``<out without .parquet>.timing.json``: the run's timings (ignored by DVC, see .dvcignore)."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".timing.json")


def _layout(n: int, batch_size: int) -> list[tuple[int, int, int]]:
    """The windows of a run of n pairs: (first pair, end, number of shards), fixed before any scoring."""
    out = []
    for lo in range(0, n, WINDOW_PAIRS):
        hi = min(lo + WINDOW_PAIRS, n)
        n_batches = -(-(hi - lo) // batch_size)
        out.append((lo, hi, -(-n_batches // SHARD_BATCHES)))
    return out


def extract(
    prepared: str | Path, out: str | Path, model_id: str, spec: ModelSpec, settings: ExtractParams = ExtractParams(),
    *, meta_out: str | Path | None = None, on_shard: Callable[[int], None] | None = None,
    loaded: object | None = None,
) -> tuple[ExtractMeta, ExtractTiming]:
    """artifacts/prepared/<b>.parquet -> artifacts/scores/<b>/<m>.parquet, <m>.meta.json and <m>.timing.json.

    Scores every pair with the model (SPEC §3; :mod:`gece.scoring.engine`), streaming: pairs are
    read, tokenized, ordered and batched ``WINDOW_PAIRS`` at a time, so memory does not grow
    with the benchmark. Work is written in shards of ``SHARD_BATCHES`` batches under
    :func:`shards_dir`; a run that is killed and started again reuses the finished shards (when
    inputs, model and settings are unchanged), and the final file, assembled window by window
    from the shards, is byte-identical to an uninterrupted run's. The shards are removed once
    the output is written.

    Every pair is tokenized and aligned before any is scored: a target word that cannot be
    scored (no token, or the first token without a BOS) fails the run at once, listing every
    such pair with its row. A pair whose score is NaN or infinite (the model's logits overflowed, e.g. in float16) is
    never written: the run scores every pair, then fails listing the affected pairs, and
    writes no output. ``on_shard(i)`` is called after shard i is written, and ``loaded`` is an
    already loaded :class:`gece.scoring.models.LoadedModel` of ``spec`` (tests, benchmarks).
    """
    import resource

    import torch
    import transformers

    import gece
    from gece.progress import Progress
    from gece.scoring import engine, exact, models

    prepared, out = Path(prepared), Path(out)
    if spec.limit is not None:  # registry.<model>.limit: the smaller of it and extract.limit applies
        settings = settings.model_copy(update={"limit": min(x for x in (settings.limit, spec.limit) if x is not None)})
    meta_out = Path(meta_out) if meta_out else meta_path(out)
    beside = f"remove it, or give OUT another name (the timing file and the shards directory are named after {out})"
    check_output(timing_path(out), "the timing file", beside)
    check_output_dir(shards_dir(out), "the shards directory", beside)
    resolved = models.resolve(spec)  # a missing package/file/hub id fails before any work
    n_rows, pmeta = parquet_rows(prepared, PreparedPair, whole=False)  # streamed
    n = n_rows if settings.limit is None else min(n_rows, settings.limit)
    check_unique_ids(prepared, pair_ids(prepared, n))  # one column read: a repeated pair fails before the model loads
    benchmark = pmeta.get("benchmark", prepared.stem)
    threads = engine.set_threads()
    lm = loaded if loaded is not None else models.load(spec, resolved=resolved)
    backend: Any = engine
    if spec.backend == "vllm":
        from gece.scoring import vllm_backend as backend

        runner = backend.Runner.for_model(lm)
    else:
        if not exact.portable_kernels():
            log.warning("torch runs its %s CPU kernels, not the portable ones (ATEN_CPU_CAPABILITY=default was set "
                        "after torch ran a kernel): scores may differ in the last bits between machines",
                        exact.cpu_kernels())
        runner = engine.Runner(lm.model, lm.tokenizer.pad_token_id)

    first: list = []
    for pairs in iter_table(prepared, PreparedPair, WINDOW_PAIRS, limit=n):  # every pair scorable, before any work
        _, plans = engine.plans_for(lm.tokenizer, pairs, spec.special_tokens, source=str(prepared))
        first = first or plans
    batch_size = settings.batch_size if isinstance(settings.batch_size, int) else backend.auto_batch_size(runner, first)
    del first
    layout = _layout(n, batch_size)

    fp = _fingerprint(prepared=models.sha256_file(prepared), limit=settings.limit, batch_size=batch_size,
                      word_prob=settings.word_prob, spec=spec.model_dump(), weights=lm.weights, dtype=lm.dtype,
                      device=lm.device, attention=lm.attention, torch=torch.__version__,
                      transformers=transformers.__version__, shards=SHARD_BATCHES, window=WINDOW_PAIRS,
                      engine=engine.ENGINE_VERSION)
    sdir = shards_dir(out)
    manifest = sdir / "manifest.json"
    if sdir.exists() and (not manifest.exists() or read_json(manifest).get("fingerprint") != fp):
        log.info("%s: discarding shards of a run with other inputs", sdir)
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True, exist_ok=True)
    if not manifest.exists():
        write_json(manifest, {"fingerprint": fp, "shards": sum(w[2] for w in layout), "out": str(out)})
    faults.checkpoint("extract:loaded")

    stats = engine.BatchStats()
    counts = {"multi_target_pairs": 0, "multi_token_targets": 0, "continued_pairs": 0, "tokens_whole": 0}
    resumed, shard_no, bad = 0, 0, []
    t_score = time.perf_counter()
    with Progress(f"extract {benchmark}/{model_id}", n) as progress:
        for w, pairs in enumerate(iter_table(prepared, PreparedPair, WINDOW_PAIRS, limit=n)):
            if not pairs["row"].is_monotonic_increasing:
                raise GeceError(f"{prepared}: pairs are not in the order of their rows",
                                hint="the file was not written by gece prepare; rerun prepare")
            sides, plans = engine.plans_for(lm.tokenizer, pairs, spec.special_tokens, source=str(prepared))
            if w == 0 and plans and spec.backend == "transformers":
                engine.self_check(runner, sides[0], plans[0])
            counts["multi_target_pairs"] += sum(1 for m, l in sides if len(m.words) > 1 or len(l.words) > 1)
            counts["multi_token_targets"] += sum(1 for pair in sides for side in pair for x in side.words if len(x) > 1)
            counts["continued_pairs"] += sum(1 for pl in plans if pl.continued)
            counts["tokens_whole"] += sum(len(side.ids) for pair in sides for side in pair)
            batch_list = engine.batches(plans, batch_size)
            base = pairs[SCORE_COLUMNS]
            for k in range(0, len(batch_list), SHARD_BATCHES):
                shard = batch_list[k : k + SHARD_BATCHES]
                path = sdir / f"shard-{shard_no:05d}.parquet"
                if path.exists():
                    _, smeta = read_table(path, ScoreRow)
                    stats.add(engine.BatchStats(**json.loads(smeta["stats"])))
                    resumed += 1
                    progress.advance(sum(len(b) for b in shard))
                else:
                    recs, shard_stats = _score_shard(backend, runner, shard, settings.word_prob, progress.advance)
                    idx = [r.pop("_index") for r in recs]
                    frame = pd.concat([base.iloc[idx].reset_index(drop=True), pd.DataFrame(recs)], axis=1)
                    broken = [f"pair {pid} (row {row}): {', '.join(fields)}" for pid, row, fields in
                              zip(frame["pair_id"], frame["row"], map(engine.non_finite, recs), strict=True) if fields]
                    stats.add(shard_stats)
                    if broken:  # never written, so a rerun scores them again
                        bad += broken
                    else:
                        write_table(path, frame, ScoreRow, meta={"stats": json.dumps(dataclasses.asdict(shard_stats))})
                        faults.checkpoint(f"extract:shard:{shard_no}")
                        if on_shard:
                            on_shard(shard_no)
                shard_no += 1
    seconds = time.perf_counter() - t_score
    if bad:
        raise GeceError(
            f"{prepared}: {model_id} gave NaN or infinite scores for {len(bad)} of {n} pairs; no output was written",
            problems=bad[:20] + ([f"... and {len(bad) - 20} more"] if len(bad) > 20 else []),
            hint="the model's logits overflowed: in float16 use dtype: bfloat16 or float32 for this model under "
            "registry in params.yaml; in float32 the weights themselves are broken",
        )

    file_meta = {"benchmark": benchmark, "model": model_id, "source": spec.source,
                 "weights_sha256": ",".join(f"{k}={v}" for k, v in lm.weights.items()),
                 "special_tokens": spec.special_tokens, "word_prob": settings.word_prob, "dtype": lm.dtype,
                 "device": lm.device, "attention": lm.attention}
    with TableWriter(out, ScoreRow, file_meta) as writer:  # window by window, in the prepared order
        first = 0
        for _, _, n_shards in layout:
            parts = [read_table(sdir / f"shard-{i:05d}.parquet", ScoreRow)[0] for i in range(first, first + n_shards)]
            writer.write(pd.concat(parts, ignore_index=True).sort_values("row", kind="stable", ignore_index=True))
            first += n_shards
        if not layout:
            writer.write(pd.DataFrame(columns=list(ScoreRow.model_fields)))

    total_flops = engine.flops(lm.model, stats.tokens_fed, stats.head_positions) if backend is engine else None
    meta = ExtractMeta(
        benchmark=benchmark, model=model_id, backend=spec.backend, source=spec.source, kind=lm.kind, weights=lm.weights,
        dtype=lm.dtype,
        device=lm.device, attention=lm.attention, special_tokens=spec.special_tokens, word_prob=settings.word_prob,
        batch_size=settings.batch_size, limit=settings.limit, torch=torch.__version__,
        transformers=transformers.__version__, gece=gece.__version__, pairs=n, **counts,
        tokens=stats.tokens_fed, tokens_padded=stats.tokens_padded, head_positions=stats.head_positions,
        flops=total_flops, flops_per_pair=total_flops / n if n and total_flops is not None else None, shards=shard_no,
    )
    timing = ExtractTiming(
        benchmark=benchmark, model=model_id, pairs=n, threads=threads, shards_resumed=resumed, batch_size=batch_size,
        oom_retries=runner.oom_retries,
        seconds=round(seconds, 3), load_seconds=round(lm.load_seconds, 3),
        pairs_per_s=round(n / seconds, 3) if n and seconds > 0 else None,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    write_json(meta_out, meta)
    write_json(timing_path(out), timing)
    shutil.rmtree(sdir, ignore_errors=True)
    log.info("%s/%s: %d pairs in %.1f s (%.1f pairs/s; %d multi-target pairs, %d multi-token targets, "
             "%d shards resumed; peak RSS %.0f MB) -> %s", benchmark, model_id, n, seconds, timing.pairs_per_s or 0,
             meta.multi_target_pairs, meta.multi_token_targets, resumed, timing.peak_rss_mb, out)
    return meta, timing


def try_id(source: str) -> str:
    """A model id for a source that is not in the registry: ``try-`` and the last part of the path or hub id
    (``HuggingFaceTB/SmolLM2-135M`` -> ``try-smollm2-135m``)."""
    import re

    name = source.removeprefix("package:").rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower().removesuffix(".gguf")).strip("-.") or "model"
    return f"try-{name}"


def try_model(model: str, benchmark: str, params: Params | None, limit: int | None,
              special_tokens: bool | None = None, out: str | Path | None = None
              ) -> tuple[dict, ExtractMeta, ExtractTiming]:
    """``gece try``: score the first ``limit`` pairs of one benchmark with a model given by registry id, local
    path, hub id or ``package:`` source, and compute its metrics; params.yaml is read, never changed.

    The prepared benchmark is ``artifacts/prepared/<benchmark>.parquet`` when it exists, else it is prepared
    from ``data/benchmarks/<benchmark>.csv`` into a temporary directory; the score file goes to ``out`` (kept)
    or into that temporary directory (removed).
    """
    import tempfile

    from pydantic import ValidationError

    check_id(benchmark, "--benchmark")
    if params is not None and model in params.registry:
        model_id, spec = model, params.registry[model]
    else:
        try:
            spec = ModelSpec(source=model)
        except ValidationError as e:
            raise GeceError(f"{model!r} is not a model source: {e.errors()[0]['msg']}",
                            hint="give a registry id, a local model directory or .gguf file, a Hugging Face hub id "
                            "or package:<distribution>==<version>") from e
        model_id = try_id(model)
    if special_tokens is not None:
        spec = spec.model_copy(update={"special_tokens": special_tokens})
    settings = (params.extract if params else ExtractParams()).model_copy(update={"limit": limit})
    with tempfile.TemporaryDirectory(prefix="gece-try-") as tmp:
        prepared = ARTIFACTS / "prepared" / f"{benchmark}.parquet"
        if not prepared.exists():
            prepared = Path(tmp) / f"{benchmark}.parquet"
            prepare(benchmark_csv(benchmark), prepared, params.prepare if params else PrepareParams())
        scores = Path(out) if out else Path(tmp) / benchmark / f"{model_id}.parquet"
        meta, timing = extract(prepared, scores, model_id, spec, settings)
        df, _ = read_run(scores)
        report, _ = run_metrics(df, params.metrics if params else MetricsParams())
    return report, meta, timing


def _score_shard(backend, runner, shard, word_prob: str, on_batch: Callable[[int], None]) -> tuple[list[dict], Any]:
    """Score one shard's batches with a backend module (:mod:`gece.scoring.engine` or
    :mod:`gece.scoring.vllm_backend`): records (with ``_index``, the pair's place in its window) sorted by index."""
    from gece.scoring import engine

    recs: list[dict] = []
    shard_stats = engine.BatchStats()
    for scores, st in backend.score(runner, shard, on_batch=on_batch):
        shard_stats.add(st)
        recs += [{"_index": sc.index, **sc.record(word_prob)} for sc in scores]
    recs.sort(key=lambda r: r["_index"])
    return recs, shard_stats
