"""``gece lmeval-run``: the DVC stage ``lmeval`` (one per benchmark and ``lmeval_runs`` entry): lm-evaluation-harness
scores one benchmark with a registry entry ``engine: lm-eval``, and the import writes its score file.

In order, every check before any work: the entry and the benchmark; lm-eval (and vLLM) installed
(:func:`gece.lmeval.launch.require_installed`); the model directory lm-eval will load, through gece's model-file
gate (:func:`gece.scoring.weights_gate.check_directory`: headers parsed with bounds, no pickle); then

1. the export of the benchmark's task (:func:`gece.lmeval.export.export`, under the entry's ``limit``);
2. the samples: kept when the stage's folder already holds a run with this fingerprint, copied from the last
   recorded run when its fingerprint is this one (:func:`gece.pipeline.reuse.previous_outputs`), else lm-eval
   runs (its own progress on the terminal), into a scratch folder that replaces the stage's folder only when
   lm-eval succeeded: a failure names the task and the command and keeps the previous outputs;
3. the import (:func:`gece.lmeval.samples.import_scores`: the same checks as ``gece lmeval-import``) ->
   ``artifacts/scores/<b>/<m>.parquet`` and ``<m>.meta.json``.

One task per stage: a killed ``dvc repro`` resumes at the first task not recorded in dvc.lock, and an edited
benchmark re-runs its own task only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal
from gece.cmd import command
from gece.io.files import paired
from gece.io.files.json_reader import read_json_file
from gece.io.files.json_writer import write_json
from gece.io.files.outputs import write_text
from gece.io.files.writer import write_table
from gece.io.paths import layout
from gece.io.schemas.lmeval_files import ImportMeta
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.harness_entry import ENGINE, HarnessSpec, is_harness
from gece.io.settings.params import params_if_valid, require_params
from gece.lmeval import export, launch, samples
from gece.pipeline import reuse

HELP = "score one benchmark with lm-evaluation-harness for a registry entry with engine: lm-eval (DVC stage lmeval)"
EXAMPLES = ("gece lmeval-run --model smollm2-135m-harness --benchmark winobias",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a registry entry with engine: lm-eval (listed in lmeval_runs)")
    p.add_argument("--benchmark", required=True, help="benchmark id (its lm-eval task is gece_<benchmark>)")


def reads(args: argparse.Namespace) -> list[Path]:
    """Besides --params: the prepared benchmark, the model's files (a local source), the stage's earlier output
    (resumed), dvc.lock (the last recorded run, reused) and the launcher's program (its #! line names the Python
    asked whether lm-eval is installed)."""
    params = params_if_valid(args)
    spec = params.registry.get(args.model) if params is not None else None
    local = [Path(spec.source)] if spec is not None and Path(spec.source).exists() else []
    local += launch.launcher_program(spec) if is_harness(spec) else []
    return [layout.prepared_path(args.benchmark), *local, launch.run_dir(args.model, args.benchmark), reuse.LOCK]


def writes(args: argparse.Namespace) -> dict[str, Path]:
    """lm-eval's output folder (read first: a run kept; replaced whole by the scratch folder once lm-eval
    succeeded), the score file and its meta. Also written: the exported task and lm-eval's scratch output
    (:func:`gece.lmeval.launch.tasks_dir`)."""
    out = layout.scores_path(args.benchmark, args.model)
    return {
        "lm-eval's output": command.Folder(launch.run_dir(args.model, args.benchmark)),
        "the score file": out,
        "its meta": layout.meta_path(out),
    }


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say
STAGE = {
    "name": "lmeval",
    "about": "a registry entry with engine: lm-eval (params.yaml lmeval_runs): lm-evaluation-harness scores each "
    "benchmark, one task per stage, and the import writes its score file (docs/lmeval.md); no token file. A task "
    "whose exported pairs, entry and lm-eval version are those of its recorded run is reused from it, not run again",
    "argv": ["lmeval-run", "--model", "{model}", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks", "model": "lmeval_runs"},
    "params": ["benchmarks.{benchmark}", "extract.rule", "extract.word_prob", "extract.limit", "registry.{model}"],
    "outputs": {"lm-eval's output": {"note": "lm-eval's samples and results, the export's record"}},
    "notes": {"benchmarks.{benchmark}": "its rule"},
}


def entry(params: object, model: str, benchmark: str) -> HarnessSpec:
    """The registry entry ``model``, checked to be an lm-eval run of ``benchmark``."""
    if benchmark not in params.benchmarks:  # type: ignore[attr-defined]
        raise GeceError(f"--benchmark {benchmark!r}: not a benchmark of params.yaml", hint="see benchmarks")
    spec = params.registry.get(model)  # type: ignore[attr-defined]
    if not is_harness(spec):
        raise GeceError(
            f"--model {model!r}: not a registry entry with engine: {ENGINE}",
            hint="give it engine: lm-eval and a harness: block, and list it under lmeval_runs (docs/lmeval.md)",
        )
    return spec  # type: ignore[return-value]


def checked_model(spec: HarnessSpec) -> Path:
    """The directory lm-eval loads (:func:`gece.lmeval.export.model_dir`), through the model-file gate first."""
    from gece.scoring import weights_gate

    folder = export.model_dir(spec)
    weights_gate.check_directory(Path(folder), spec.source)
    return Path(folder)


def api_bos(spec: HarnessSpec, model_dir: Path, add_bos: bool | None) -> bool | None:
    """The BOS option to pass: the export's; for an API backend, which adds no BOS unless told, the tokenizer's
    own default written out where the export leaves it unset (docs/lmeval.md "Other backends")."""
    if spec.harness.model != "local-completions" or add_bos is not None:
        return add_bos
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    return tok.bos_token_id is not None and tok.encode("a")[:1] == [tok.bos_token_id]


def kept(folder: Path, key: str) -> bool:
    """Whether ``folder`` holds a finished run whose fingerprint is ``key``."""
    record = folder / launch.RECORD
    return record.is_file() and read_json_file(record, "run the stage again").get("fingerprint") == key


def from_recorded(folder: Path, key: str) -> bool:
    """Copy the last recorded run of ``folder`` (dvc.lock and DVC's cache) when its fingerprint is ``key``."""
    previous = reuse.previous_outputs(folder)
    old = previous.get(launch.RECORD)
    if old is None or json.loads(old.read_text()).get("fingerprint") != key:
        return False
    for name, src in previous.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, folder / name)
    return True


