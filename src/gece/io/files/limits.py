"""How much one run reads (:data:`LIMITS`, each raised by ``$GECE_MAX_<NAME>``), and the check every input file
passes first (:func:`check_input`: a readable regular file within its limit).

A module of its own because the scoring code checks the model's files with it (:mod:`gece.scoring.weights_gate`):
it is part of the code of :func:`gece.scoring.extraction.scoring_code`, and the rest of the input checks
(:mod:`gece.io.files.inputs`) is not, so an edit there re-scores no model.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gece.base.errors import GeceError
from gece.io.files.outputs import node_kind

MiB = 1 << 20
# what one run holds in memory at most: bytes of a text input, rows of a Parquet file read whole
LIMITS = {
    "params_bytes": 1 * MiB,  # params.yaml, data.dvc
    "csv_bytes": 64 * MiB,  # a benchmark or reference CSV (the largest shipped: well under 1 MiB)
    "json_bytes": 64 * MiB,  # a report JSON, lm-eval's results_<date>.json
    # lm-eval's samples_<task>_<date>.jsonl: about 1 KB a pair, so 50 MB for the largest benchmark (50,000 pairs)
    "lmeval_bytes": 256 * MiB,
    # steps of aligning two sentences, per word of the pair (at least 50 words counted):
    # gece.io.formats.benchmarks.align;
    # the shipped pairs need at most 1.6 a word, a sentence of one word repeated n times n/2
    "align_steps": 10,
    # rows of a score (or prepared) file read whole (metrics, ablate, compare, calibrate, reference): about
    # 1 KB each at peak (make bench: reports/bench/bounds.json), so about 1 GB; the largest benchmark has 50,000
    "rows": 1_000_000,
    "parquet_bytes": 1024 * MiB,  # uncompressed bytes of such a file's columns
}


def limit(name: str) -> int:
    """The limit ``name`` of :data:`LIMITS`, or ``$GECE_MAX_<NAME>`` when that is set to a positive number."""
    env = f"GECE_MAX_{name.upper()}"
    raw = os.environ.get(env)
    if raw is None:
        return LIMITS[name]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
        raise GeceError(
            f"environment variable {env}={raw!r} is not a positive whole number",
            hint=f"set it to a number ({LIMITS[name]} by default) or unset it",
        )
    return int(raw)


def over_limit(path: str | Path, what: str, size: int, name: str) -> GeceError | None:
    """A GeceError when ``size`` (of ``what``, e.g. "rows") exceeds the limit ``name``, else None."""
    cap = limit(name)
    if size <= cap:
        return None
    return GeceError(
        f"{path}: {size:,} {what} exceed the limit of {cap:,} {what} that one run reads",
        hint=f"check that this is the right file; to read it anyway, raise the limit with "
        f"GECE_MAX_{name.upper()}={size} in the environment (memory grows with it)",
    )


def check_input(path: str | Path, hint: str, size_limit: str | None = None) -> Path:
    """``path`` if it is a readable regular file (within ``size_limit`` of :data:`LIMITS`), else a GeceError."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        dangling = f" (a symlink to {os.readlink(path)}, which does not exist)" if path.is_symlink() else ""
        raise GeceError(f"{path}: file not found{dangling}", hint=hint) from None
    except OSError as e:  # a loop of symlinks, a name too long, a component that is a file
        raise GeceError(f"{path}: cannot be read ({e.strerror})", hint=hint) from None
    if not stat.S_ISREG(st.st_mode):
        raise GeceError(f"{path}: not a file: it is {node_kind(st.st_mode)}", hint=hint)
    if not os.access(path, os.R_OK):
        raise GeceError(f"{path}: permission denied", hint=f"make it readable (chmod u+r {path})")
    if size_limit and (e := over_limit(path, "bytes", st.st_size, size_limit)):
        raise e
    return path
