"""The output side of the file boundary: which path may be written, and writing it atomically.

Every output goes through :func:`check_output` (the CLI calls it for each output option before any work,
:func:`atomic_path` again before each write): only a regular file or a path that does not exist yet is
written, after symlinks are resolved. A FIFO, a device, a directory or a path below a file is refused, so
the temporary-file-and-rename never replaces such a node; :func:`check_outputs` checks a command's outputs
together, against each other and what it reads. The directories a command replaces are
:mod:`gece.io.files.destinations`; the input side (sizes, kinds of input) is :mod:`gece.io.files.inputs`.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from gece.base import faults
from gece.base.errors import GeceError

UMASK = os.umask(0)  # the process's umask, read once (os.umask sets it too)
os.umask(UMASK)


def node_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def check_output(path: str | Path, option: str = "output", hint: str | None = None) -> Path:
    """The path to write for ``path`` (symlinks resolved), or a GeceError naming ``option``.

    Writable: an existing regular file (replaced) or a path that does not exist yet whose nearest
    existing ancestor is a directory (missing directories are created). Anything else is refused.
    """
    given = Path(path)
    real = Path(os.path.realpath(given))
    hint = hint or f"give {option} the path of a regular file or of a new file"
    shown = f"{option} {given}" + (f" (a symlink to {real})" if real != Path(os.path.abspath(given)) else "")
    try:
        st = real.stat()
    except (FileNotFoundError, NotADirectoryError):  # new, or below a file (refused next)
        st = None
    except OSError as e:
        raise GeceError(f"{shown}: cannot be written ({e.strerror})", hint=hint) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise GeceError(
            f"{shown} is {node_kind(st.st_mode)}, not a regular file; gece writes outputs to a new file "
            "and renames it into place, which would replace it",
            hint=hint,
        )
    parent = next(p for p in real.parents if p.exists() or p == p.parent)
    if not parent.is_dir():
        raise GeceError(f"{shown}: {parent} is a file, so nothing can be created below it", hint=hint)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise GeceError(f"{shown}: directory {parent} is not writable", hint=f"{hint} in a writable directory")
    return real


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Delete the temporary files a killed writer of ``path`` left beside it.

    Temporary names carry the writer's pid (``.<name>.<pid>.<random>.tmp``); one whose process
    is gone can never be renamed into place, so it is removed. Returns what was removed.
    """
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


ENVIRONMENT_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    The rename is atomic, so ``path`` is either absent, the old file or the complete new one,
    whatever happens to the process. A temporary file left by a killed writer (SIGKILL skips
    the cleanup below) is removed by the next write of the same path. ``path`` is checked by
    :func:`check_output` first; a symlink to a regular file is replaced by the new file, and the file it
    points to (say, in DVC's cache) is never written through.
    """
    check_output(path)
    path = Path(path)
    tmp_path = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        os.chmod(tmp_path, 0o666 & ~UMASK)  # mkstemp creates 0600; give the usual permissions
        yield tmp_path
        faults.checkpoint(f"rename:{path.name}")
        os.replace(tmp_path, path)
    except OSError as e:
        if e.errno not in ENVIRONMENT_ERRORS:
            raise
        raise GeceError(
            f"{path}: cannot be written: {ENVIRONMENT_ERRORS[e.errno]}",
            hint="free space, or write to another directory",
        ) from e
    finally:
        if tmp_path is not None and tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def overlap(output: Path, given: Path) -> str | None:
    """How ``output`` (resolved) overlaps the input ``given`` (resolved): ``is``, ``contains``, ``is inside``, or
    None when writing one cannot touch the other."""
    if output == given:
        return "is"
    if given.is_relative_to(output):
        return "contains"
    if output.is_relative_to(given):
        return "is inside"
    return None


def check_outputs(outputs: dict[str, str | Path | None], inputs: Collection[str | Path] = ()) -> None:
    """Check every given output (option -> path) before any work: each is writable (:func:`check_output`), none
    equals, contains or sits inside one of ``inputs`` (files or directories the command reads, after symlinks
    are resolved), and no two are one path."""
    seen: dict[Path, str] = {}
    read = {Path(os.path.realpath(p)): p for p in inputs if p is not None}
    for option, path in outputs.items():
        if path is None:
            continue
        real = check_output(path, option)
        for given, shown in read.items():
            how = overlap(real, given)
            if how is not None:
                what = "replace the input" if how == "is" else "replace or write into what the command reads"
                raise GeceError(
                    f"{option} {path} {how} the input {shown}; writing it would {what}",
                    hint=f"give {option} a path outside {shown}",
                )
        if real in seen:
            raise GeceError(
                f"{option} {path} is also {seen[real]}; one would overwrite the other",
                hint=f"give {option} and {seen[real]} different paths",
            )
        seen[real] = option
