"""``gece lmeval-run``: the DVC stage ``lmeval`` (one per benchmark and ``lmeval_runs`` entry): lm-evaluation-harness
scores one benchmark with a registry entry ``engine: lm-eval``, and the import writes its score file.

In order, every check before any work: the entry and the benchmark; the entry's prompt, and its rule under a chat
prompt (:func:`gece.lmeval.launch.prompt_of`, :func:`gece.lmeval.launch.check_rule`); lm-eval (and vLLM) installed
(:func:`gece.lmeval.launch.require_installed`); the model directory lm-eval will load, through gece's model-file gate
(:func:`gece.scoring.weights_gate.check_directory`: headers parsed with bounds, no pickle); for a chat prompt, the
model's chat template (:func:`check_chat`); then

1. the export of the benchmark's task (:func:`gece.lmeval.export.export`, under the entry's ``limit``);
2. the run: the stage's folder when it already holds a run with this fingerprint; else the last recorded run, put
   back from DVC's cache into scratch when its fingerprint is this one (:func:`gece.pipeline.reuse.restore`); else
   lm-eval runs (its own progress on the terminal) into scratch;
3. the run checked and imported, then swapped in with the score file (:mod:`gece.lmeval.run_folder`: a run
   that fails a check, scores fewer pairs than were exported, or breaks at any step before the swap leaves the
   previous run and score file as they were) -> ``artifacts/scores/<b>/<m>.parquet`` and ``<m>.meta.json``.

One task per stage: a killed ``dvc repro`` resumes at the first task not recorded in dvc.lock, and an edited
benchmark re-runs its own task only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
from pathlib import Path

from gece.base import faults
from gece.base.errors import GeceError
from gece.base.terminal import literal
from gece.cmd import command
from gece.cmd.command import Output
from gece.io.files.json_reader import read_json_file, read_json_lines
from gece.io.files.outputs import write_text
from gece.io.paths import layout
from gece.io.settings.harness_entry import ENGINE, HarnessSpec, is_harness
from gece.io.settings.params import params_if_valid, require_params
from gece.io.settings.prompts import PromptSpec
from gece.lmeval import export, launch, run_folder, samples
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
    try:
        return [layout.prepared_path(args.benchmark), *local, launch.run_dir(args.model, args.benchmark), reuse.LOCK]
    except GeceError:  # no plain id: run refuses it
        return []


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """The score file and its meta; lm-eval's output folder, read first (a run kept) and replaced whole by a new
    run; and the scratch space: the exported task and the new run, checked there before it is swapped in (where
    the old folder waits meanwhile)."""
    try:
        out = layout.scores_path(args.benchmark, args.model)
        task = launch.tasks_dir(args.model) / export.task_name(args.benchmark)
        folder = launch.run_dir(args.model, args.benchmark)
    except GeceError:  # no plain id: run refuses it
        return {}
    return {
        "lm-eval's output": Output(folder, "folder", updated=True),
        "the score file": Output(out),
        "its meta": Output(layout.meta_path(out)),
        "the exported task": Output(task, "scratch"),
        "the new run": Output(run_folder.scratch_dir(args.model, args.benchmark), "scratch"),
        "the previous run, while the new one moves in": Output(
            run_folder.trash_dir(args.model, args.benchmark), "scratch", updated=True
        ),
    }


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say
STAGE = {
    "name": "lmeval",
    "about": "a registry entry with engine: lm-eval (params.yaml lmeval_runs): lm-evaluation-harness scores each "
    "benchmark, one task per stage, and the import writes its score file (docs/lmeval.md); no token file. A task "
    "whose exported pairs, entry and lm-eval version are those of its recorded run is reused from it, not run again",
    "argv": ["lmeval-run", "--model", "{model}", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks", "model": "lmeval_runs"},
    "params": [
        "benchmarks.{benchmark}",
        "extract.rule",
        "extract.word_prob",
        "extract.limit",
        "registry.{model}",
        "prompts",
    ],
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


def check_chat(model_dir: Path, prompt: PromptSpec | None, name: str | None, model: str) -> None:
    """A chat prompt needs the model's chat template, taking the prompt's system message: rendered here as lm-eval
    renders it (a system message, if any, and an empty user turn, with the generation prompt), in gece's sandbox
    (:func:`gece.scoring.prompts.render`); a GeceError before lm-eval runs where it has none, refuses the messages
    or leaves the system message out (lm-eval would fail on a missing template, and drop a system message its
    template refuses with a warning only)."""
    if prompt is None or not prompt.chat:
        return
    from transformers import AutoTokenizer

    from gece.scoring import prompts

    tok = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    where = f"prompt {name} of {model}"
    source = prompts.chat_template(tok)
    if source is None:
        raise GeceError(
            f"{where}: the model has no chat template (its tokenizer has no chat_template), which lm-eval's "
            "--apply_chat_template needs",
            hint=f"give registry.{model}.prompt a prompt without chat: true, or remove it",
        )
    messages = [{"role": "system", "content": prompt.system}] if prompt.system is not None else []
    special = {k: str(v) for k in prompts.SPECIAL if isinstance(v := getattr(tok, k, None), str)}
    messages.append({"role": "user", "content": ""})
    text = prompts.render(source, where, messages=messages, add_generation_prompt=True, **special)
    if prompt.system is not None and prompt.system not in text:
        raise GeceError(
            f"{where}: the model's chat template does not show the system message",
            hint=f"give registry.{model}.prompt a prompt without system, or score with gece's own engine",
        )


def fingerprint_of(record: Path) -> str | None:
    """The fingerprint a run's record holds (None for a record that cannot be read)."""
    try:
        data = read_json_file(record, "run the stage again")
    except GeceError:
        return None
    return data.get("fingerprint") if isinstance(data, dict) else None


