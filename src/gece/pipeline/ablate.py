"""Stage ablate: ECE against sample size and against the number of bins, every run of a benchmark."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import plain, plural
from gece.base.terminal_table import Table
from gece.cmd import command, run_tables
from gece.io.files.destinations import clear_stale_runs
from gece.io.files.json_writer import write_json
from gece.io.files.readers import write_figure
from gece.io.paths import layout, report_layout
from gece.io.schemas.ablation_reports import BinningReport, SampleSizeReport
from gece.io.settings.params import Params, require_params
from gece.io.settings.params_file import RUN_SECTIONS
from gece.io.settings.sections import AblateParams, MetricsParams
from gece.pipeline import runs
from gece.report import plots
from gece.stats import ablation
from gece.stats.ablation import Run

log = logging.getLogger("gece")


def ablate(
    scores_path: str | Path,
    sample_size_out: str | Path,
    binning_out: str | Path,
    figure_out: str | Path | None,
    metric_settings: MetricsParams,
    ablate_settings: AblateParams,
) -> tuple[dict, dict]:
    """One score file's sample-size and binning ablations (+ the sample-size figure)."""
    run, meta = runs.load_run_file(scores_path)
    return ablate_run(run, meta, sample_size_out, binning_out, figure_out, metric_settings, ablate_settings)


def ablate_run(
    run: Run,
    meta: dict[str, str],
    sample_size_out: str | Path,
    binning_out: str | Path,
    figure_out: str | Path | None,
    metric_settings: MetricsParams,
    ablate_settings: AblateParams,
) -> tuple[dict, dict]:
    """One run's sample-size and binning ablations (+ the sample-size figure)."""
    sizes = ablation.sample_size(
        run,
        ablate_settings.sizes,
        ablate_settings.draws,
        ablate_settings.seed,
        metric_settings.n_bins,
        metric_settings.binning,
    )
    write_json(sample_size_out, SampleSizeReport.model_validate(sizes))
    grid = ablation.binning_grid(run, ablate_settings.bins)
    write_json(binning_out, grid, BinningReport)
    if figure_out:
        title = f"{meta.get('benchmark', '')} / {meta.get('model', '')}: ECE vs sample size"
        write_figure(figure_out, plots.sample_size_figure(sizes, title))
    return sizes, grid


def ablate_benchmark(params: Params, benchmark: str, reports: str | Path = layout.REPORTS) -> dict[str, tuple]:
    """Every run of ``benchmark`` -> ``reports/ablation/sample_size/<b>/<m>.json`` (+ ``.png``) and
    ``reports/ablation/binning/<b>/<m>.json``; files of runs no longer configured are removed."""
    names = runs.runs(params, benchmark)
    for folder, suffixes in (
        (report_layout.sample_size_dir(benchmark), (".json", ".png")),
        (report_layout.binning_dir(benchmark), (".json",)),
    ):
        clear_stale_runs(report_layout.report_path(folder, reports), names, suffixes, "the reports directory")
    results = {}
    for m in names:
        run_, meta = runs.load_run(params, benchmark, m)
        results[m] = ablate_run(
            run_,
            meta,
            report_layout.report_path(report_layout.sample_size_file(benchmark, m), reports),
            report_layout.report_path(report_layout.binning_file(benchmark, m), reports),
            report_layout.report_path(report_layout.sample_size_figure(benchmark, m), reports),
            params.metrics,
            params.ablate,
        )
    return results


