"""The options and terminal tables of the stages that read runs: a score file or ``--benchmark`` (every run
of a benchmark), checked against params.yaml, and a metrics report printed as a table."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plain, plural
from gece.base.terminal_table import Table
from gece.cmd.command import check_id, out
from gece.io.files.outputs import clear_output_dir
from gece.io.paths import data_layout


def benchmark_of(args: argparse.Namespace, params) -> str:
    """``--benchmark`` checked against params.yaml's benchmarks."""
    check_id(args.benchmark, "--benchmark")
    if params is None:
        raise GeceError("--benchmark needs params.yaml (the runs of the benchmark)", hint="run from the repo root")
    if args.benchmark not in params.benchmarks:
        raise GeceError(
            f"--benchmark {args.benchmark!r} is not in benchmarks of {args.params}",
            hint=f"known: {', '.join(params.benchmarks)}",
        )

    data_layout.check_data(params, args.params)
    return args.benchmark


def ci_label(level: float) -> str:
    return f"{level:.0%} CI"


def print_metrics(report: dict, title: str, level: float) -> None:
    """A metrics report as a terminal table: metric, value, interval."""
    table = Table(title=plain(title), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column(ci_label(level), justify="right")
    skip = {"n", "n_bins", "binning", "null_reasons"}
    blocks = {k: v for k, v in report.items() if isinstance(v, dict)}  # SynthBias's referent block: its own table
    for key, value in report.items():
        if key in skip or key in blocks or key.endswith(("_ci_low", "_ci_high")) or isinstance(value, str):
            continue
        lo, hi = report.get(f"{key}_ci_low"), report.get(f"{key}_ci_high")
        ci = f"[{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
        shown = "null" if value is None else (f"{value}" if isinstance(value, int) else f"{value:.4f}")
        table.add_row(plain(key), shown, ci)
    out.print(table)
    if report.get("null_reasons"):
        out.print(f"null: {literal(report['null_reasons'])}", highlight=False)
    for key, block in blocks.items():
        print_metrics(block, f"{title}: {key}", level)


def metrics_title(meta: dict, report: dict) -> str:
    return (
        f"{meta.get('benchmark', '?')} / {meta.get('model', '?')}: {plural(report['n'], 'pair')}, "
        f"{report['n_bins']} {report['binning'].replace('_', '-')} bins"
    )


def rows_table(title: str, label: str, rows: dict[str, dict], keys: list[str]) -> Table:
    table = Table(title=plain(title), title_justify="left")
    table.add_column(label, ids=True)
    for k in keys:
        table.add_column(k, justify="right")
    for name, row in rows.items():
        table.add_row(
            plain(name),
            *(
                "null" if row.get(k) is None else str(row[k]) if isinstance(row[k], int) else f"{row[k]:.4f}"
                for k in keys
            ),
        )
    return table


def add_run_inputs(p: argparse.ArgumentParser, outputs: str) -> None:
    """The input of a stage that reads one score file or every run of a benchmark: the positional ``scores``, or
    ``--benchmark``, whose files go to ``outputs`` (named in its help); :func:`one_input` takes one of them."""
    p.add_argument(
        "scores",
        type=Path,
        nargs="?",
        help="a score file, artifacts/scores/<benchmark>/<model>.parquet (or --benchmark)",
    )
    p.add_argument(
        "--benchmark", help=f"every run of this benchmark (models and references of params.yaml) -> {outputs}"
    )


def run_reads(args: argparse.Namespace) -> list[Path]:
    """What a stage of :func:`add_run_inputs` reads besides its score file: with ``--benchmark``, the benchmark's
    prepared pairs, its score files and the released scores of its references (an id that is no plain name
    reads nothing: ``run`` refuses it)."""
    from gece.io.paths import layout

    if not getattr(args, "benchmark", None):
        return []
    try:
        b = args.benchmark
        return [layout.prepared_path(b), layout.scores_dir(b), data_layout.reference_dir() / b]
    except GeceError:
        return []


def run_writes(args: argparse.Namespace, *folders) -> dict:
    """What a stage of :func:`add_run_inputs` writes besides its output options: with ``--benchmark``, the folder of
    every run's files of each of ``folders`` (``report_layout.metrics_dir``... or ``layout.calibrated_dir``: a
    function of the benchmark, a path under reports/ when it returns text), which it owns whole (the files of runs
    no longer configured are removed)."""
    from gece.cmd.declared import Output
    from gece.io.paths import report_layout

    if not getattr(args, "benchmark", None):
        return {}
    try:
        paths = [f(args.benchmark) for f in folders]
    except GeceError:  # no plain id: run refuses it
        return {}
    return {
        f"the runs' folder {p}": Output(report_layout.report_path(p) if isinstance(p, str) else p, "folder")
        for p in paths
    }


def clear_stale_runs(folder: str | Path, models: Iterable[str], suffixes: tuple[str, ...], option: str) -> None:
    """Keep the files of ``folder`` (a benchmark's folder of per-run outputs, ``<model><suffix>`` for each of
    ``suffixes``) to those of the current runs ``models``: the others, files of runs no longer configured, are
    removed (:func:`gece.io.files.outputs.clear_output_dir`, which refuses a folder holding files gece does not
    write)."""
    folder = Path(folder)
    keep = [folder / f"{m}{s}" for m in models for s in suffixes]
    clear_output_dir(folder, suffixes, option, keep=keep)


def one_input(args: argparse.Namespace, file: str, *file_options: str) -> None:
    """Either a score file (the positional ``file``, with its ``file_options``) or ``--benchmark``, not both."""
    if args.benchmark is not None:
        given = ([str(getattr(args, file))] if getattr(args, file, None) else []) + [
            f"--{o.replace('_', '-')}" for o in file_options if getattr(args, o, None) is not None
        ]
        if given:
            raise GeceError(
                f"{args.command} --benchmark {args.benchmark} also got {', '.join(given)}",
                hint="--benchmark writes every run's files to their places under reports/; pass a score "
                "file (and its output options) or --benchmark NAME, not both",
            )
    elif not getattr(args, file, None):
        raise GeceError(
            f"{args.command} needs a score file or --benchmark NAME",
            hint=f"gece {args.command} artifacts/scores/<benchmark>/<model>.parquet, or gece "
            f"{args.command} --benchmark winobias for every run of a benchmark",
        )
