"""The input side of the file boundary: path names that can be looked up, and reading a file from outside.

Every input goes through :func:`gece.io.files.limits.check_input`: it must be a readable regular file no larger
than its stated limit (:data:`gece.io.files.limits.LIMITS`, raised with ``GECE_MAX_<NAME>`` in the environment).
A file from outside (a CSV, YAML, lm-eval's logs) is read through :func:`read_bytes` (checked with os.stat
before it is opened, opened without blocking, read no further than its limit), :func:`read_text` (UTF-8, errors
named by line) and :func:`gece.io.files.json_reader.parse_json` (bounded nesting and number length, no key written
twice). The output side is :mod:`gece.io.files.outputs`.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from gece.base.errors import GeceError
from gece.io.files.limits import check_input, limit, over_limit
from gece.io.files.outputs import node_kind

NAME_MAX, PATH_MAX = 255, 4096  # bytes of one name and of a whole path, as Linux looks them up


def check_names(paths: dict[str, str | Path]) -> None:
    """Each path of ``paths`` ({option: path}) can be looked up: no name of more than NAME_MAX bytes, no path
    of PATH_MAX (pathlib's ``exists()`` and ``is_dir()`` raise on those instead of answering), else a
    GeceError naming the option."""
    for option, path in paths.items():
        raw = os.fsencode(path)
        if len(raw) >= PATH_MAX or max(map(len, raw.split(b"/"))) > NAME_MAX:
            text = str(path)
            shown = text if len(text) <= 80 else f"{text[:60]}... ({len(raw)} bytes)"
            raise GeceError(
                f"{option} {shown}: the path is too long (at most {NAME_MAX} bytes a name, {PATH_MAX} in all)",
                hint=f"give {option} a shorter path",
            )


def check_input_dir(path: Path, option: str, holds: str) -> None:
    """A directory that is read (where it exists: what is missing in it is reported by its reader)."""
    if path.exists() and not path.is_dir():
        raise GeceError(f"{option} {path} is not a directory", hint=f"give {option} the directory of {holds}")


def iconv_hint(raw: bytes, path: str | Path) -> str:
    """How to re-save ``raw`` (the bytes of ``path``) as UTF-8: from UTF-16 when it looks like UTF-16, else latin-1."""
    utf16 = raw[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(raw) >= 4 and raw[1::2].count(0) > len(raw) // 4)
    source = "utf-16" if utf16 else "latin1"
    what = "the file is UTF-16; " if utf16 else ""
    return f"{what}re-save the file as UTF-8 (e.g. iconv -f {source} -t utf-8 {path} > fixed && mv fixed {path})"


def read_bytes(path: str | Path, hint: str, size_limit: str) -> bytes:
    """The bytes of an input checked like :func:`check_input`, read no further than the limit ``size_limit``.

    The node is checked with os.stat before it is opened, so a FIFO is never opened (opening one blocks until a
    writer comes) and a device such as /dev/zero is never read; it is opened without blocking and checked again on
    the open file (a file swapped in between), and at most one byte past the limit is read (a file that grew)."""
    path = check_input(path, hint, size_limit)
    cap = limit(size_limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise GeceError(f"{path}: cannot be read ({e.strerror})", hint=hint) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GeceError(f"{path}: not a file: it is {node_kind(st.st_mode)}", hint=hint)
        data = f.read(cap + 1)
    if len(data) > cap:
        raise over_limit(path, "bytes", max(len(data), st.st_size), size_limit)  # type: ignore[misc]
    return data


def read_text(path: str | Path, hint: str, size_limit: str) -> str:
    """The text of a small UTF-8 input (a BOM is dropped), read by :func:`read_bytes`; a byte that is
    not UTF-8 is a GeceError naming its line and column, with a re-encoding hint that fits the file."""
    raw = read_bytes(path, hint, size_limit)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise GeceError(
            f"{path}: not valid UTF-8 text: line {line}, column {column}: byte 0x{raw[e.start : e.start + 1].hex()}",
            hint=iconv_hint(raw, path),
        ) from None


def require_file(path: str | Path, hint: str, size_limit: str | None = None) -> Path:
    """``path`` if it is a readable regular file (within the ``size_limit`` of ``gece.io.files.limits.LIMITS``),
    else a GeceError with ``hint``.

    Every reader of an input file calls this, so a file under a ``data/`` directory that does not
    exist (the DVC-tracked snapshot was never pulled) says so, instead of "file not found". Raises the audit
    event ``gece_read`` (the tests check what a command reads against what it declares: tests/audit.py).
    """
    path = Path(path)
    sys.audit("gece_read", os.fspath(path))
    if os.path.lexists(path):
        return check_input(path, hint, size_limit)
    absent = [d for d in Path(os.path.abspath(path)).parents if d.name == "data" and not d.exists()]
    if absent:
        raise GeceError(
            f"{path}: data/ is missing: run `dvc pull data.dvc` (or make data)",
            problems=[f"{absent[-1]} does not exist"],
            hint="the data snapshot is tracked by DVC (data.dvc), not git; `gece pull` checks "
            "the DVC remote and pulls it",
        )
    return check_input(path, hint, size_limit)
