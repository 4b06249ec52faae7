"""The lm-eval stage's run as a transaction: a new run is built in scratch, checked, imported, and only then swapped
in for the stage's folder, together with the score file (docs/lmeval.md "One entry, then dvc repro").

A run (lm-eval's output, or the recorded run put back from DVC's cache) lands in a scratch folder,
``lmeval/tasks/<m>/<b>.run`` (:func:`scratch_dir`). Before anything of the stage's outputs is touched:

1. :func:`check_run`: the folder is a real folder whose every entry is a folder or a regular file (no symlink, FIFO
   or device anywhere), named as lm-eval or gece writes them (``<model name>/samples_<task>_<date>.jsonl`` and
   ``results_<date>.json``; ``export.json`` and ``run.json`` at the top), with exactly one samples file, of the task
   the export named, and its results file beside it;
2. the import (:func:`gece.lmeval.samples.import_scores`: every sample a prepared pair, with its sentences and
   requests);
3. :func:`check_complete`: lm-eval scored every document the export wrote, no fewer (an interrupted or limited
   run is not a whole one; the entry's ``limit`` took effect in the export already);
4. :func:`commit`: the score file and its meta are written to temporary files beside their places, then the
   scratch folder replaces the stage's folder (the old one moved to ``<b>.old`` first, removed after), then the
   meta and the score file are renamed over theirs.

Any failure in 1-3, or while the temporary files are written, leaves the previous run and score file
byte-identical. A process killed inside step 4 leaves either the old folder in ``<b>.old`` (put back by the
next run: :func:`recover`) or the new one in place with the score file of the previous run, which the next run
imports again without running lm-eval (its fingerprint is kept); a score file and a meta of different runs are
refused by every reader (:mod:`gece.io.files.paired`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from gece.base import faults
from gece.base.errors import GeceError
from gece.io.files import paired
from gece.io.files.json_writer import write_json
from gece.io.files.outputs import atomic_path
from gece.io.files.writer import write_table
from gece.io.paths import layout
from gece.io.schemas.lmeval_files import ImportMeta
from gece.io.schemas.pair_rows import ScoreRow
from gece.lmeval import launch, samples

Swap = tuple[Path, Path, Path]  # the new run (scratch), the stage's folder, where the old one waits
RECORDS = ("export.json", launch.RECORD)  # gece's files at the top of a run folder
AGAIN = "run the stage again (dvc repro); lm-eval's own messages say what happened to its run"


def scratch_dir(model: str, benchmark: str) -> Path:
    """Where a new run of ``model`` on ``benchmark`` is built and checked (git-ignored, beside the exported task)."""
    return launch.tasks_dir(model) / f"{benchmark}.run"


def trash_dir(model: str, benchmark: str) -> Path:
    """Where the stage's previous folder waits while the new one is moved in."""
    return launch.tasks_dir(model) / f"{benchmark}.old"


def recover(folder: Path, trash: Path) -> None:
    """Put back the previous run a killed swap left in ``trash`` (its folder gone), or remove a finished swap's
    leftover."""
    if not os.path.lexists(folder) and trash.is_dir() and not trash.is_symlink():
        folder.parent.mkdir(parents=True, exist_ok=True)
        os.replace(trash, folder)
    remove(trash)


def remove(path: Path) -> None:
    """Remove ``path`` whatever it is (a link itself, never what it points to)."""
    if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
        path.unlink()
    shutil.rmtree(path, ignore_errors=True)


def _refused(folder: Path, what: str) -> GeceError:
    return GeceError(f"{folder}: {what}; nothing was imported and the previous outputs are kept", hint=AGAIN)


def _unreadable(e: OSError) -> None:
    raise GeceError(f"{e.filename}: cannot be read ({e.strerror})", hint=AGAIN)


def check_run(folder: Path, task: str) -> Path:
    """The samples file of ``task`` in the run ``folder``, after the module docstring's checks (step 1)."""
    if folder.is_symlink() or not folder.is_dir():
        raise _refused(folder, "not a folder of lm-eval's run (a symlink, a file or nothing)")
    samples_name = re.compile(rf"samples_{re.escape(task)}_{samples.DATE}\.jsonl")
    results_name = re.compile(rf"results_{samples.DATE}\.json")
    found: list[Path] = []
    for root, dirs, files in os.walk(folder, onerror=_unreadable):
        here = Path(root)
        for name in [*dirs, *files]:
            path, mode = here / name, os.lstat(here / name).st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise _refused(folder, f"{path} is {'a symlink' if stat.S_ISLNK(mode) else 'no regular file'}")
            if samples_name.fullmatch(name):
                found.append(path)
            elif not (results_name.fullmatch(name) or (here == folder and name in RECORDS)):
                raise _refused(folder, f"{path} is no file lm-eval writes for task {task}")
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(folder)) for p in found) or "none"
        raise _refused(folder, f"{len(found)} samples files of task {task} (samples_{task}_<date>.jsonl): {listed}")
    return found[0]


def check_complete(frame: pd.DataFrame, exported: Iterable[str], folder: Path, task: str) -> None:
    """Step 3: the run scored every document of the export, and nothing else."""
    wanted, scored = list(exported), set(frame["pair_id"])
    missing = [pid for pid in wanted if pid not in scored]
    if missing:
        raise _refused(
            folder,
            f"lm-eval scored {len(wanted) - len(missing)} of the {len(wanted)} pairs exported for {task} "
            f"(the first missing: {samples.shown_id(missing[0])}); a partial run is not imported whole",
        )
    extra = sorted(scored - set(wanted))
    if extra:
        raise _refused(
            folder, f"lm-eval scored {len(extra)} pair(s) the export of {task} did not write, e.g. {extra[0]}"
        )


def check_scratch(paths: Iterable[Path]) -> None:
    """The stage's scratch space holds no link on the way: it is written, and never through a link."""
    for path in paths:
        if path.is_symlink():
            raise GeceError(
                f"{path} is a symlink: the lmeval stage writes its scratch space there and never through a link",
                hint=f"remove {path} (the stage makes it again) and run the stage again",
            )


def commit(out: Path, frame: pd.DataFrame, file_meta: dict[str, str], meta: ImportMeta, swap: Swap | None) -> None:
    """Step 4: the score file ``out`` and its meta written, and, with ``swap`` (a checked scratch folder, the
    stage's folder, where the old one waits), the new run swapped in; without, the stage's folder already holds
    the run."""
    with atomic_path(out) as score_tmp, atomic_path(layout.meta_path(out)) as meta_tmp:
        write_table(score_tmp, frame, ScoreRow, file_meta)
        write_json(meta_tmp, paired.describing(meta, score_tmp), ImportMeta)
        if swap is not None:
            new, folder, trash = swap
            remove(trash)
            folder.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(folder):
                os.replace(folder, trash)
            faults.checkpoint("lmeval:swap")
            os.replace(new, folder)
            remove(trash)
