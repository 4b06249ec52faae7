"""A directory output checked before any work (:func:`check_output_dir`): every command that writes a folder does
this (``gece.cli.check_paths``), so it sits in the stage-independent core, apart from
:mod:`gece.io.files.destinations`."""

from __future__ import annotations

from pathlib import Path

from gece.base.errors import GeceError
from gece.io.files.outputs import check_output


def check_output_dir(path: str | Path, option: str, hint: str | None = None) -> Path:
    """``path`` if it is a directory or can be created as one, else a GeceError naming ``option``."""
    path = Path(path)
    hint = hint or f"give {option} a directory (it holds index.html, figures/ and tables/)"
    if path.exists() and not path.is_dir():
        raise GeceError(f"{option} {path} is not a directory", hint=hint)
    if not path.exists():
        check_output(path, option, hint)  # a new path whose nearest existing parent is a writable directory
    return path
