"""What the command modules share: params loading, options checked like params.yaml, terminal tables.

Each ``gece`` subcommand is a module (``gece.cli.COMMANDS``) with ``add_arguments(parser)``
and ``run(args) -> int``; this module holds the parts they have in common, so a command's
module stays about its stage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gece.errors import GeceError
from gece.terminal import Table, console, literal, plain, plural

out = console()  # data is printed through literal() or plain(): never as markup, emoji or escape codes
err = console(stderr=True)


def params_or_defaults(args: argparse.Namespace):
    """params.yaml when it exists (or --params was given), else None: the built-in defaults apply."""
    from gece.io.params import load_params

    path = Path(args.params)
    if path.exists() or args.params != "params.yaml":
        return load_params(path)
    return None


def require_params(args: argparse.Namespace):
    """params.yaml (or --params): a GeceError when it is missing or invalid."""
    from gece.io.params import load_params

    return load_params(args.params)


def check_id(value: str, option: str) -> str:
    """``value`` of a command-line ``option`` if it is a valid benchmark or model id, else a GeceError."""
    from gece.io.model_entry import check_id as check

    return check(value, option)


def override(settings, **given):
    """``settings`` (a params section) with the command-line options that were given, validated
    like params.yaml: an option outside its bounds is an error, not silently accepted."""
    from pydantic import ValidationError

    from gece.io.params import type_note

    values = {k: v for k, v in given.items() if v is not None}
    if not values:
        return settings
    try:
        return type(settings).model_validate({**settings.model_dump(), **values})
    except ValidationError as e:
        options = [f"--{str(er['loc'][0]).replace('_', '-')}" if er["loc"] else "options" for er in e.errors()]
        problems = [
            f"{option}: {er['msg']} (got {er.get('input')!r}){type_note(er)}"
            for option, er in zip(options, e.errors(), strict=True)
        ]
        section = type(settings).__name__.removesuffix("Params").lower()
        raise GeceError(
            f"invalid command-line option {', '.join(dict.fromkeys(options))}",
            problems=problems,
            hint=f"pass a value within the bounds shown, or leave the option out to use {section} "
            "settings of params.yaml (see `gece COMMAND --help` and docs/pipeline.md)",
        ) from e


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
    from gece.io import layout

    layout.check_data(params, args.params)
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
    for key, value in report.items():
        if key in skip or key.endswith(("_ci_low", "_ci_high")) or isinstance(value, str):
            continue
        lo, hi = report.get(f"{key}_ci_low"), report.get(f"{key}_ci_high")
        ci = f"[{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
        shown = "null" if value is None else (f"{value}" if isinstance(value, int) else f"{value:.4f}")
        table.add_row(plain(key), shown, ci)
    out.print(table)
    if report.get("null_reasons"):
        out.print(f"null: {literal(report['null_reasons'])}", highlight=False)


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
