"""How the ``lmeval`` stage runs lm-evaluation-harness for one benchmark of an ``engine: lm-eval`` entry
(docs/lmeval.md "One entry, then dvc repro"): where its files go, the argument list, the check that lm-eval is
installed, and the fingerprint that lets a run be reused.

Files of run ``<m>``, benchmark ``<b>``: the task gece exports, ``lmeval/tasks/<m>/gece_<b>/`` (git-ignored: its
YAML names its documents by absolute path), and the stage's DVC output ``lmeval/runs/<m>/<b>/``: lm-eval's
``samples_gece_<b>_<date>.jsonl`` and ``results_<date>.json`` (under lm-eval's ``<model name>/`` folder), the
export's record (``export.json``) and :data:`RECORD` (the fingerprint and the command).

The command (:func:`argv`) is the entry's ``launcher`` followed by lm_eval's flags; ``--model_args`` is gece's
``pretrained=<the checked model directory>`` (``tokenizer=`` for an API backend), the entry's allowed
``model_args`` in their order, and the export's ``add_bos_token``. It runs as a list, never through a shell.

The fingerprint (:func:`fingerprint`) is what decides the samples: the exported documents (their bytes: pairs,
sentences, requests), the export's rule, BOS option and exclusions, the registry entry, the command with the
machine's paths left out, and lm-eval's version. A run whose fingerprint is the recorded run's is copied from
that run (:mod:`gece.pipeline.reuse`, as extract reuses its token files), so an edit of gece's code, or of
another benchmark, runs no lm-eval.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from gece.base.errors import GeceError
from gece.io.settings.harness_entry import HarnessSpec, arg_text

TASKS = Path("lmeval/tasks")
RUNS = Path("lmeval/runs")
RECORD = "run.json"
MODEL_DIR, TASK_DIR, OUT_DIR = "<model>", "<tasks>", "<out>"  # the machine's paths, as the fingerprint writes them
INSTALL = {
    "lm_eval": "pip install 'gece[lmeval]' (lm-evaluation-harness 0.4 with its HF backend)",
    "vllm": "pip install 'lm-eval[vllm]' (vLLM, on a machine with CUDA GPUs)",
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


def argv(spec: HarnessSpec, task: str, model_dir: str, add_bos: bool | None, tasks: str, out: str) -> list[str]:
    """The argument list that runs lm-eval on one task (module docstring)."""
    h = spec.harness
    words = [*h.launcher, "--model", h.model, "--model_args", model_args(spec, model_dir, add_bos)]
    words += ["--tasks", task, "--include_path", tasks, "--output_path", out, "--log_samples"]
    words += ["--batch_size", str(h.batch_size)]
    return words + (["--device", h.device] if h.device is not None else [])


def require_installed(spec: HarnessSpec) -> str:
    """lm-eval's version; a GeceError saying what to install when lm-eval (or, for the vllm backend, vLLM) is
    missing or the launcher's program is not on PATH, before any work."""
    needed = ["lm_eval"] + (["vllm"] if spec.harness.model == "vllm" else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise GeceError(
            f"engine: lm-eval with harness.model {spec.harness.model} needs {' and '.join(missing)}, "
            "which is not installed",
            hint="; ".join(INSTALL[m] for m in missing),
        )
    program = spec.harness.launcher[0]
    if shutil.which(program) is None:
        raise GeceError(
            f"harness.launcher: {program!r} is not a program on PATH",
            hint=f"{INSTALL['lm_eval']}, or give harness.launcher the program that starts lm_eval",
        )
    try:
        return version("lm_eval")
    except PackageNotFoundError:
        return "unknown"


def fingerprint(docs: Path, record: dict[str, Any], spec: HarnessSpec, words: list[str], lm_eval: str) -> str:
    """sha256 of what decides one task's samples (module docstring); ``words`` is the command with the machine's
    paths already replaced (:data:`MODEL_DIR`, :data:`TASK_DIR`, :data:`OUT_DIR`)."""
    export = {k: v for k, v in record.items() if k not in ("model_dir", "model_args")}
    content = {
        "docs": hashlib.sha256(docs.read_bytes()).hexdigest(),
        "export": export,
        "entry": spec.model_dump(mode="json", exclude={"checked_against"}),  # which run to report against
        "argv": words,
        "lm_eval": lm_eval,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
