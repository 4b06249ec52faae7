"""The options and terminal tables of the stages that read runs: a score file or ``--benchmark`` (every run
of a benchmark), checked against params.yaml, and a metrics report printed as a table."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plain, plural
from gece.base.terminal_table import Table
from gece.cmd.command import Output, check_id, out
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
    blocks = {k: v for k, v in report.items() if isinstance(v, dict)}  # a protocol's block: its own table
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
    prepared pairs, its score files and the released scores (``data/reference``, of which the benchmark's folder: the
    references' runs) (an id that is no plain name reads nothing: ``run`` refuses it)."""
    from gece.io.paths import layout

    if not getattr(args, "benchmark", None):
        return []
    try:
        b = args.benchmark
        return [
            layout.prepared_path(b),
            layout.scores_dir(b),
            data_layout.reference_dir(),
            data_layout.reference_dir() / b,
        ]
    except GeceError:
        return []


def run_folders(args: argparse.Namespace, folders: Callable[[str], dict[str, Path]]) -> dict[str, Output]:
    """With ``--benchmark B``: ``folders(B)`` (label -> a folder of every run's files), each written whole
    (``folder`` outputs, :class:`gece.cmd.command.Output`); nothing for a score file or an id that is no plain name
    (``run`` refuses it)."""
    if not getattr(args, "benchmark", None):
        return {}
    try:
        found = folders(check_id(args.benchmark, "--benchmark"))
        return {label: Output(path, "folder") for label, path in found.items()}
    except GeceError:
        return {}


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
