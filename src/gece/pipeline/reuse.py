"""What the last run of a stage wrote, found again after DVC removed it: the reuse behind one model load per model.

Extract and calibrate use it (each compares what it finds with a fingerprint its files carry). The extract stage
of a model writes one folder, ``artifacts/tokens/<model>/``, with a file per benchmark.
DVC removes a stage's outputs before it runs the stage again (a benchmark was added, one benchmark's pairs
changed, or a file of the stage's code changed), so the folder is gone, but the run that wrote it is
recorded in ``dvc.lock`` (the folder's hash) and its files are in DVC's cache (committed by that run, or
fetched by ``dvc pull``). :func:`previous_outputs` finds them there, so extract scores only what changed,
with one model load.

Every file of the recorded run is offered, whatever changed since: whether it still fits its benchmark is
the caller's check. Extract compares the fingerprint each token file carries
(:func:`gece.scoring.extraction.fingerprint`), which holds the prepared pairs, the model's entry, the
settings, the library versions and the hash of the code that scores, so an edit of the scoring code
re-scores and any other edit does not (docs/dvc.md, "Reuse by content").

Nothing here is needed to run the stage: without ``dvc.lock``, outside a DVC repository, or with the
objects not in the cache, there is nothing to reuse and every benchmark is scored.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path

import yaml

log = logging.getLogger("gece")

LOCK = Path("dvc.lock")


def _recorded(out_dir: Path, lock: Path) -> tuple[str, dict] | None:
    """The stage of ``lock`` that has ``out_dir`` as an output, and its entry."""
    try:
        data = yaml.safe_load(lock.read_text())
    except (OSError, yaml.YAMLError):
        return None
    stages = data.get("stages") if isinstance(data, dict) else None
    for name, entry in (stages if isinstance(stages, dict) else {}).items():
        if any(Path(o.get("path", "")) == out_dir for o in entry.get("outs", [])):
            return name, entry
    return None


def _cache() -> Path | None:
    """DVC's object store of this repository (``<cache.dir>/files/md5``, wherever the config puts it)."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(".") as repo:
            return Path(repo.cache.local.path)
    except (DvcException, OSError) as e:  # not a DVC repository, or DVC cannot read its config: nothing to reuse
        log.debug("no DVC cache to reuse from: %s", e)
        return None


def _object(store: Path, md5: str) -> Path:
    return store / md5[:2] / md5[2:]


def previous_outputs(out_dir: str | Path, lock: str | Path = LOCK) -> dict[str, Path]:
    """The files of the folder ``out_dir`` as the last recorded run of its stage wrote them (name -> a
    read-only file in DVC's cache), or {} when there is nothing to reuse: no lock entry, or the objects are
    not in the cache (then only those that are)."""
    out_dir, lock = Path(out_dir), Path(lock)
    found = _recorded(out_dir, lock) if lock.is_file() else None
    if found is None:
        return {}
    _, entry = found
    (out,) = [o for o in entry["outs"] if Path(o["path"]) == out_dir]
    store = _cache() if str(out.get("md5", "")).endswith(".dir") else None
    manifest = _object(store, out["md5"]) if store else None
    if manifest is None or not manifest.is_file():
        return {}
    files = {item["relpath"]: _object(store, item["md5"]) for item in json.loads(manifest.read_text())}
    return {name: path for name, path in files.items() if path.is_file()}


def restore(files: Iterable[tuple[Path, Path]]) -> None:
    """Write each recorded file (``(source in DVC's cache, destination)``) to its place, byte for byte, atomically."""
    from gece.io.files.outputs import atomic_path

    for src, dest in files:
        with atomic_path(dest) as tmp:
            shutil.copyfile(src, tmp)