# the line `gece --help` shows for this command (read without importing this module)
HELP = "sample-size and binning ablations of a benchmark's runs or of a score file (DVC stage ablate)"
EXAMPLES = (
    "gece ablate --benchmark winobias     # every run of winobias (the DVC stage)",
    "gece ablate artifacts/scores/winobias/smollm2-135m.parquet --sample-size-out /tmp/size.json "
    "--binning-out /tmp/bins.json",
)
DESCRIPTION = (
    "ECE and Gender-ECE over random subsets of N pairs (sizes {params:ablate.sizes}, {params:ablate.draws} "
    "draws each) and for every number of bins ({params:ablate.bins}), equal-width and equal-mass."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    run_tables.add_run_inputs(p, "reports/ablation/sample_size/<b>/ and reports/ablation/binning/<b>/")
    p.add_argument("--sample-size-out", type=Path, help="write the sample-size ablation JSON of the score file here")
    p.add_argument("--binning-out", type=Path, help="write the binning ablation JSON of the score file here")
    p.add_argument("--figure-out", type=Path, help="PNG of mean ± std against the subset size (default: none)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the ablations as JSON ({sample_size, binning}; with --benchmark, per run under runs) instead "
        "of the tables",
    )
    p.set_defaults(
        outputs={"--sample-size-out": "sample_size_out", "--binning-out": "binning_out", "--figure-out": "figure_out"},
        inputs=("scores",),
    )


def _print(title: str, sizes: dict, grid: dict, draws: int) -> None:
    fmt = lambda v: "null" if v is None else f"{v:.4f}"  # noqa: E731
    table = Table(
        title=plain(f"{title}: ECE over random subsets of N pairs ({plural(draws, 'draw')} each)"),
        title_justify="left",
    )
    for col in ("N", "subsets", "ECE mean ± std", "Gender-ECE mean ± std", "Gender-ECE defined"):
        table.add_column(col, justify="right")
    for row in sizes["sizes"]:
        table.add_row(
            str(row["n"]),
            str(row["draws"]),
            f"{row['ece_mean']:.4f} ± {row['ece_std']:.4f}",
            f"{fmt(row['gender_ece_mean'])} ± {fmt(row['gender_ece_std'])}",
            str(row["gender_ece_defined"]),
        )
    table.add_row(f"all {sizes['full']['n']}", "1", fmt(sizes["full"]["ece"]), fmt(sizes["full"]["gender_ece"]), "")
    command.out.print(table)
    table = Table(title=plain("ECE (Gender-ECE) by bins"), title_justify="left")
    table.add_column("M", justify="right")
    for binning in grid:
        table.add_column(binning.replace("_", "-"), justify="right")
    for m in sorted({k for cells in grid.values() for k in cells}, key=int):
        table.add_row(
            m, *(f"{fmt(grid[b][m]['ece'])} ({fmt(grid[b][m]['gender_ece'])})" if m in grid[b] else "" for b in grid)
        )
    command.out.print(table)


reads = run_tables.run_reads  # with --benchmark: the prepared pairs, score files and released scores it reads


def writes(args: argparse.Namespace) -> dict[str, command.Output]:
    """With ``--benchmark B``: B's folders of binning ablations and of sample-size ablations with their figures,
    kept to the current runs."""
    return run_tables.run_folders(
        args,
        lambda b: {
            "the binning ablations": report_layout.report_path(report_layout.binning_dir(b)),
            "the sample-size ablations": report_layout.report_path(report_layout.sample_size_dir(b)),
        },
    )


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say of --benchmark
STAGE = {
    "name": "ablate",
    "about": "the sample-size and binning ablations of every run of a benchmark",
    "argv": ["-q", "ablate", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": [
        *RUN_SECTIONS,
        "metrics.n_bins",
        "metrics.binning",
        "ablate.sizes",
        "ablate.draws",
        "ablate.seed",
        "ablate.bins",
    ],
    "outputs": {"the sample-size ablations": {"kind": "plots", "note": "JSON and the PNG figure of each run"}},
}


def run(args: argparse.Namespace) -> int:
    params = require_params(args)
    if args.benchmark is not None:
        run_tables.one_input(args, "scores", "sample_size_out", "binning_out", "figure_out")
        benchmark = run_tables.benchmark_of(args, params)
        results = ablate_benchmark(params, benchmark)
        if args.json:
            runs_json = {m: {"sample_size": sizes, "binning": grid} for m, (sizes, grid) in results.items()}
            print(json.dumps({"benchmark": benchmark, "runs": runs_json}, indent=2))
        elif not args.quiet:
            for m, (sizes, grid) in results.items():
                _print(f"{benchmark}/{m}", sizes, grid, params.ablate.draws)
        return 0
    run_tables.one_input(args, "scores")
    if args.sample_size_out is None or args.binning_out is None:
        raise GeceError(
            "ablate of a score file needs --sample-size-out and --binning-out",
            hint="name both output files, or use --benchmark NAME for the runs of params.yaml",
        )
    sizes, grid = ablate(
        args.scores, args.sample_size_out, args.binning_out, args.figure_out, params.metrics, params.ablate
    )
    if args.json:
        print(json.dumps({"sample_size": sizes, "binning": grid}, indent=2))
    elif not args.quiet:
        _print(str(args.scores), sizes, grid, params.ablate.draws)
    return 0
