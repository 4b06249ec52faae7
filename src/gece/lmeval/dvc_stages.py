"""``gece lmeval-stages``: the DVC stages that import lm-eval samples produced outside DVC (a registry entry
``source: lmeval:<directory>``, docs/lmeval.md "Logs from elsewhere"), in one command.

For the entry ``<m>`` it tracks ``<directory>`` with ``dvc add`` (unless a ``<directory>.dvc`` file already does)
and adds, with ``dvc stage add --force``, one stage ``lmeval-import-<m>-<b>`` per benchmark whose task
``gece_<b>`` has samples under the directory (or per ``--benchmark``): its deps are the directory, the
benchmark's prepared pairs and the package (``src/gece``, which tests/test_stage_deps.py accepts for stages a
user adds), its params the entry and the benchmark's, its outputs the score file and its meta; the command is
``gece lmeval-import --model <m> --benchmark <b>``. DVC runs as an argument list; ``dvc repro`` then imports.
``dvc stage add`` rewrites the whole dvc.yaml in DVC's layout: the file is then written back as it was but for the
stages added (:func:`gece.tools.stage_deps.with_stages`), so ``gece stage-deps --check`` still holds.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal
from gece.cmd import command
from gece.cmd.command import Output
from gece.io.files.inputs import read_text
from gece.io.files.outputs import write_text
from gece.io.paths import layout
from gece.io.settings.params import params_if_valid, require_params
from gece.lmeval import samples
from gece.tools import stage_deps

DVC_YAML = Path("dvc.yaml")  # where dvc stage add writes, in the directory the command runs in
HELP = "write the DVC stages that import a registry entry's lm-eval samples (source lmeval:<directory>)"
EXAMPLES = ("gece lmeval-stages --model smollm2-135m-lmeval   # then: dvc repro",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a registry entry whose source is lmeval:<lm-eval output directory>")
    p.add_argument(
        "--benchmark", action="append", help="a benchmark id, repeatable (default: each with samples in the directory)"
    )


def reads(args: argparse.Namespace) -> list[Path]:
    """Besides --params: the run's lm-eval output directory (which benchmarks have samples) and dvc.yaml, whose
    other stages and comments stay as they were."""
    params = params_if_valid(args)
    spec = params.registry.get(args.model) if params is not None else None
    directory = samples.output_dir(spec.source) if spec is not None else None
    return [*([directory] if directory is not None else []), DVC_YAML]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """dvc.yaml (the stages added to it), and what ``dvc add`` writes for the directory: its ``.dvc`` file and the
    ``.gitignore`` beside it (DVC's cache is DVC's own)."""
    directory = (reads(args) or [None])[0]
    found = {"dvc.yaml": Output(Path("dvc.yaml"), updated=True)}
    if directory is None:
        return found
    return found | {
        "the directory's .dvc file": Output(Path(f"{directory}.dvc"), updated=True),
        "the .gitignore beside it": Output(directory.parent / ".gitignore", updated=True),
    }


def stage_name(model: str, benchmark: str) -> str:
    """The import stage of one benchmark of run ``model``."""
    return f"lmeval-import-{model}-{benchmark}"


def stage_add(model: str, benchmark: str, directory: Path) -> list[str]:
    """The ``dvc stage add`` argument list of one import stage (module docstring)."""
    score = layout.scores_path(benchmark, model)
    return [
        *("dvc", "stage", "add", "--force", "-n", stage_name(model, benchmark)),
        *("-d", str(directory), "-d", str(layout.prepared_path(benchmark)), "-d", "src/gece"),
        *("-p", f"registry.{model},benchmarks.{benchmark}"),
        *("-o", str(score), "-o", str(layout.meta_path(score))),
        *("gece", "lmeval-import", "--model", model, "--benchmark", benchmark),
    ]


def with_samples(directory: Path, benchmarks: list[str]) -> list[str]:
    """The benchmarks whose task has a samples file under ``directory``, in ``benchmarks`` order."""
    names = {p.name for p in directory.rglob(f"samples_{samples.TASK_PREFIX}*.jsonl")}
    return [
        b
        for b in benchmarks
        if any(re.fullmatch(rf"samples_{re.escape(samples.TASK_PREFIX + b)}_{samples.DATE}\.jsonl", n) for n in names)
    ]


LMEVAL_FILES = (re.compile(rf"samples_.+_{samples.DATE}\.jsonl"), re.compile(rf"results_{samples.DATE}\.json"))


def check_lmeval_output(directory: Path) -> None:
    """``directory`` holds lm-eval's output alone (its samples and results files, in folders), nothing of the
    repository's own: ``dvc add`` makes DVC track it and git ignore it."""
    here = Path(os.path.realpath("."))
    if here.is_relative_to(os.path.realpath(directory)):
        raise GeceError(f"{directory} holds this repository", hint="give the source the folder of lm-eval's output")
    for path in sorted(directory.rglob("*")):
        if path.is_symlink() or not (path.is_dir() or any(f.fullmatch(path.name) for f in LMEVAL_FILES)):
            raise GeceError(
                f"{directory}: {path} is no file lm-eval writes (samples_<task>_<date>.jsonl, results_<date>.json); "
                "dvc add would make DVC track it and git ignore it; nothing was added",
                hint="give the source a folder that holds lm-eval's output alone (lm_eval --output_path)",
            )


