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

**Putting a recorded file back** is :func:`restore`, the one way every stage does it (extract, calibrate, the
lm-eval stage). What the cache says is not trusted: each manifest entry must be a plain relative path (no ``..``,
no absolute path, no empty or ``.`` part, nothing a name may not hold), each file's md5 must be the one the
manifest records (DVC's cache is addressed by it: an object's name is its md5), no write goes through a link
(a folder on the way that is a symlink is refused; a file is written beside its place and renamed over it), and
with ``whole`` the folder is emptied first, so it ends holding exactly the recorded run's files. A manifest that
breaks these rules is a GeceError naming the cache object and the entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import yaml

from gece.base.errors import GeceError

log = logging.getLogger("gece")

LOCK = Path("dvc.lock")
MD5 = re.compile(r"[0-9a-f]{32}")
DAMAGED = (
    "remove that object from DVC's cache (dvc fetch brings a good copy from the remote), or remove the stage's "
    "entry from dvc.lock to reuse nothing, and run the stage again"
)


def _recorded(out_dir: Path, lock: Path) -> tuple[str, dict] | None:
    """The stage of ``lock`` that has ``out_dir`` as an output, and its entry (None for a lock DVC did not write)."""
    try:
        data = yaml.safe_load(lock.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    stages = data.get("stages") if isinstance(data, dict) else None
    for name, entry in (stages if isinstance(stages, dict) else {}).items():
        outs = entry.get("outs") if isinstance(entry, dict) else None
        if any(isinstance(o, dict) and Path(str(o.get("path", ""))) == out_dir for o in outs or []):
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


def plain_relpath(relpath: object) -> PurePosixPath | None:
    """``relpath`` as a plain relative path below a folder, or None: text of at most 4,096 bytes, relative, with no
    empty, ``.`` or ``..`` part, no backslash and no NUL or control character."""
    if not isinstance(relpath, str) or not relpath or len(relpath.encode("utf-8", "replace")) > 4096:
        return None
    parts = relpath.split("/")
    if any(p in ("", ".", "..") or "\\" in p or not p.isprintable() for p in parts):
        return None
    return PurePosixPath(*parts)


def _manifest(path: Path, out_dir: Path, stage: str) -> dict[str, str]:
    """The entries of a folder's manifest in DVC's cache (relpath -> md5), each checked; a GeceError otherwise."""
    where = f"DVC's cache object {path} (the folder {out_dir} of stage {stage} in dvc.lock)"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise GeceError(f"{where}: not a folder manifest ({e})", hint=DAMAGED) from None
    if not isinstance(entries, list):
        raise GeceError(f"{where}: not a folder manifest (a list of files)", hint=DAMAGED)
    files: dict[str, str] = {}
    for i, item in enumerate(entries, start=1):
        rel = item.get("relpath") if isinstance(item, dict) else None
        md5 = item.get("md5") if isinstance(item, dict) else None
        if plain_relpath(rel) is None:
            raise GeceError(
                f"{where}: entry {i}, relpath {str(rel)[:200]!r}, is not a plain relative path inside the folder",
                hint=DAMAGED,
            )
        if not (isinstance(md5, str) and MD5.fullmatch(md5)) or rel in files:
            raise GeceError(f"{where}: entry {i} ({rel!r}) has no md5 or repeats a file", hint=DAMAGED)
        files[rel] = md5
    return files


def previous_outputs(out_dir: str | Path, lock: str | Path = LOCK, *, whole: bool = False) -> dict[str, Path]:
    """The files of the folder ``out_dir`` as the last recorded run of its stage wrote them (relative path -> a
    read-only file in DVC's cache, named by its md5), or {} when there is nothing to reuse: no lock entry, or the
    objects are not in the cache (then only those that are; with ``whole``, none unless all are: a run is reused
    whole or not at all). A manifest that is no plain list of files is a GeceError (module docstring)."""
    out_dir, lock = Path(out_dir), Path(lock)
    found = _recorded(out_dir, lock) if lock.is_file() else None
    if found is None:
        return {}
    stage, entry = found
    (out,) = [o for o in entry["outs"] if isinstance(o, dict) and Path(str(o.get("path", ""))) == out_dir][:1]
    md5 = str(out.get("md5", ""))
    store = _cache() if md5.endswith(".dir") and MD5.fullmatch(md5.removesuffix(".dir")) else None
    manifest = _object(store, md5) if store else None
    if manifest is None or not manifest.is_file():
        return {}
    files = {rel: _object(store, md5) for rel, md5 in _manifest(manifest, out_dir, stage).items()}  # type: ignore[arg-type]
    found = {rel: path for rel, path in files.items() if path.is_file()}
    return {} if whole and len(found) < len(files) else found


def _folders_on_the_way(folder: Path, rel: PurePosixPath) -> None:
    """Refuse a symlink, or a file, where a folder between ``folder`` and the file ``rel`` is (or ``folder`` is)."""
    here = folder
    for part in ("", *rel.parts[:-1]):
        here = here / part if part else here
        if here.is_symlink() or (os.path.lexists(here) and not here.is_dir()):
            raise GeceError(
                f"{here} is {'a symlink' if here.is_symlink() else 'not a folder'}: gece puts a recorded file at "
                f"{folder / rel} and never writes through a link",
                hint=f"remove {here} (a stage writes this folder itself) and run the stage again",
            )


def restore(files: Mapping[str, Path], folder: Path, *, whole: bool = False) -> None:
    """Put recorded files back in ``folder``: ``files`` maps each file's plain relative path to its object in DVC's
    cache (:func:`previous_outputs`); each is copied beside its place, its md5 checked against the object's name,
    and renamed over its place. ``whole``: ``folder`` is emptied first, so it holds exactly these files (a scratch
    folder the caller swaps in). Anything the module docstring refuses is a GeceError, before its file is written."""
    from gece.io.files.outputs import atomic_path

    plain = {rel: plain_relpath(rel) for rel in files}
    bad = [rel for rel, p in plain.items() if p is None]
    if bad:
        raise GeceError(f"{folder}: the recorded file {str(bad[0])[:200]!r} is no plain relative path", hint=DAMAGED)
    if whole:
        if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
            folder.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    for rel, src in files.items():
        dest = folder / plain[rel]  # type: ignore[operator]
        _folders_on_the_way(folder, plain[rel])  # type: ignore[arg-type]
        dest.parent.mkdir(parents=True, exist_ok=True)
        _folders_on_the_way(folder, plain[rel])  # type: ignore[arg-type]  (none swapped in meanwhile)
        with atomic_path(dest) as tmp:
            digest = hashlib.md5(usedforsecurity=False)
            with open(src, "rb") as fin, open(tmp, "wb") as fout:
                while block := fin.read(1 << 22):
                    digest.update(block)
                    fout.write(block)
            if digest.hexdigest() != src.parent.name + src.name:
                raise GeceError(
                    f"DVC's cache object {src} (the recorded {rel}) does not hold what its name says: md5 "
                    f"{digest.hexdigest()}; nothing was put at {dest}",
                    hint=DAMAGED,
                )
