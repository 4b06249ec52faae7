"""Stage neutral: one model's metrics on occupation vs gender-neutral wording of the same pairs."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from gece.base.errors import GeceError
from gece.cmd import command, run_tables
from gece.io.files.json_reader import read_json
from gece.io.files.json_writer import write_json
from gece.io.paths import layout, report_layout
from gece.io.schemas.ablation_reports import NEUTRAL_KEYS, NeutralReport
from gece.io.schemas.metric_reports import MetricsReport
from gece.io.settings.params import params_if_valid, require_params

log = logging.getLogger("gece")


# the line `gece --help` shows for this command (read without importing this module)
HELP = "occupation vs gender-neutral wording for one model, from its metrics (DVC stage neutral)"
EXAMPLES = ("gece neutral --model smollm2-135m --out /tmp/neutral.json",)
DESCRIPTION = (
    "The metrics of one model on a benchmark with occupation words and on its gender-neutral rewrites (the "
    "benchmarks whose params.yaml entry names it: benchmarks.<b>.neutral_of), read from "
    "reports/metrics/<benchmark>/<model>.json."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model id (its reports/metrics files must exist)")
    p.add_argument(
        "--out", type=Path, required=True, help="write the JSON here (reports/ablation/neutral/<model>.json)"
    )
    p.add_argument("--json", action="store_true", help="print the rows written to --out as JSON instead of the table")
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the model's metrics reports of each benchmark compared (a benchmark and its
    gender-neutral rewrites, ``benchmarks.<b>.neutral_of``)."""
    params = params_if_valid(args)
    try:
        return [report_layout.metrics_path(b, args.model) for b in params.neutral_benchmarks] if params else []
    except GeceError:  # no plain id: run refuses it
        return []


# dvc.yaml's stage (gece.cmd.stage): its deps are the metrics reports that reads() names from params.yaml
STAGE = {
    "name": "neutral",
    "about": "occupation vs gender-neutral wording (a benchmark and its rewrites: benchmarks.<b>.neutral_of), per "
    "model; its deps, the metrics of those benchmarks, come from params.yaml (gece stage-deps writes them)",
    "argv": [
        "-q",
        "neutral",
        "--model",
        "{model}",
        "--out",
        str(layout.REPORTS / report_layout.neutral_file("{model}")),
    ],
    "matrix": {"model": "models"},
    "params": ["benchmarks"],
    "notes": {"benchmarks": "which benchmarks are rewrites (neutral_of)"},
}


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    params = require_params(args)
    compared = params.neutral_benchmarks
    if not compared:
        raise GeceError(
            f"no benchmark of {args.params} is a gender-neutral rewrite: nothing to compare",
            hint="mark each rewrite in its benchmark entry, e.g. benchmarks: {genderlex_person: {neutral_of: "
            "genderlex}} (README.md, Parameters)",
        )
    paths = {b: report_layout.metrics_path(b, args.model) for b in compared}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if len(missing) == len(paths):  # no metrics of this model at all: name the option, not only a file
        runs = [*params.models, *params.references]
        raise GeceError(
            f"--model {args.model!r}: no metrics of {', '.join(paths)}",
            problems=[f"{p}: file not found" for p in missing],
            hint=f"give a run of {args.params} ({', '.join(runs) or 'none'}) whose metrics stage ran "
            f"(dvc repro metrics@{compared[0]}), or dvc pull",
        )
    rows = neutral(args.model, paths, args.out)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not args.quiet:
        command.out.print(
            run_tables.rows_table(
                f"{args.model}: occupation vs gender-neutral wording",
                "benchmark",
                rows,
                ["n", "ece", "gender_ece", "ece_male", "ece_female", "brier", "accuracy"],
            )
        )
    return 0


def neutral(model: str, metrics_paths: dict[str, Path], out: str | Path) -> dict:
    """Occupation vs gender-neutral wording: the metrics of one model on each benchmark variant."""
    rows = {}
    for benchmark, path in metrics_paths.items():
        report = read_json(path, MetricsReport)
        rows[benchmark] = {k: getattr(report, k) for k in NEUTRAL_KEYS} | {"n": report.n}
    write_json(out, rows, NeutralReport)
    log.info("%s: neutral wording over %s -> %s", model, ", ".join(metrics_paths), out)
    return rows
