"""A folder of outputs removed before a rerun writes it again (:func:`clear_output_dir`, :func:`clear_stale_runs`),
refusing one that holds anything gece does not write there. Apart from :mod:`gece.io.files.output_dirs`, the check
every command makes of a folder it writes, since only some stages clear one."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

from gece.base.errors import GeceError


def clear_output_dir(
    path: str | Path, suffixes: tuple[str, ...], option: str, keep: Collection[Path] | None = None
) -> None:
    """Remove ``path``, a directory of outputs that a rerun replaces, if it holds only files gece writes
    there (``suffixes``); a symlink, a file or a directory with other files in it is refused, not removed.
    With ``keep``, only the files not in ``keep`` (and the directories left empty) are removed."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        raise GeceError(
            f"{option} {path.parent}: {path} is {'a symlink' if path.is_symlink() else 'not a directory'}; "
            "gece replaces this directory, so it must be one it wrote",
            hint=f"remove {path} or give {option} another directory",
        )
    foreign = [p for p in path.rglob("*") if p.is_symlink() or not (p.is_dir() or p.name.endswith(suffixes))]
    if foreign:
        raise GeceError(
            f"{option} {path.parent}: {path} holds files gece did not write there, e.g. {foreign[0]}; "
            "gece replaces this directory",
            hint=f"move them away, or give {option} another directory",
        )
    import shutil

    if keep is None:
        shutil.rmtree(path)
        return
    kept = {Path(p).resolve() for p in keep}
    for p in sorted(path.rglob("*"), key=lambda x: len(x.parts), reverse=True):  # files, then emptied directories
        if p.is_dir():
            if not any(p.iterdir()):
                p.rmdir()
        elif p.resolve() not in kept:
            p.unlink()


def clear_stale_runs(folder: str | Path, models: Iterable[str], suffixes: tuple[str, ...], option: str) -> None:
    """Keep the files of ``folder`` (a benchmark's folder of per-run outputs, ``<model><suffix>`` for each of
    ``suffixes``) to those of the current runs ``models``: the others, files of runs no longer configured, are
    removed (:func:`clear_output_dir`, which refuses a folder holding files gece does not
    write)."""
    folder = Path(folder)
    keep = [folder / f"{m}{s}" for m in models for s in suffixes]
    clear_output_dir(folder, suffixes, option, keep=keep)
