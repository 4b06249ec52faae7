"""Stage calibrate: post-hoc calibration of every run of a benchmark, evaluated on held-out pairs.

With ``--benchmark`` (the DVC stage), a run whose three files the last recorded run wrote from the same content is
not calibrated again: each run's calibrated scores carry a :func:`fingerprint` (the scores, the run, the settings
and the hash of this module's import closure), and when it equals the one of the file that run recorded
(``dvc.lock`` and DVC's cache, :func:`gece.pipeline.reuse.previous_outputs`), the three files are copied from there,
byte for byte. So an edit that cannot change a calibration (a comment anywhere, any edit of ``cli.py`` or the help)
costs a few seconds here (docs/dvc.md, "Reuse by content").
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from gece.base.errors import GeceError
from gece.base.terminal import literal, plain, plural
from gece.base.terminal_table import Table
from gece.cmd import command, options, run_tables
from gece.code import closure
from gece.io.files.destinations import clear_stale_runs
from gece.io.files.json_reader import read_json
from gece.io.files.json_writer import write_json
from gece.io.files.readers import parquet_rows, read_table
from gece.io.files.writer import write_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.calibration_files import CalibratedRow, CalibrationBinsReport, CalibrationReport
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.params import CalibrateParams, Params, params_or_defaults
from gece.io.settings.params_file import RUN_SECTIONS
from gece.io.settings.sections import MetricsParams
from gece.pipeline import reuse, run_report, runs
from gece.stats import calibration, metrics

log = logging.getLogger("gece")

FINGERPRINT = "fingerprint"  # the calibrated scores' metadata key (gece.fingerprint) holding :func:`fingerprint`


@functools.cache
def computation_code() -> str:
    """:func:`gece.code.closure.code_hash` of this module's import closure, docstrings left out: the code a run's
    calibration files come from (``cli.py`` and the help are outside it)."""
    return closure.code_hash(closure.closure([__name__]), docstrings=False)


def fingerprint(
    scores: pd.DataFrame, meta: dict[str, str], source: str, settings: CalibrateParams, metric_settings: MetricsParams
) -> str:
    """sha256 of what a run's three calibration files are a function of: its scores (every value, as Arrow's IPC
    stream writes them), its metadata and source, the calibrate and metrics settings, and :func:`computation_code`."""
    sink = pa.BufferOutputStream()
    table = pa.Table.from_pandas(scores)
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    h = hashlib.sha256(sink.getvalue().to_pybytes())
    given = [
        meta,
        source,
        settings.model_dump(mode="json"),
        metric_settings.model_dump(mode="json"),
        computation_code(),
    ]
    h.update(json.dumps(given, sort_keys=True).encode())
    return h.hexdigest()


def recorded(outs: tuple[Path, Path, Path], previous: list[dict[str, Path]], key: str) -> bool:
    """Copy a run's report, calibrated scores and bins (``outs``) from the last recorded run (``previous``: those
    of their three folders) when its calibrated scores carry the fingerprint ``key``."""
    old = [found.get(out.name) for out, found in zip(outs, previous, strict=True)]
    if not all(old) or parquet_rows(old[1], CalibratedRow)[1].get(FINGERPRINT) != key:  # type: ignore[arg-type]
        return False
    for src, out in zip(old, outs, strict=True):
        reuse.restore({out.name: src}, out.parent)  # type: ignore[dict-item]
    return True


def label_counts(y: np.ndarray) -> dict[int, int]:
    """The pairs of each label y (0 and 1)."""
    return {int(c): int((y == c).sum()) for c in (0, 1)}


def too_few(y: np.ndarray, settings: CalibrateParams) -> str | None:
    """Why pairs with labels ``y`` cannot be cross-fitted: both labels, but fewer than ``calibrate.folds`` pairs
    of one (a fold would lack it); None when they can (or when every pair has one label: each method is then
    reported failed, :func:`run_calibration`)."""
    counts = label_counts(y)
    if min(counts.values()) == 0 or min(counts.values()) >= settings.folds:
        return None
    return (
        f"calibration needs at least {settings.folds} pairs of each label (calibrate.folds), got {counts[1]} with "
        f"y=1 and {counts[0]} with y=0"
    )


def run_calibration(
    scores: pd.DataFrame, settings: CalibrateParams, metric_settings: MetricsParams, source: str = "the score file"
) -> tuple[dict, pd.DataFrame, list[dict]]:
    """Calibrate one score table under both protocols (docs/metrics.md, "Calibration").

    Returns the calibration report (``CalibrationReport``), the per-pair calibrated scores
    (``CalibratedRow``) and the reliability bins before and after (``CalibrationBinRecord``).
    Metrics are those of :func:`gece.stats.metrics.summarize` with the ``metrics`` settings, computed
    on the evaluation pairs only: the held-out part of the split, every pair (out of fold)
    under cross-fitting.
    """
    r = runs.as_run(scores)
    p, y, gm, gl = r.p, r.y, r.gender_more, r.gender_less
    counts = label_counts(y)
    if min(counts.values()) == 0:
        log.warning(
            "%s: every pair has y=%d, so no calibration map can be fitted (each method is reported "
            "failed; the uncalibrated metrics are kept)",
            source,
            int(y[0]) if len(y) else 1,
        )
    elif (short := too_few(y, settings)) is not None:
        raise GeceError(
            f"{source}: {short}",
            hint=f"lower calibrate.folds (or --folds) to at most {min(counts.values())} for {source}, or calibrate "
            "a larger benchmark",
        )
    makers = calibration.factories(settings.histogram_bins)
    try:
        split = calibration.run_split(p, y, settings.methods, settings.fraction, settings.seed, makers)
    except ValueError as e:  # scikit-learn: a part would lack a label
        raise GeceError(
            f"{source}: cannot split {len(p)} pairs with calibrate.fraction={settings.fraction}: {e}",
            hint="choose a calibrate.fraction that leaves both labels on each side",
        ) from e
    cross = calibration.run_crossfit(p, y, settings.methods, settings.folds, settings.seed, makers)

    bins: list[dict] = []

    def evaluate(protocol: str, method: str, idx: np.ndarray, q: np.ndarray | None) -> dict | None:
        if q is None:
            return None
        table = metrics.reliability_table(q[idx], y[idx], metric_settings.n_bins, metric_settings.binning)
        bins.extend({"protocol": protocol, "method": method, **r} for r in table.records())
        return run_report.metrics_report(q[idx], y[idx], gm[idx], gl[idx], metric_settings)

    ev, every = split.eval_idx, np.arange(len(p))
    report = {
        "split": {
            "n_fit": int(split.fit_idx.size),
            "n_eval": int(ev.size),
            "fraction": settings.fraction,
            "uncalibrated": evaluate("split", "uncalibrated", ev, p),
            "methods": {
                name: {
                    "status": m.status,
                    "reason": m.reason,
                    "params": m.params,
                    "metrics": evaluate("split", name, ev, m.scores),
                }
                for name, m in split.methods.items()
            },
        },
        "crossfit": {
            "n_fit": cross.n_fit,
            "n_eval": len(p),
            "folds": settings.folds,
            "uncalibrated": evaluate("crossfit", "uncalibrated", every, p),
            "methods": {
                name: {
                    "status": m.status,
                    "reason": m.reason,
                    "params": {"folds": m.params},
                    "fold_status": m.fold_status,
                    "metrics": evaluate("crossfit", name, every, m.scores),
                }
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
    """A score file -> its calibration report, calibrated scores and bins (each written where given)."""
    scores, meta = read_table(scores_path, ScoreRow)
    report = calibrate_scores(scores, meta, str(scores_path), out, scores_out, bins_out, settings, metric_settings)
    return report, meta


def calibrate_scores(
    scores: pd.DataFrame,
    meta: dict[str, str],
    source: str,
    out: str | Path | None,
    scores_out: str | Path | None,
    bins_out: str | Path | None,
    settings: CalibrateParams,
    metric_settings: MetricsParams,
    key: str | None = None,
) -> dict:
    """One run's scores (read from ``source``) -> ``reports/calibration/<b>/<m>.json``,
    ``artifacts/calibrated/<b>/<m>.parquet`` (its metadata holding the fingerprint ``key``, when given) and
    ``reports/calibration_bins/<b>/<m>.json`` (each where given)."""
    report, calibrated, bins = run_calibration(scores, settings, metric_settings, source)
    run = f"{meta.get('benchmark', '?')}/{meta.get('model', source)}"
    one_label = scores["y"].nunique() < 2  # said once by run_calibration
    for protocol in ("split", "crossfit"):
        for name, m in report[protocol]["methods"].items():
            if m["status"] != "ok" and not one_label:
                log.warning("%s, %s: %s is %s: %s", run, protocol, name, m["status"], m["reason"])
    if out:
        write_json(out, report, CalibrationReport)
    if scores_out:
        write_table(
            scores_out,
            calibrated,
            CalibratedRow,
            meta={"benchmark": meta.get("benchmark", ""), "model": meta.get("model", ""), "source": source}
            | ({FINGERPRINT: key} if key else {}),
        )
    if bins_out:
        write_json(bins_out, bins, CalibrationBinsReport)
    log.info("%s: calibrated %d pairs (%s) -> %s", run, len(scores), ", ".join(settings.methods), out)
    return report


def calibrate_benchmark(
    params: Params,
    benchmark: str,
    settings: CalibrateParams,
    metric_settings: MetricsParams,
    reports: str | Path = layout.REPORTS,
) -> dict[str, dict]:
    """Every run of ``benchmark`` -> ``reports/calibration/<b>/<m>.json``, ``artifacts/calibrated/<b>/<m>.parquet``
    and ``reports/calibration_bins/<b>/<m>.json``, or the last recorded run's three files when they come from the
    same content (:func:`recorded`); files of runs no longer configured are removed. A check
    (:func:`gece.pipeline.runs.checks`) whose slice cannot be cross-fitted (:func:`too_few`) is skipped
    with a warning and gets no files."""
    names = runs.runs(params, benchmark)
    folders = (
        (report_layout.report_path(report_layout.calibration_dir(benchmark), reports), ".json"),
        (layout.calibrated_dir(benchmark), ".parquet"),
        (report_layout.report_path(report_layout.calibration_bins_dir(benchmark), reports), ".json"),
    )
    for folder, suffix in folders:
        clear_stale_runs(folder, names, (suffix,), "the output directory")
    previous = [reuse.previous_outputs(folder) for folder, _ in folders]
    results, checks = {}, runs.checks(params)
    for m in names:
        scores, meta = runs.load_scores(params, benchmark, m)
        source = meta["source"] if runs.is_reference(params, m) else str(layout.scores_path(benchmark, m))
        outs = (
            report_layout.report_path(report_layout.calibration_file(benchmark, m), reports),
            layout.calibrated_path(benchmark, m),
            report_layout.report_path(report_layout.calibration_bins_file(benchmark, m), reports),
        )
        short = too_few(runs.as_run(scores).y, settings) if m in checks else None
        if short is not None:  # a check's slice: skipped with a note (the page says so), no files, none left over
            log.warning("%s/%s: a check (params.yaml registry.%s), not calibrated: %s", benchmark, m, m, short)
            for out in outs:
                out.unlink(missing_ok=True)
            continue
        key = fingerprint(scores, meta, source, settings, metric_settings)
        if recorded(outs, previous, key):
            log.info("%s/%s: unchanged since the recorded run, reused -> %s", benchmark, m, outs[0])
            results[m] = read_json(outs[0])  # the report as written (for the terminal)
            continue
        results[m] = calibrate_scores(scores, meta, source, *outs, settings, metric_settings, key)
    return results


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "post-hoc calibration of a benchmark's runs or of a score file, evaluated on held-out pairs (DVC stage calibrate)"
)
EXAMPLES = (
    "gece calibrate --benchmark winobias    # every run of winobias (the DVC stage)",
    "gece calibrate artifacts/scores/winobias/smollm2-135m.parquet",
    "gece calibrate artifacts/scores/winobias/smollm2-135m.parquet --methods isotonic platt --folds 10",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    run_tables.add_run_inputs(p, "reports/calibration/<b>/, artifacts/calibrated/<b>/, reports/calibration_bins/<b>/")
    p.add_argument("--out", type=Path, help="write the calibration report JSON here (default: not written)")
    p.add_argument(
        "--scores-out", type=Path, help="write the per-pair calibrated scores (Parquet) here (default: not written)"
    )
    p.add_argument(
        "--bins-out", type=Path, help="write the reliability bins before/after (JSON) here (default: not written)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    p.add_argument(
        "--methods",
        nargs="+",
        choices=list(calibration.METHODS),
        help="calibration methods (default: {params:calibrate.methods})",
    )
    p.add_argument(
        "--fraction",
        type=options.setting(CalibrateParams, "fraction"),
        help="split protocol: share of pairs used for fitting (default: {params:calibrate.fraction})",
    )
    p.add_argument(
        "--folds",
        type=options.setting(CalibrateParams, "folds"),
        help="cross-fitting: number of folds (default: {params:calibrate.folds})",
    )
    p.add_argument(
        "--seed",
        type=options.setting(CalibrateParams, "seed"),
        help="seed of the split and the folds (default: {params:calibrate.seed})",
    )
    p.set_defaults(outputs={"--out": "out", "--scores-out": "scores_out", "--bins-out": "bins_out"}, inputs=("scores",))


def _print_report(report: dict, meta: dict) -> None:
    keys = ("ece", "ece_toplabel", "gender_ece", "brier", "accuracy")
    fmt = lambda v: "null" if v is None else f"{v:.4f}"  # noqa: E731
    for protocol, rep in report.items():
        title = (
            f"{meta.get('benchmark', '?')} / {meta.get('model', '?')}, {protocol}: "
            f"fit on {rep['n_fit']}, evaluated on {plural(rep['n_eval'], 'pair')}"
        )
        table = Table(title=plain(title), title_justify="left")
        table.add_column("method", ids=True)
        table.add_column("status")
        for k in keys:
            table.add_column(k, justify="right")
        table.add_row("uncalibrated", "", *(fmt(rep["uncalibrated"][k]) for k in keys))
        for name, m in rep["methods"].items():
            values = ("null",) * len(keys) if m["metrics"] is None else (fmt(m["metrics"][k]) for k in keys)
            style = {"ok": "green", "degenerate": "yellow", "failed": "red"}[m["status"]]
            table.add_row(plain(name), f"[{style}]{literal(m['status'])}[/]", *values)
        command.out.print(table)
        for name, m in rep["methods"].items():
            if m["reason"]:
                command.out.print(f"  {name}: {literal(m['reason'])}", highlight=False)


reads = run_tables.run_reads  # with --benchmark: the prepared pairs, score files and released scores it reads


def writes(args: argparse.Namespace) -> dict[str, command.Output]:
    """With ``--benchmark B``: B's folders of calibrated scores, calibration reports and reliability bins before and
    after, kept to the current runs."""
    return run_tables.run_folders(
        args,
        lambda b: {
            "the calibrated scores": layout.calibrated_dir(b),
            "the calibration reports": report_layout.report_path(report_layout.calibration_dir(b)),
            "the reliability bins": report_layout.report_path(report_layout.calibration_bins_dir(b)),
        },
    )


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say of --benchmark
STAGE = {
    "name": "calibrate",
    "about": "post-hoc calibration of every run of a benchmark, evaluated on held-out pairs",
    "argv": ["-q", "calibrate", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": [*RUN_SECTIONS, "calibrate", "metrics"],
    "outputs": {
        "the reliability bins": {
            "kind": "plots",
            "note": "one diagram per method (.dvc/plots/reliability_methods.json)",
            "plot": {
                "template": "reliability_methods",
                "title": "{benchmark} calibrated (split)",
                "x": "confidence",
                "y": "accuracy",
                "y_label": "accuracy (share of pairs with y = 1)",
            },
        }
    },
}


def run(args: argparse.Namespace) -> int:
    params = params_or_defaults(args)
    settings = command.override(
        params.calibrate if params else CalibrateParams(),
        methods=args.methods,
        fraction=args.fraction,
        folds=args.folds,
        seed=args.seed,
    )
    metric_settings = params.metrics if params else MetricsParams()
    if args.benchmark is not None:
        run_tables.one_input(args, "scores", "out", "scores_out", "bins_out")
        benchmark = run_tables.benchmark_of(args, params)
        results = calibrate_benchmark(params, benchmark, settings, metric_settings)
        if args.json:
            print(json.dumps(results, indent=2))
        elif not args.quiet:
            for m, report in results.items():
                _print_report(report, {"benchmark": benchmark, "model": m})
        return 0
    run_tables.one_input(args, "scores")
    report, meta = calibrate(args.scores, args.out, args.scores_out, args.bins_out, settings, metric_settings)
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.quiet:
        _print_report(report, meta)
    return 0