def run_lm_eval(words: list[str], folder: Path, scratch: Path, task: str) -> None:
    """Run lm-eval into ``scratch`` and, when it succeeded, make ``scratch`` the stage's ``folder``."""
    shutil.rmtree(scratch, ignore_errors=True)
    shown = shlex.join(words)
    res = subprocess.run(words, env=launch.environment(words), check=False)
    if res.returncode != 0 or not any(scratch.rglob(f"samples_{task}_*.jsonl")):
        why = f"exit status {res.returncode}" if res.returncode else "no samples file written"
        raise GeceError(
            f"lm-eval failed on task {task} ({why}); the previous outputs are kept",
            problems=[f"the command: {shown}"],
            hint="its own messages are above; fix the cause and run the stage again (dvc repro)",
        )
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch.rename(folder)


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    command.check_id(args.benchmark, "--benchmark")
    params = require_params(args)
    spec = entry(params, args.model, args.benchmark)
    version = launch.require_installed(spec)
    model_dir = checked_model(spec)
    limit = min((x for x in (params.extract.limit, spec.limit) if x is not None), default=None)
    (record,) = export.export(params, args.model, [args.benchmark], launch.tasks_dir(args.model), limit)
    task_dir = launch.tasks_dir(args.model) / record.task
    folder = launch.run_dir(args.model, args.benchmark)
    scratch = launch.tasks_dir(args.model) / f"{args.benchmark}.out"  # git-ignored, renamed into place
    add_bos = api_bos(spec, model_dir, record.add_bos_token)
    words = launch.argv(spec, record.task, str(model_dir), add_bos, str(task_dir), str(scratch))
    shown = launch.argv(spec, record.task, launch.MODEL_DIR, add_bos, launch.TASK_DIR, launch.OUT_DIR)
    key = launch.fingerprint(task_dir / export.DOCS, record.model_dump(mode="json"), spec, shown, version)
    where = (
        f"{literal(record.task)} for {literal(args.model)} ({record.pairs_exported} of {record.pairs_prepared} pairs)"
    )
    if kept(folder, key):
        command.out.print(f"lm-eval: {where}: already run with these settings, kept", highlight=False)
    elif from_recorded(folder, key):
        command.out.print(f"lm-eval: {where}: unchanged since the recorded run, reused", highlight=False)
    else:
        command.out.print(f"lm-eval: {where}: running {literal(shlex.join(words))}", highlight=False)
        run_lm_eval(words, folder, scratch, record.task)
        shutil.copyfile(task_dir / export.RECORD, folder / export.RECORD)
        run_record = {"fingerprint": key, "command": shown, "lm_eval_version": version}
        write_text(folder / launch.RECORD, json.dumps(run_record, indent=1, sort_keys=True) + "\n")
    out = layout.scores_path(args.benchmark, args.model)
    frame, meta, file_meta = samples.import_scores(
        layout.prepared_path(args.benchmark), folder, args.benchmark, args.model, record.rule, record.word_prob
    )
    write_table(out, frame, ScoreRow, file_meta)
    write_json(layout.meta_path(out), paired.describing(meta, out), ImportMeta)
    command.out.print(
        f"[green]imported[/] {meta.pairs_scored} of {meta.pairs_prepared} pairs of {literal(args.benchmark)} "
        f"(lm-eval {literal(meta.lm_eval_version)}) -> {literal(str(out))}",
        highlight=False,
    )
    return 0