def dvc(words: list[str]) -> None:
    res = subprocess.run(words, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise GeceError(f"{' '.join(words[:3])} failed ({res.returncode})", problems=[res.stderr.strip()[-2000:]])


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    params = require_params(args)
    for b in args.benchmark or []:
        command.check_id(b, "--benchmark")
        if b not in params.benchmarks:
            raise GeceError(f"--benchmark {b!r}: not a benchmark of {args.params}", hint="see benchmarks")
    spec = params.registry.get(args.model)
    directory = samples.output_dir(spec.source) if spec is not None else None
    if directory is None:
        raise GeceError(
            f"--model {args.model!r}: not a registry entry with source {samples.SOURCE_PREFIX}<directory>",
            hint="add one (docs/lmeval.md, Logs from elsewhere); an entry with engine: lm-eval has its stages already",
        )
    if not directory.is_dir():
        raise GeceError(
            f"{directory}: no such directory (the lm-eval output of {args.model})", hint="run lm_eval first"
        )
    check_lmeval_output(directory)
    chosen = args.benchmark or with_samples(directory, list(params.benchmarks))
    lacking = [b for b in chosen if not with_samples(directory, [b])]
    if not chosen or lacking:
        raise GeceError(
            f"{directory}: no lm-eval samples of "
            + (f"benchmark {', '.join(lacking)}" if lacking else "any benchmark")
            + " (samples_gece_<benchmark>_<date>.jsonl); nothing was added",
            hint="run lm_eval with --log_samples on the exported tasks first",
        )
    if not Path(f"{directory}.dvc").is_file():
        dvc(["dvc", "add", str(directory)])
    before = (
        read_text(DVC_YAML, "restore it with git checkout dvc.yaml", "params_bytes") if DVC_YAML.is_file() else None
    )
    for b in chosen:
        dvc(stage_add(args.model, b, directory))
    if before is not None:  # dvc stage add rewrites the whole file in DVC's layout: keep the rest as it was
        after = read_text(DVC_YAML, "restore it with git checkout dvc.yaml", "params_bytes")
        write_text(DVC_YAML, stage_deps.with_stages(before, after, [stage_name(args.model, b) for b in chosen]))
    names = ", ".join(literal(stage_name(args.model, b)) for b in chosen)
    command.out.print(f"[green]added[/] {names} to dvc.yaml; run dvc repro", highlight=False)
    return 0
