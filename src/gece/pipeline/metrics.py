"""Stage metrics: the calibration metrics and reliability bins of every run of a benchmark, and, on a benchmark a
protocol measures (:mod:`gece.protocols.declarations`), each run's block of the protocol's numbers."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from gece.cmd import command, options, run_tables
from gece.io.files.destinations import clear_stale_runs
from gece.io.files.json_writer import write_json
from gece.io.files.readers import read_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.metric_reports import BinsReport, MetricsReport
from gece.io.schemas.pair_rows import SYNTH_SCHEMAS
from gece.io.settings.params import Params, params_or_defaults
from gece.io.settings.params_file import RUN_SECTIONS
from gece.io.settings.sections import MetricsParams
from gece.pipeline import run_report, runs
from gece.protocols import declarations
from gece.stats import gap, intervals, metrics

log = logging.getLogger("gece")


def run_metrics(
    scores: pd.DataFrame, settings: MetricsParams, pairs: pd.DataFrame | None = None, gap_draws: dict | None = None
) -> tuple[dict, list[dict]]:
    """The metrics report and the paper-convention reliability bins of one score table. ``pairs``: the prepared
    pairs indexed by pair_id (sentences and ``cluster``): the intervals then resample clusters, and the report
    counts the distinct pairs and clusters beside n, with the stereotype share's row-wise and clustered SEs.
    ``gap_draws``: filled with the gender gaps' bootstrap draws (:func:`gece.stats.gap.holm_over_runs`)."""
    r = runs.as_run(scores)
    clusters = None
    if pairs is not None:
        mine = pairs.loc[scores["pair_id"].to_numpy(object)]
        clusters = mine["cluster"].to_numpy(object)
    report = run_report.metrics_report(r.p, r.y, r.gender_more, r.gender_less, settings, clusters, gap_draws)
    if pairs is not None and len(r.p):
        share = (r.p > 0.5).astype(np.float64)
        report |= {
            **run_report.pair_counts(mine).iloc[0].astype(int).to_dict(),
            "pct_stereotype_se_rows": intervals.clustered_se(share),
            "pct_stereotype_se_clustered": intervals.clustered_se(share, clusters),
        }
        report = MetricsReport.model_validate(report).model_dump()
    flagged = scores.get("scored_punct_only")
    if flagged is not None and flagged.notna().any():  # a whole-sentence rule (null under the target rule)
        report = MetricsReport.model_validate(
            report | {"n_punct_only": int(flagged.to_numpy(dtype=np.float64, na_value=0.0).sum())}
        ).model_dump()
    bins = metrics.reliability_table(r.p, r.y, settings.n_bins, settings.binning).records() if len(r.p) else []
    return report, bins


def metrics_stage(
    scores_path: str | Path, out: str | Path | None, bins_out: str | Path | None, settings: MetricsParams
) -> tuple[dict, list[dict], dict[str, str]]:
    """artifacts/scores/<b>/<m>.parquet -> reports/metrics/<b>/<m>.json and reports/bins/<b>/<m>.json."""
    scores, meta = runs.read_run(scores_path)
    report, bins = run_metrics(scores, settings)
    if out:
        write_json(out, MetricsReport.model_validate(report))
    if bins_out:
        write_json(bins_out, bins, BinsReport)
    return report, bins, meta


def metrics_benchmark(
    params: Params, benchmark: str, settings: MetricsParams, reports: str | Path = layout.REPORTS
) -> dict[str, dict]:
    """Every run of ``benchmark`` (:func:`gece.pipeline.runs.runs`) -> ``reports/metrics/<b>/<m>.json`` (with the
    block of the protocol that measures the benchmark, under its name) and ``reports/bins/<b>/<m>.json``; files of
    runs no longer configured are removed. The gender gaps are Holm-corrected over the runs
    (:func:`gece.stats.gap.holm_over_runs`) before anything is written: over the runs that are no check, and the
    checks (:func:`gece.pipeline.runs.checks`) over the checks, so that a check changes no other run's
    numbers."""
    results = {}
    names = runs.runs(params, benchmark)
    for folder in (report_layout.metrics_dir(benchmark), report_layout.bins_dir(benchmark)):
        clear_stale_runs(report_layout.report_path(folder, reports), names, (".json",), "the reports directory")
    entry = params.benchmarks[benchmark]
    pairs = read_table(layout.prepared_path(benchmark), SYNTH_SCHEMAS[entry.synthbias])[0].set_index(
        "pair_id", drop=False
    )
    protocol = declarations.of(entry)
    measure = protocol.measurer(entry, pairs, settings) if protocol is not None else None
    bins, draws = {}, {}
    for m in names:
        scores, _ = runs.load_scores(params, benchmark, m, runs.RUN_COLUMNS)
        draws[m] = {}
        results[m], bins[m] = run_metrics(scores, settings, pairs, draws[m])
        if measure is not None:
            results[m][protocol.name] = measure(scores)
    checks = runs.checks(params)
    for family in ([m for m in names if m not in checks], [m for m in names if m in checks]):
        gap.holm_over_runs([results[m] for m in family], [draws[m] for m in family])
    for m in names:
        write_json(
            report_layout.report_path(report_layout.metrics_file(benchmark, m), reports),
            MetricsReport.model_validate(results[m]),
        )
        write_json(report_layout.report_path(report_layout.bins_file(benchmark, m), reports), bins[m], BinsReport)
    log.info(
        "%s: metrics of %d runs -> %s",
        benchmark,
        len(names),
        report_layout.report_path(report_layout.metrics_dir(benchmark), reports),
    )
    return results


