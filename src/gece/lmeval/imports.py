"""``gece lmeval-import``: a registry entry ``source: lmeval:<directory>`` -> its score file for one benchmark
(``artifacts/scores/<b>/<m>.parquet`` and ``<m>.meta.json``), read from lm-eval's logged samples and checked
pair by pair (:mod:`gece.lmeval.samples`). The command of the DVC stage whose dep is that directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal
from gece.cmd import command
from gece.io.files import paired
from gece.io.files.json_writer import write_json
from gece.io.files.writer import write_table
from gece.io.paths import layout
from gece.io.schemas.lmeval_files import ImportMeta
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.params import params_if_valid, require_params
from gece.lmeval import samples
from gece.pipeline import score

HELP = "import lm-evaluation-harness samples as a run's score file (registry source lmeval:<directory>)"
EXAMPLES = ("gece lmeval-import --model smollm2-135m-lmeval --benchmark winobias",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a registry entry whose source is lmeval:<lm-eval output directory>")
    p.add_argument("--benchmark", required=True, help="benchmark id (its task is gece_<benchmark>)")
    p.add_argument("--out", type=Path, help="the score file (default: artifacts/scores/<benchmark>/<model>.parquet)")
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What this command reads besides --params: the prepared benchmark and the run's lm-eval output directory
    (the registry entry's ``lmeval:<directory>``; its samples and results files are below it)."""
    params = params_if_valid(args)
    spec = params.registry.get(args.model) if params is not None else None
    directory = samples.output_dir(spec.source) if spec is not None else None
    return [layout.prepared_path(args.benchmark), *([directory] if directory is not None else [])]


writes = score.writes  # the score file (--out, or its default) and its meta beside it, as gece score


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    command.check_id(args.benchmark, "--benchmark")
    params = require_params(args)
    if args.benchmark not in params.benchmarks:
        raise GeceError(f"--benchmark {args.benchmark!r}: not a benchmark of {args.params}", hint="see benchmarks")
    spec = params.registry.get(args.model)
    directory = samples.output_dir(spec.source) if spec is not None else None
    if directory is None:
        raise GeceError(
            f"--model {args.model!r}: not a registry entry with source {samples.SOURCE_PREFIX}<directory>",
            hint=f"give it source: {samples.SOURCE_PREFIX}<lm_eval's --output_path> under registry (docs/lmeval.md)",
        )
    out = args.out or layout.scores_path(args.benchmark, args.model)
    frame, meta, file_meta = samples.import_scores(
        layout.prepared_path(args.benchmark),
        directory,
        args.benchmark,
        args.model,
        params.rule_for(args.benchmark),
        params.extract.word_prob,
    )
    write_table(out, frame, ScoreRow, file_meta)
    write_json(layout.meta_path(out), paired.describing(meta, out), ImportMeta)
    command.out.print(
        f"[green]imported[/] {meta.pairs_scored} of {meta.pairs_prepared} pairs of {literal(args.benchmark)} "
        f"({literal(meta.samples_file)}, lm-eval {literal(meta.lm_eval_version)}) -> {literal(str(out))}",
        highlight=False,
    )
    return 0
