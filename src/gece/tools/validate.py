"""``gece validate``: check a benchmark CSV as ``gece prepare`` reads it, and list every bad row."""

from __future__ import annotations

import argparse
from pathlib import Path

from gece.base.terminal import literal, plural
from gece.cmd import command
from gece.io.formats import benchmarks
from gece.io.settings.params import params_or_defaults
from gece.io.settings.sections import PrepareParams

# the line `gece --help` shows for this command (read without importing this module)
HELP = "check a benchmark CSV as gece prepare does; exit 2 and list bad rows if invalid"
EXAMPLES = ("gece validate data/benchmarks/winobias.csv", "gece validate my_bench.csv --duplicates error")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("csv", type=Path, help="the benchmark CSV (columns sent_more, sent_less, y, optional bias_type)")
    p.add_argument(
        "--duplicates",
        choices=["keep", "drop", "error"],
        help="repeated pairs: keep, drop or reject, as gece prepare (default: {params:prepare.duplicates})",
    )
    p.add_argument(
        "--allow-duplicates", action="store_true", help="same as --duplicates keep (conflicting labels stay errors)"
    )
    p.set_defaults(inputs=("csv",))


def run(args: argparse.Namespace) -> int:
    benchmarks.benchmark_id(args.csv)
    params = params_or_defaults(args)  # the same prepare.duplicates as gece prepare
    duplicates = "keep" if args.allow_duplicates else args.duplicates
    settings = command.override(params.prepare if params else PrepareParams(), duplicates=duplicates)
    rows, problems, warnings, n = benchmarks.check_benchmark(args.csv, settings.duplicates)
    err = command.err
    for w in warnings:
        err.print(f"[yellow]warning[/]: {literal(w)}", highlight=False)
    if problems:
        err.print(
            f"[red]invalid[/]: {literal(str(args.csv))}: {plural(len(problems), 'problem')} in {plural(n, 'row')}",
            highlight=False,
        )
        for p in problems[: benchmarks.MAX_SHOWN]:
            err.print(f"  - {literal(p)}", highlight=False)
        if len(problems) > benchmarks.MAX_SHOWN:
            err.print(f"  ... and {len(problems) - benchmarks.MAX_SHOWN} more", highlight=False)
        err.print(
            "[cyan]hint[/]: rows are numbered from 1 after the header line; fix the rows listed and run again",
            highlight=False,
        )
        return 2
    command.out.print(f"[green]valid[/]: {literal(str(args.csv))}: {plural(len(rows), 'pair')}", highlight=False)
    return 0