# the line `gece --help` shows for this command (read without importing this module)
HELP = "calibration metrics of a benchmark's runs or of a score file (DVC stage metrics)"
EXAMPLES = (
    "gece metrics --benchmark winobias     # every run of winobias -> reports/metrics/winobias/ (the DVC stage)",
    "gece metrics artifacts/scores/winobias/smollm2-135m.parquet",
    "gece metrics artifacts/scores/winobias/smollm2-135m.parquet --n-bins 15 --binning equal_mass",
    "gece metrics artifacts/scores/winobias/smollm2-135m.parquet --json | jq .ece",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    run_tables.add_run_inputs(p, "reports/metrics/<benchmark>/ and reports/bins/<benchmark>/")
    p.add_argument("--out", type=Path, help="write the metrics JSON of the score file here (default: not written)")
    p.add_argument("--bins-out", type=Path, help="write its reliability bins JSON here (default: not written)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.add_argument(
        "--n-bins",
        type=options.setting(MetricsParams, "n_bins"),
        help="number of bins M (default: {params:metrics.n_bins})",
    )
    p.add_argument(
        "--binning", choices=["equal_width", "equal_mass"], help="bin edges (default: {params:metrics.binning})"
    )
    p.set_defaults(outputs={"--out": "out", "--bins-out": "bins_out"}, inputs=("scores",))


def reads(args: argparse.Namespace) -> list[Path]:
    """With --benchmark: the prepared pairs, score files and released scores it reads
    (:func:`gece.cmd.run_tables.run_reads`), and what the benchmark's protocol reads."""
    return run_tables.run_reads(args) + declarations.benchmark_reads(args)


def writes(args: argparse.Namespace) -> dict[str, command.Output]:
    """With ``--benchmark B``: B's folders of metrics reports and reliability bins, kept to the current runs."""
    return run_tables.run_folders(
        args,
        lambda b: {
            "the metrics reports": report_layout.report_path(report_layout.metrics_dir(b)),
            "the reliability bins": report_layout.report_path(report_layout.bins_dir(b)),
        },
    )


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say of --benchmark
STAGE = {
    "name": "metrics",
    "about": "every run of a benchmark: the scored models (models) and the released scores (references)",
    "argv": ["-q", "metrics", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": [*RUN_SECTIONS, "metrics"],
    "outputs": {
        "the reliability bins": {
            "kind": "plots",
            "note": "bars + diagonal, one column per revision (.dvc/plots/reliability.json)",
            "plot": {
                "template": "reliability",
                "title": "{benchmark}",
                "x": "confidence",
                "y": "accuracy",
                "y_label": "accuracy (share of pairs with y = 1)",
            },
        }
    },
    "notes": {"data/reference": "the released scores of the references"},
}


def run(args: argparse.Namespace) -> int:
    params = params_or_defaults(args)
    settings = command.override(params.metrics if params else MetricsParams(), n_bins=args.n_bins, binning=args.binning)
    if args.benchmark is not None:
        run_tables.one_input(args, "scores", "out", "bins_out")
        benchmark = run_tables.benchmark_of(args, params)
        results = metrics_benchmark(params, benchmark, settings)
        if args.json:
            print(json.dumps(results, indent=2))
        elif not args.quiet:
            for m, report in results.items():
                run_tables.print_metrics(
                    report, run_tables.metrics_title({"benchmark": benchmark, "model": m}, report), settings.ci
                )
        return 0
    run_tables.one_input(args, "scores")
    report, _, meta = metrics_stage(args.scores, args.out, args.bins_out, settings)
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.quiet:
        run_tables.print_metrics(report, run_tables.metrics_title(meta, report), settings.ci)
    return 0
