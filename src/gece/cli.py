"""The ``gece`` command: argument parsing, exit codes and terminal output; no logic.

Exit status: 0 success, 2 a problem the user can fix (bad file, bad parameter, missing
package; printed without a traceback), 1 a bug, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from rich.logging import RichHandler
from rich.table import Table

from gece import __version__
from gece.errors import GeceError
from gece.terminal import LiteralFilter, console, literal, plain, visible

out = console()  # data is printed through literal() or plain(): never as markup, emoji or escape codes
err = console(stderr=True)


def _params(args: argparse.Namespace):
    """params.yaml when it exists (or --params was given), else the built-in defaults."""
    from gece.params import load_params

    path = Path(args.params)
    if path.exists() or args.params != "params.yaml":
        return load_params(path)
    return None


def check_id(value: str, option: str) -> str:
    """``value`` of a command-line ``option`` if it is a valid benchmark or model id, else a GeceError."""
    from gece.params import check_id as check

    return check(value, option)


def _batch_size(value: str) -> int | str:
    """``--batch-size``: a positive number or ``auto`` (bounds are checked with the params)."""
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number or auto") from None


def _override(settings, **given):
    """``settings`` (a params section) with the command-line options that were given, validated
    like params.yaml: an option outside its bounds is an error, not silently accepted."""
    from pydantic import ValidationError

    values = {k: v for k, v in given.items() if v is not None}
    if not values:
        return settings
    try:
        return type(settings).model_validate({**settings.model_dump(), **values})
    except ValidationError as e:
        options = [f"--{str(er['loc'][0]).replace('_', '-')}" if er["loc"] else "options" for er in e.errors()]
        problems = [f"{option}: {er['msg']} (got {er.get('input')!r})" for option, er in zip(options, e.errors())]
        section = type(settings).__name__.removesuffix("Params").lower()
        raise GeceError(f"invalid command-line option {', '.join(dict.fromkeys(options))}", problems=problems,
                        hint=f"pass a value within the bounds shown, or leave the option out to use {section} "
                        "settings of params.yaml (see `gece COMMAND --help` and the Parameters section of README.md)"
                        ) from e


def check_paths(args: argparse.Namespace) -> None:
    """Every output option of the command names a writable path (no FIFO, device or directory; not
    an input), checked before any work (see gece.files)."""
    from gece.files import check_outputs

    given = [getattr(args, name) for name in getattr(args, "inputs", ())]
    inputs = [p for g in given for p in (g if isinstance(g, list) else [g]) if p is not None]
    check_outputs({option: getattr(args, dest) for option, dest in getattr(args, "outputs", {}).items()}, inputs)


# ----------------------------------------------------------------------- commands
def cmd_validate(args: argparse.Namespace) -> int:
    from gece import benchmarks
    from gece.params import PrepareParams

    benchmarks.benchmark_id(args.csv)
    params = _params(args)  # the same prepare.duplicates as gece prepare
    duplicates = "keep" if args.allow_duplicates else args.duplicates
    settings = _override(params.prepare if params else PrepareParams(), duplicates=duplicates)
    rows, problems, warnings, n = benchmarks.check_benchmark(args.csv, settings.duplicates)
    for w in warnings:
        err.print(f"[yellow]warning[/]: {literal(w)}", highlight=False)
    if problems:
        err.print(f"[red]invalid[/]: {literal(str(args.csv))}: {len(problems)} problem(s) in {n} row(s)", highlight=False)
        for p in problems[: benchmarks.MAX_SHOWN]:
            err.print(f"  - {literal(p)}", highlight=False)
        if len(problems) > benchmarks.MAX_SHOWN:
            err.print(f"  ... and {len(problems) - benchmarks.MAX_SHOWN} more", highlight=False)
        err.print("[cyan]hint[/]: rows are numbered from 1 after the header line; fix the rows listed and run again",
                  highlight=False)
        return 2
    out.print(f"[green]valid[/]: {literal(str(args.csv))}: {len(rows)} pairs", highlight=False)
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from gece import stages
    from gece.params import PrepareParams

    params = _params(args)
    settings = _override(params.prepare if params else PrepareParams(), duplicates=args.duplicates)
    if params:
        stages.check_data(params, args.params)
    stages.prepare(args.csv, args.out, settings)
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from gece import stages

    check_id(args.model, "--model")
    params = _params(args)
    if params:
        stages.check_data(params, args.params)
    stages.reference(args.prepared, args.csv, args.out, args.model)
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from gece import remote, stages

    pulled = remote.pull(tuple(args.targets), quiet=args.quiet)
    params = _params(args)
    if params:
        stages.check_data(params, args.params)
    if not args.quiet:
        out.print(f"[green]pulled[/] {literal(' '.join(args.targets))} from DVC remote {literal(pulled.name)} "
                  f"({literal(pulled.url)})", highlight=False)
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from gece import stages
    check_id(args.model, "--model")
    params = _require_params(args)
    if args.model not in params.registry:
        raise GeceError(f"model {args.model!r} has no entry under registry in {args.params}",
                        hint=f"registered models: {', '.join(params.registry) or '(none)'}")
    settings = _override(params.extract, batch_size=args.batch_size, limit=args.limit, word_prob=args.word_prob)
    meta, timing = stages.extract(args.prepared, args.out, args.model, params.registry[args.model], settings,
                                  meta_out=args.meta_out)
    out.print(f"[green]scored[/] {meta.pairs} pairs of {literal(meta.benchmark)} with {literal(meta.model)} "
              f"in {timing.seconds:.1f} s ({timing.pairs_per_s or 0:.1f} pairs/s) -> {literal(str(args.out))}",
              highlight=False)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from gece import stages
    from gece.params import MetricsParams

    params = _params(args)
    settings = _override(params.metrics if params else MetricsParams(), n_bins=args.n_bins, binning=args.binning)
    report, bins, meta = stages.metrics_stage(args.scores, args.out, args.bins_out, settings)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if args.quiet:
        return 0
    title = f"{meta.get('benchmark', '?')} / {meta.get('model', '?')}: {report['n']} pairs, " \
            f"{report['n_bins']} {report['binning'].replace('_', '-')} bins"
    table = Table(title=plain(title), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI" if settings.ci == 0.95 else f"{settings.ci:.0%} CI", justify="right")
    skip = {"n", "n_bins", "binning", "null_reasons"}
    for key, value in report.items():
        if key in skip or key.endswith(("_ci_low", "_ci_high")):
            continue
        lo, hi = report.get(f"{key}_ci_low"), report.get(f"{key}_ci_high")
        ci = f"[{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
        shown = "null" if value is None else (f"{value}" if isinstance(value, int) else f"{value:.4f}")
        table.add_row(plain(key), shown, ci)
    out.print(table)
    if report.get("null_reasons"):
        out.print(f"null: {literal(report['null_reasons'])}", highlight=False)
    return 0


def _require_params(args: argparse.Namespace):
    from gece.params import load_params

    return load_params(args.params)


def cmd_ablate(args: argparse.Namespace) -> int:
    from gece import stages

    params = _require_params(args)
    sizes, _ = stages.ablate(args.scores, args.sample_size_out, args.binning_out, args.figure_out, params.metrics,
                             params.ablate)
    log = logging.getLogger("gece")
    for row in sizes["sizes"]:
        log.info("N=%d: ECE %.4f ± %.4f over %d subsets", row["n"], row["ece_mean"], row["ece_std"], row["draws"])
    return 0


def cmd_neutral(args: argparse.Namespace) -> int:
    from gece import stages

    check_id(args.model, "--model")
    params = _require_params(args)
    paths = {b: stages.metrics_path(b, args.model) for b in params.ablate.neutral}
    stages.neutral(args.model, paths, args.out)
    return 0


def cmd_special_tokens(args: argparse.Namespace) -> int:
    from gece import stages

    check_id(args.model, "--model")
    params = _require_params(args)
    if args.model not in params.ablate.special_tokens:
        raise GeceError(f"{args.model} has no variant without special tokens under ablate.special_tokens",
                        hint=f"known: {', '.join(params.ablate.special_tokens) or '(none)'}")
    without = params.ablate.special_tokens[args.model]
    runs = {
        b: (stages.metrics_path(b, args.model), stages.scores_path(b, args.model), stages.metrics_path(b, without),
            stages.scores_path(b, without))
        for b in params.benchmarks
    }
    stages.special_tokens(runs, args.out)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from gece import stages
    from gece.params import AblateParams, MetricsParams

    params = _params(args)
    m = params.metrics if params else MetricsParams()
    c = _override(params.ablate.compare if params else AblateParams().compare, draws=args.draws)
    if args.benchmark is not None:
        check_id(args.benchmark, "--benchmark")
        if args.scores:
            raise GeceError(f"compare got score files ({', '.join(map(str, args.scores))}) and --benchmark "
                            f"{args.benchmark}", hint="pass either two score files or --benchmark NAME, not both")
        if params is None:
            raise GeceError("--benchmark needs params.yaml (the models to compare)", hint="run from the repo root")
        if args.benchmark not in params.benchmarks:
            raise GeceError(f"--benchmark {args.benchmark!r} is not in benchmarks of {args.params}",
                            hint=f"known: {', '.join(params.benchmarks)}")
        paths = [stages.scores_path(args.benchmark, name) for name in params.runs(args.benchmark)]
    elif len(args.scores) == 2:
        paths = args.scores
    else:
        raise GeceError(f"compare needs two score files, got {len(args.scores)}",
                        hint="pass two score files, or --benchmark NAME for every model of a benchmark")
    result = stages.compare(paths, args.out, args.markdown_out, m, c)
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.out:
        from gece.report import compare_markdown

        out.print(visible(compare_markdown(result)), markup=False, highlight=False)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from gece import stages
    from gece.params import CalibrateParams, MetricsParams

    params = _params(args)
    settings = _override(params.calibrate if params else CalibrateParams(), methods=args.methods,
                         fraction=args.fraction, folds=args.folds, seed=args.seed)
    report, meta = stages.calibrate(args.scores, args.out, args.scores_out, args.bins_out, settings,
                                    params.metrics if params else MetricsParams())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if args.quiet:
        return 0
    keys = ("ece", "ece_toplabel", "gender_ece", "brier", "accuracy")
    for protocol, rep in report.items():
        title = f"{meta.get('benchmark', '?')} / {meta.get('model', '?')}, {protocol}: " \
                f"fit on {rep['n_fit']}, evaluated on {rep['n_eval']} pairs"
        table = Table(title=plain(title), title_justify="left")
        table.add_column("method")
        table.add_column("status")
        for k in keys:
            table.add_column(k, justify="right")
        fmt = lambda v: "null" if v is None else f"{v:.4f}"
        table.add_row("uncalibrated", "", *(fmt(rep["uncalibrated"][k]) for k in keys))
        for name, m in rep["methods"].items():
            values = ("null",) * len(keys) if m["metrics"] is None else (fmt(m["metrics"][k]) for k in keys)
            style = {"ok": "green", "degenerate": "yellow", "failed": "red"}[m["status"]]
            table.add_row(plain(name), f"[{style}]{literal(m['status'])}[/]", *values)
        out.print(table)
        for name, m in rep["methods"].items():
            if m["reason"]:
                out.print(f"  {name}: {literal(m['reason'])}", highlight=False)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from gece import stages

    params = _require_params(args)
    result = stages.report_stage(params, args.reports, args.scores, args.out, args.data_dvc)
    out.print(f"[green]report[/]: {len(result['figures'])} figures, {len(result['tables'])} tables -> "
              f"{literal(result['html'])}", highlight=False)
    if result["missing"]:
        out.print(f"{len(result['missing'])} part(s) missing (listed on the page)", highlight=False)
    return 0


# ------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse, with a hint after a usage error (exit 2, as any user error)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {visible(message)}\nhint: `{self.prog} --help` lists the options and the "
                  "values they take\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gece",
        description="Calibration of language-model confidence against human judgements of gender bias. "
        "Each subcommand is one DVC stage; see README.md.",
    )
    parser.add_argument("--version", action="version", version=f"gece {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    parser.add_argument("--params", default="params.yaml", help="parameters file (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check a benchmark CSV as gece prepare does; exit 2 and list bad rows if invalid")
    p.add_argument("csv", type=Path)
    p.add_argument("--duplicates", choices=["keep", "drop", "error"],
                   help="repeated pairs: keep, drop or reject, as gece prepare (default: params prepare.duplicates)")
    p.add_argument("--allow-duplicates", action="store_true",
                   help="same as --duplicates keep (conflicting labels stay errors)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("pull", help="the data snapshot from the DVC remote (dvc pull data.dvc), remote checked first")
    p.add_argument("targets", nargs="*", default=["data.dvc"], help=".dvc files to pull (default: %(default)s)")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("prepare", help="validate and align a benchmark -> prepared Parquet")
    p.add_argument("csv", type=Path, help="data/benchmarks/<name>.csv")
    p.add_argument("out", type=Path, help="artifacts/prepared/<name>.parquet")
    p.add_argument("--duplicates", choices=["keep", "drop", "error"],
                   help="repeated pairs: keep, drop or reject (default: params prepare.duplicates)")
    p.set_defaults(func=cmd_prepare, outputs={"OUT": "out"}, inputs=("csv",))

    p = sub.add_parser("reference", help="the authors' released scores -> the per-pair score schema")
    p.add_argument("prepared", type=Path, help="artifacts/prepared/<benchmark>.parquet")
    p.add_argument("csv", type=Path, help="data/reference/<benchmark>/<model>.csv")
    p.add_argument("out", type=Path, help="artifacts/scores/<benchmark>/paper-<model>.parquet")
    p.add_argument("--model", required=True, help="model id to record, e.g. paper-gpt-j-6b")
    p.set_defaults(func=cmd_reference, outputs={"OUT": "out"}, inputs=("prepared", "csv"))

    p = sub.add_parser("extract", help="score a prepared benchmark with a model -> per-pair score Parquet")
    p.add_argument("prepared", type=Path, help="artifacts/prepared/<benchmark>.parquet")
    p.add_argument("out", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--model", required=True, help="model id, an entry of registry in params.yaml")
    p.add_argument("--meta-out", type=Path, help="run metadata JSON (default: <out>.meta.json beside the output)")
    p.add_argument("--batch-size", type=_batch_size, help="override params extract.batch_size (a number or auto)")
    p.add_argument("--limit", type=int, help="override params extract.limit (score only the first N pairs)")
    p.add_argument("--word-prob", choices=["chain", "max"], help="override params extract.word_prob")
    p.set_defaults(func=cmd_extract, outputs={"OUT": "out", "--meta-out": "meta_out"}, inputs=("prepared",))

    p = sub.add_parser("metrics", help="calibration metrics of a score file (table, --json, or stage outputs)")
    p.add_argument("scores", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--out", type=Path, help="write the metrics JSON here")
    p.add_argument("--bins-out", type=Path, help="write the reliability bins JSON here")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.add_argument("--n-bins", type=int, help="override params metrics.n_bins")
    p.add_argument("--binning", choices=["equal_width", "equal_mass"], help="override params metrics.binning")
    p.set_defaults(func=cmd_metrics, outputs={"--out": "out", "--bins-out": "bins_out"}, inputs=("scores",))

    p = sub.add_parser("ablate", help="sample-size and binning ablations of one score file")
    p.add_argument("scores", type=Path)
    p.add_argument("--sample-size-out", type=Path, required=True)
    p.add_argument("--binning-out", type=Path, required=True)
    p.add_argument("--figure-out", type=Path, help="PNG of mean ± std against the subset size")
    p.set_defaults(func=cmd_ablate, outputs={"--sample-size-out": "sample_size_out", "--binning-out": "binning_out",
                                       "--figure-out": "figure_out"}, inputs=("scores",))

    p = sub.add_parser("neutral", help="occupation vs gender-neutral wording for one model (reads its metrics)")
    p.add_argument("--model", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_neutral, outputs={"--out": "out"})

    p = sub.add_parser("special-tokens", help="a model with vs without special tokens, every benchmark")
    p.add_argument("--model", required=True, help="the model with special tokens (ablate.special_tokens key)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_special_tokens, outputs={"--out": "out"})

    p = sub.add_parser("compare", help="paired bootstrap: two score files, or every model of a benchmark")
    p.add_argument("scores", type=Path, nargs="*", help="two score files of the same benchmark")
    p.add_argument("--benchmark", help="compare every model of this benchmark (params models + paper runs)")
    p.add_argument("--out", type=Path, help="write the JSON here")
    p.add_argument("--markdown-out", type=Path, help="write the markdown table here")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--draws", type=int, help="override params ablate.compare.draws")
    p.set_defaults(func=cmd_compare, outputs={"--out": "out", "--markdown-out": "markdown_out"}, inputs=("scores",))

    p = sub.add_parser("calibrate", help="post-hoc calibration of a score file, evaluated on held-out pairs")
    p.add_argument("scores", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--out", type=Path, help="write the calibration report JSON here")
    p.add_argument("--scores-out", type=Path, help="write the per-pair calibrated scores (Parquet) here")
    p.add_argument("--bins-out", type=Path, help="write the reliability bins before/after (JSON) here")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    p.add_argument("--methods", nargs="+", choices=["beta", "isotonic", "temperature", "platt", "histogram"],
                   help="override params calibrate.methods")
    p.add_argument("--fraction", type=float, help="override params calibrate.fraction")
    p.add_argument("--folds", type=int, help="override params calibrate.folds")
    p.add_argument("--seed", type=int, help="override params calibrate.seed")
    p.set_defaults(func=cmd_calibrate, outputs={"--out": "out", "--scores-out": "scores_out", "--bins-out": "bins_out"},
                   inputs=("scores",))

    p = sub.add_parser("report", help="figures, tables and reports/index.html from every report (DVC stage report)")
    p.add_argument("--reports", type=Path, default=Path("reports"), help="the JSON reports (default: %(default)s)")
    p.add_argument("--scores", type=Path, default=Path("artifacts/scores"),
                   help="score files, for the equal-mass diagrams and extract metadata (default: %(default)s)")
    p.add_argument("--out", type=Path,
                   help="where index.html, figures/ and tables/ go; the last two are replaced (default: --reports)")
    p.add_argument("--data-dvc", type=Path, default=Path("data.dvc"), help="for the data hash (default: %(default)s)")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):  # `gece ... | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)
    if err.is_terminal:
        handler: logging.Handler = RichHandler(console=err, show_time=False, show_path=False, markup=False)
    else:  # plain lines for logs and DVC
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    handler.addFilter(LiteralFilter())
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, handlers=[handler], force=True)
    try:
        check_paths(args)
        return args.func(args)
    except GeceError as e:
        err.print(f"[red]error[/]: {literal(e.message)}", highlight=False)
        for p in e.problems:
            err.print(f"  - {literal(p)}", highlight=False)
        if e.hint:
            err.print(f"[cyan]hint[/]: {literal(e.hint)}", highlight=False)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130


if __name__ == "__main__":
    sys.exit(main())
