"""Where every file of the pipeline lives: the roots and the artifacts (:mod:`gece.io.paths.data_layout` has the data
snapshot's files, :mod:`gece.io.paths.report_layout` the reports'); these three modules alone spell a path, so a stage
imports the paths of the families it reads and writes.

Paths are relative to the repository root (the directory ``dvc repro`` runs in):

- ``data/``: the data snapshot (DVC-tracked by ``data.dvc``): benchmark CSVs and the authors' released scores.
- ``artifacts/``: cached stage outputs (Parquet; DVC-tracked, pushed to a remote, not to git).
- ``reports/``: the results. What a reviewer reads stays in git (``summary.json``, ``tables/``, ``index.html``, the
  README's figure); the detail (per-run JSON, figures) is a DVC-cached output (docs/dvc.md, "What git holds").

dvc.yaml's paths are written from the commands' declarations, which name these (``gece stage-deps``).
"""

from __future__ import annotations

import re
from pathlib import Path

from gece.base.errors import GeceError
from gece.io.settings.ids import check_id

DATA = Path("data")
ARTIFACTS = Path("artifacts")
REPORTS = Path("reports")
PROMPT_RULE = "[a-z0-9][a-z0-9._+-]*"  # a prompt's name (gece.io.settings.prompts) names a folder: an id, or "+"


def benchmark_id(benchmark: str) -> str:
    return check_id(benchmark, "benchmark")


def model_id(model: str) -> str:
    return check_id(model, "model")


# -------------------------------------------------------------------------- artifacts
def prepared_path(benchmark: str) -> Path:
    """``artifacts/prepared/<benchmark>.parquet``: the validated, aligned pairs."""
    return ARTIFACTS / "prepared" / f"{benchmark_id(benchmark)}.parquet"


def annotations(benchmark: str) -> Path:
    """``artifacts/annotations/<benchmark>.parquet``: one row per pair and annotator (zero rows: none)."""
    return ARTIFACTS / "annotations" / f"{benchmark_id(benchmark)}.parquet"


def annotated(benchmark: str) -> Path:
    """``artifacts/annotated/<benchmark>.parquet``: per-pair labels derived from the annotators."""
    return ARTIFACTS / "annotated" / f"{benchmark_id(benchmark)}.parquet"


def check_prompt_name(value: str) -> str:
    """``value`` if it is a prompt name, else a GeceError (outside the ids, which the scoring code reads)."""
    if not isinstance(value, str) or re.fullmatch(PROMPT_RULE, value) is None:
        raise GeceError(f"prompt {value!r} is not a prompt name", hint=f"{PROMPT_RULE}: ids with '+' besides")
    return value


def prompted_dir(model: str) -> Path:
    """``artifacts/prompted/<model>``: a model's token scores under each prompt of ``ablate.prompts``."""
    return ARTIFACTS / "prompted" / model_id(model)


def tokens_dir(model: str, prompt: str | None = None) -> Path:
    """``artifacts/tokens/<model>``: a model's token scores of every benchmark (one extract stage per model); under a
    prompt, ``artifacts/prompted/<model>/<prompt>``."""
    return ARTIFACTS / "tokens" / model_id(model) if prompt is None else prompted_dir(model) / check_prompt_name(prompt)


def tokens_path(model: str, benchmark: str, prompt: str | None = None) -> Path:
    """``<tokens_dir>/<benchmark>.parquet``: every target token's log-probability and logit."""
    return tokens_dir(model, prompt) / f"{benchmark_id(benchmark)}.parquet"


def tokens_shards_dir(model: str, benchmark: str, prompt: str | None = None) -> Path:
    """``artifacts/tokens/<model>.shards/<benchmark>`` (...``prompted/<model>.shards/<prompt>/...``), outside DVC's."""
    root = tokens_dir(model) if prompt is None else prompted_dir(model)
    return (
        root.with_name(f"{root.name}.shards")
        / (tokens_dir(model, prompt).name if prompt else "")
        / benchmark_id(benchmark)
    )


def scores_root() -> Path:
    """``artifacts/scores``: every score file, one folder per benchmark."""
    return ARTIFACTS / "scores"


def scores_dir(benchmark: str) -> Path:
    """``artifacts/scores/<benchmark>``."""
    return scores_root() / benchmark_id(benchmark)


def scores_file(b: str, m: str) -> str:
    """A scored model's per-pair scores, relative to the folder of every score file (``scores_root()``, or the
    report's ``--scores``)."""
    return f"{b}/{m}.parquet"


def scores_path(benchmark: str, model: str) -> Path:
    """``artifacts/scores/<benchmark>/<model>.parquet``: a scored model's per-pair scores."""
    return scores_root() / scores_file(benchmark_id(benchmark), model_id(model))


def _beside(out: str | Path, suffix: str) -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + suffix)


def meta_path(scores: str | Path) -> Path:
    """``<tokens or scores without .parquet>.meta.json``: what scored the pairs (a DVC output)."""
    return _beside(scores, ".meta.json")


def timing_path(scores: str | Path) -> Path:
    """``<tokens without .parquet>.timing.json``: how the extract run went on this machine (ignored by DVC)."""
    return _beside(scores, ".timing.json")


def shards_dir(scores: str | Path) -> Path:
    """``<tokens without .parquet>.shards/``: the finished shards of an interrupted extract run."""
    return _beside(scores, ".shards")


def calibrated_dir(benchmark: str) -> Path:
    """``artifacts/calibrated/<benchmark>``."""
    return ARTIFACTS / "calibrated" / benchmark_id(benchmark)


def calibrated_path(benchmark: str, model: str) -> Path:
    """``artifacts/calibrated/<benchmark>/<model>.parquet``: per-pair calibrated scores."""
    return calibrated_dir(benchmark) / f"{model_id(model)}.parquet"


# ------------------------------------------------- reports, relative to the reports directory
