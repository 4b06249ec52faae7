"""Stage prompts: a model's runs under its prompts against its run on the bare sentence, every benchmark
(docs/metrics.md, "Prompts") -> ``reports/ablation/prompts/<model>.json``
(:class:`gece.io.schemas.prompt_reports.PromptAblationReport`).

A prompt's token files (stage prompt-extract) are scored here as the score stage scores a run
(:func:`gece.pipeline.score.score`, with ``extract.word_prob`` and ``extract.side_prob``, into a temporary folder),
and each benchmark's runs are compared on the pairs the prompts scored (:func:`gece.stats.prompt_ablation.
prompt_changes`), resampling the benchmark's clusters, with the draws, seed, level and alpha of ``ablate.compare``.
The numbers compared: ECE, Gender-ECE and accuracy (on a benchmark with constant y, 1 − mean p and the stereotype
share: its ``reading`` says so), or on a protocol's benchmark the numbers its first screen draws
(:attr:`gece.report.protocol.Protocol.panels`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from gece.base.errors import GeceError
from gece.cmd import command, run_tables
from gece.io.files.json_writer import write_json
from gece.io.files.readers import read_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.pair_rows import SYNTH_SCHEMAS
from gece.io.schemas.prompt_reports import PromptAblationReport
from gece.io.settings.params import Params, require_params
from gece.io.settings.prompts import BASELINE
from gece.pipeline import clusters, runs
from gece.pipeline import score as score_stage
from gece.protocols import declarations
from gece.stats import ablation
from gece.stats.prompt_ablation import prompt_changes

KEYS = ("ece", "gender_ece", "accuracy")  # compared on a benchmark without a protocol
IDENTITY, PRONOUN_GENDER = "identity", "pronoun_gender"  # the readings of those benchmarks (gece.report.readings)

# the line `gece --help` shows for this command (read without importing this module)
HELP = "a model under each of its prompts vs the bare sentence, every benchmark, paired (DVC stage prompts)"
EXAMPLES = ("gece prompts --model smollm2-135m --out /tmp/prompts.json",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a model of ablate.prompts ({params:ablate.prompts})")
    p.add_argument(
        "--out", type=Path, required=True, help="write the JSON here (reports/ablation/prompts/<model>.json)"
    )
    p.add_argument("--json", action="store_true", help="print the report written to --out as JSON instead of the table")
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the prepared pairs, the model's score files and its prompted token files."""
    try:
        prompted = [layout.prompted_dir(args.model)]
    except GeceError:  # no plain id: run refuses it
        prompted = []
    return [layout.ARTIFACTS / "prepared", layout.scores_root(), *prompted]


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and --out say
STAGE = {
    "name": "prompts",
    "about": "a model under each of its prompts vs the bare sentence (ablate.prompts), every benchmark, paired",
    "argv": [
        "-q",
        "prompts",
        "--model",
        "{model}",
        "--out",
        str(layout.REPORTS / report_layout.prompts_file("{model}")),
    ],
    "foreach": ["model", "ablate.prompts"],
    "params": ["benchmarks", "extract.word_prob", "extract.side_prob", "metrics", "ablate.prompts", "ablate.compare"],
}


def reading(params: Params, benchmark: str, base: ablation.Run) -> str:
    """How a benchmark's numbers read: its protocol's name, or identity (y constant), or pronoun_gender."""
    protocol = declarations.of(params.benchmarks[benchmark])
    if protocol is not None:
        return protocol.name
    return IDENTITY if np.unique(base.y).size == 1 else PRONOUN_GENDER


def prompt_runs(params: Params, model: str, benchmark: str, folder: Path) -> dict[str, ablation.Run]:
    """The model's run of ``benchmark`` on the bare sentence and under each prompt (scored into ``folder``)."""
    out = {BASELINE: runs.load_run_file(layout.scores_path(benchmark, model))[0]}
    for name in params.ablate.prompts[model]:
        scored = folder / name / f"{benchmark}.parquet"
        score_stage.score(
            layout.prepared_path(benchmark),
            layout.tokens_path(model, benchmark, name),
            scored,
            params.extract.word_prob,
            params.extract.side_prob,
        )
        out[name] = runs.load_run_file(scored)[0]
    return out


def prompt_ablation(params: Params, model: str, out: str | Path) -> dict:
    """The report of ``model`` (module docstring), written to ``out``."""
    if model not in params.ablate.prompts:
        raise GeceError(
            f"--model {model!r} is not under ablate.prompts",
            hint=f"give one of: {', '.join(params.ablate.prompts) or '(none)'}",
        )
    c, m = params.ablate.compare, params.metrics
    result: dict = {
        "model": model,
        "baseline": BASELINE,
        "prompts": list(params.ablate.prompts[model]),
        "pairs": params.ablate.prompt_pairs,
        "draws": c.draws,
        "seed": c.seed,
        "level": c.ci,
        "alpha": c.alpha,
        "benchmarks": {},
    }
    with tempfile.TemporaryDirectory(prefix="gece-prompts-") as tmp:
        for b, entry in params.benchmarks.items():
            named = prompt_runs(params, model, b, Path(tmp))
            pairs = read_table(layout.prepared_path(b), SYNTH_SCHEMAS[entry.synthbias])[0].set_index("pair_id")
            protocol = declarations.of(entry)
            if protocol is not None:
                keys, measure = protocol.panels, protocol.comparer(entry, pairs, m, c.draws, c.seed)
            else:
                keys, measure = KEYS, ablation.metrics_measure(c.draws, c.seed, m.n_bins, m.binning)
            try:
                changes = prompt_changes(
                    named, BASELINE, keys, measure, c.ci, c.alpha, describe=clusters.describer(pairs)
                )
            except ValueError as e:
                raise GeceError(
                    f"{b}: cannot compare the prompts of {model}: {e}",
                    hint=f"run the prompt-extract stage again: dvc repro prompt-extract@{model}",
                ) from e
            result["benchmarks"][b] = {**changes, "reading": reading(params, b, named[BASELINE])}
    write_json(out, result, PromptAblationReport)
    return result


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    params = require_params(args)
    result = prompt_ablation(params, args.model, args.out)
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.quiet:
        rows = {
            f"{b} {name}": {k: cells[name]["change"] for k, cells in entry["metrics"].items()}
            for b, entry in result["benchmarks"].items()
            for name in result["prompts"]
        }
        keys = list(dict.fromkeys(k for entry in result["benchmarks"].values() for k in entry["metrics"]))
        command.out.print(
            run_tables.rows_table(f"{args.model}: change from {BASELINE} under each prompt", "benchmark", rows, keys)
        )
    return 0
