"""Stage special-tokens: a model scored with vs without its special tokens, every benchmark."""

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
from gece.io.schemas.ablation_reports import SpecialTokensReport
from gece.io.schemas.metric_reports import MetricsReport
from gece.io.settings.params import require_params
from gece.pipeline import runs
from gece.stats import ablation

log = logging.getLogger("gece")


# the line `gece --help` shows for this command (read without importing this module)
HELP = "a model with vs without special tokens, every benchmark (DVC stage special-tokens)"
EXAMPLES = ("gece special-tokens --model gemma-3-270m --out /tmp/special.json",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        required=True,
        help="the model with special tokens, a key of ablate.special_tokens ({params:ablate.special_tokens})",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="write the JSON here (reports/ablation/special_tokens/<model>.json)"
    )
    p.add_argument(
        "--json", action="store_true", help="print the comparison written to --out as JSON instead of the table"
    )
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the runs' metrics reports (and score files) of every benchmark."""
    return [layout.REPORTS / report_layout.METRICS_DIR, layout.scores_root()]


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and --out say
STAGE = {
    "name": "special-tokens",
    "about": "a model scored with vs without its special tokens (ablate.special_tokens), every benchmark",
    "argv": [
        "-q",
        "special-tokens",
        "--model",
        "{model}",
        "--out",
        str(layout.REPORTS / report_layout.special_tokens_file("{model}")),
    ],
    "foreach": ["model", "ablate.special_tokens"],
    "params": ["benchmarks", "ablate.special_tokens"],
}


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    params = require_params(args)
    if args.model not in params.ablate.special_tokens:
        raise GeceError(
            f"--model {args.model!r} has no variant without special tokens under ablate.special_tokens of "
            f"{args.params}",
            hint=f"give one of: {', '.join(params.ablate.special_tokens) or '(none)'}; or add "
            f"`{args.model}: <its variant>` under ablate.special_tokens",
        )
    without = params.ablate.special_tokens[args.model]
    pairs = {
        b: (
            report_layout.metrics_path(b, args.model),
            layout.scores_path(b, args.model),
            report_layout.metrics_path(b, without),
            layout.scores_path(b, without),
        )
        for b in params.benchmarks
    }
    result = special_tokens(pairs, args.out)
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.quiet:
        rows = {f"{b} {side}": sides[side] for b, sides in result.items() for side in ("with", "without")}
        command.out.print(
            run_tables.rows_table(
                f"{args.model} with vs without special tokens ({without})",
                "benchmark",
                rows,
                ["ece", "gender_ece", "brier", "accuracy", "mean_confidence"],
            )
        )
    return 0


def special_tokens(pairs: dict[str, tuple[Path, Path, Path, Path]], out: str | Path) -> dict:
    """The same model with and without special tokens, per benchmark.

    ``pairs``: {benchmark: (metrics with, scores with, metrics without, scores without)}.
    """
    result = {}
    for benchmark, (m_with, s_with, m_without, s_without) in pairs.items():
        sides = {}
        for side, mpath, spath in (("with", m_with, s_with), ("without", m_without, s_without)):
            report = read_json(mpath, MetricsReport).model_dump()
            sides[side] = report | ablation.confidence_profile(runs.load_run_file(spath)[0].p)
        result[benchmark] = sides
    write_json(out, result, SpecialTokensReport)
    return result
