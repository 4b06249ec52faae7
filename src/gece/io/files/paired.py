"""Files that belong together: a data file (a token or score Parquet) and the ``.meta.json`` that describes it.

Two renames are never atomic: a writer killed between them leaves a new data file beside the old meta. So the
meta records the sha256 of the data file's bytes (``data_sha256``), written after the data file, and every
reader of the pair compares the two (:func:`check_pair`): a mixed pair is refused, naming the command that
writes it, and that command's next run writes both again. A meta without the field (written before gece
recorded it) is not checked.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from gece.base.errors import GeceError

M = TypeVar("M", bound=BaseModel)
FIELD = "data_sha256"
CHUNK = 1 << 20


def sha256_of(path: str | Path) -> str:
    """The sha256 of a file's bytes (read in 1 MiB pieces), as hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def describing(meta: M, data: str | Path) -> M:
    """``meta`` recording the sha256 of ``data``, the file it describes (written already)."""
    return meta.model_copy(update={FIELD: sha256_of(data)})


def check_pair(data: str | Path, meta_path: str | Path, meta: BaseModel | dict, rerun: str) -> None:
    """A GeceError (exit 2) when ``meta`` (read from ``meta_path``) records a sha256 that is not that of
    ``data``: the two were written by different runs (a writer stopped between the two renames). ``rerun`` is
    the command that writes both."""
    recorded = meta.get(FIELD) if isinstance(meta, dict) else getattr(meta, FIELD, None)
    if recorded is None:
        return
    actual = sha256_of(data)
    if actual != recorded:
        raise GeceError(
            f"{data} and {meta_path} do not belong together: the meta file describes a data file with sha256 "
            f"{recorded[:12]}..., this one has {actual[:12]}... (a run stopped between writing the two)",
            hint=f"{rerun} (it writes both again)",
        )