def kept(folder: Path, key: str) -> bool:
    """Whether ``folder`` holds a finished run whose fingerprint is ``key``."""
    return (folder / launch.RECORD).is_file() and fingerprint_of(folder / launch.RECORD) == key


def from_recorded(folder: Path, scratch: Path, key: str) -> bool:
    """Put the last recorded run of ``folder`` (dvc.lock and DVC's cache) into ``scratch``, whole, when its
    fingerprint is ``key``."""
    previous = reuse.previous_outputs(folder, whole=True)
    if launch.RECORD not in previous or fingerprint_of(previous[launch.RECORD]) != key:
        return False
    reuse.restore(previous, scratch, whole=True)
    return True


def run_lm_eval(words: list[str], scratch: Path, task: str) -> None:
    """Run lm-eval into ``scratch`` (emptied first); a GeceError naming the task and the command when it fails."""
    run_folder.remove(scratch)
    shown = shlex.join(words)
    res = subprocess.run(words, env=launch.environment(words), check=False)
    if res.returncode != 0:
        raise GeceError(
            f"lm-eval failed on task {task} (exit status {res.returncode}); the previous outputs are kept",
            problems=[f"the command: {shown}"],
            hint="its own messages are above; fix the cause and run the stage again (dvc repro)",
        )


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    command.check_id(args.benchmark, "--benchmark")
    params = require_params(args)
    spec = entry(params, args.model, args.benchmark)
    prompt = launch.prompt_of(params, args.model, spec)
    launch.check_rule(prompt, args.model, args.benchmark, params.rule_for(args.benchmark))
    version = launch.require_installed(spec)
    model_dir = checked_model(spec)
    check_chat(model_dir, prompt, spec.prompt, args.model)
    limit = min((x for x in (params.extract.limit, spec.limit) if x is not None), default=None)
    folder = launch.run_dir(args.model, args.benchmark)
    scratch, trash = (
        run_folder.scratch_dir(args.model, args.benchmark),
        run_folder.trash_dir(args.model, args.benchmark),
    )
    tasks = launch.tasks_dir(args.model)
    run_folder.check_scratch([tasks.parent, tasks, tasks / export.task_name(args.benchmark), folder.parent])
    run_folder.recover(folder, trash)
    (record,) = export.export(params, args.model, [args.benchmark], launch.tasks_dir(args.model), limit)
    task_dir = launch.tasks_dir(args.model) / record.task
    add_bos = api_bos(spec, model_dir, record.add_bos_token)
    words = launch.argv(spec, record.task, str(model_dir), add_bos, str(task_dir), str(scratch), prompt)
    shown = launch.argv(spec, record.task, launch.MODEL_DIR, add_bos, launch.TASK_DIR, launch.OUT_DIR, prompt)
    key = launch.fingerprint(task_dir / export.DOCS, record.model_dump(mode="json"), spec, shown, version, prompt)
    where = (
        f"{literal(record.task)} for {literal(args.model)} ({record.pairs_exported} of {record.pairs_prepared} pairs)"
    )
    swap: run_folder.Swap | None = (scratch, folder, trash)
    if kept(folder, key):
        command.out.print(f"lm-eval: {where}: already run with these settings, kept", highlight=False)
        swap = None
    elif from_recorded(folder, scratch, key):
        command.out.print(f"lm-eval: {where}: unchanged since the recorded run, reused", highlight=False)
    else:
        command.out.print(f"lm-eval: {where}: running {literal(shlex.join(words))}", highlight=False)
        run_lm_eval(words, scratch, record.task)
        faults.checkpoint("lmeval:ran")
        run_folder.check_run(scratch, record.task)  # before gece adds its records
        write_text(scratch / export.RECORD, (task_dir / export.RECORD).read_text(encoding="utf-8"))
        run_record = {"fingerprint": key, "command": shown, "lm_eval_version": version}
        write_text(scratch / launch.RECORD, json.dumps(run_record, indent=1, sort_keys=True) + "\n")
    run_dir = folder if swap is None else scratch
    try:
        run_folder.check_run(run_dir, record.task)
        frame, meta, file_meta = samples.import_scores(
            layout.prepared_path(args.benchmark),
            run_dir,
            args.benchmark,
            args.model,
            record.rule,
            record.word_prob,
            folder,
            chat=prompt is not None and prompt.chat,
        )
        exported = [d["pair_id"] for _, d in read_json_lines(task_dir / export.DOCS, "export again", "lmeval_bytes")]
        run_folder.check_complete(frame, exported, run_dir, record.task)
    except GeceError as e:
        if swap is None:  # the stage's own folder, kept: running again would keep it again
            e.hint = f"{folder} was changed since its run: remove it and run the stage again (dvc repro)"
        elif "outputs are kept" not in e.message:
            e.message += "; nothing was imported and the previous outputs are kept"
            e.hint = run_folder.AGAIN
        raise
    out = layout.scores_path(args.benchmark, args.model)
    run_folder.commit(out, frame, file_meta, meta, swap)
    command.out.print(
        f"[green]imported[/] {meta.pairs_scored} of {meta.pairs_prepared} pairs of {literal(args.benchmark)} "
        f"(lm-eval {literal(meta.lm_eval_version)}) -> {literal(str(out))}",
        highlight=False,
    )
    return 0
