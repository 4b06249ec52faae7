"""What a command reads, checked against what it declares (issue 49, item 2).

Every command declares the paths it reads (``gece.cmd.command.declared_inputs``: ``--params``, its input options and its
module's ``reads(args)``) and announces them with the audit event ``gece_command`` before it runs
(``gece_command_end`` after). An audit hook (:func:`sys.addaudithook`, installed once per test process) records,
between the two, every file the command opens for reading (the ``open`` event) or checks as an input (the
``gece_read`` event of ``gece.io.files.inputs.require_file``, which every reader of an artifact calls: Parquet is
opened by Arrow's C++, which raises no ``open`` event). The autouse fixture :func:`watch_reads` fails a test
whose command read a file that its declaration does not name, so every in-process CLI test checks the
declarations against what really happens.

Only reads below the repository or the temporary directory are judged (the places where a test puts inputs);
of those, these are not inputs of the command and are allowed (:func:`allowed`):

- Python's imports (``.py``, ``.pyc``, ``.so`` files, ``__pycache__``) and gece's own package files
  (``src/gece``: the report's page.css and page.html);
- DVC's and git's internals (a path with a ``.dvc`` or ``.git`` component, ``.dvcignore``, ``.gitignore``);
- the Python environment gece runs in (``sys.prefix``, which ``make install`` puts inside the repository as
  ``.venv``): installed packages and their metadata, a packaged model's GGUF (named by its ``package:`` source);
- gece's own installed metadata (``src/gece.egg-info``, which an editable install writes beside the package);
- a path that does not exist (an open that failed read nothing);
- files the command itself wrote or created earlier in the same run (a temporary directory, a file it
  prepared and then reads).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gece"
METADATA = ROOT / "src" / "gece.egg-info"
JUDGED = (Path(os.path.realpath(ROOT)), Path(os.path.realpath(tempfile.gettempdir())))
ENVIRONMENT = tuple({Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix)})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@dataclass
class Watch:
    """The command now running (None between commands), its declared inputs, what it wrote, what it read
    without declaring it (command, path) over the test."""

    command: str | None = None
    declared: tuple[Path, ...] = ()
    written: set[Path] = field(default_factory=set)
    undeclared: list[tuple[str, Path]] = field(default_factory=list)


WATCH = Watch()


def real(path: str | bytes | os.PathLike) -> Path:
    """``path`` absolute, symlinks resolved (relative to the current directory, as the call that opened it)."""
    return Path(os.path.realpath(os.fsdecode(path)))


def allowed(path: Path) -> bool:
    """Whether a read of ``path`` needs no declaration (see the module's docstring)."""
    if not any(path.is_relative_to(root) for root in JUDGED):
        return True
    if path.suffix in (".py", ".pyc", ".so") or "__pycache__" in path.parts or path.is_relative_to(PACKAGE):
        return True
    if {".dvc", ".git"} & set(path.parts) or path.name in (".dvcignore", ".gitignore"):
        return True
    if any(path.is_relative_to(env) for env in ENVIRONMENT) or path.is_relative_to(METADATA):
        return True
    return any(path == w or path.is_relative_to(w) for w in WATCH.written)


def _judge(path: Path) -> None:
    if not path.exists() or allowed(path) or any(path == d or path.is_relative_to(d) for d in WATCH.declared):
        return
    WATCH.undeclared.append((WATCH.command or "?", path))


def _opened(args: tuple) -> None:
    path, mode, flags = args
    if path is None or isinstance(path, int):  # a file descriptor: opened before
        return
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
    if writes:
        WATCH.written.add(real(path))
    else:
        _judge(real(path))


def _hook(event: str, args: tuple) -> None:
    """The audit hook: never raises (an exception here would fail the call that raised the event)."""
    try:
        if event == "gece_command":
            WATCH.command, WATCH.declared, WATCH.written = args[0], tuple(real(p) for p in args[1]), set()
        elif event == "gece_command_end":
            WATCH.command = None
        elif WATCH.command is None:
            return
        elif event == "open":
            _opened(args)
        elif event == "gece_read":
            _judge(real(args[0]))
        elif event == "os.rename":
            WATCH.written.add(real(args[1]))
        elif event == "tempfile.mkdtemp":
            WATCH.written.add(real(args[0]))
    except Exception:  # a path that cannot be resolved is no input
        pass


sys.addaudithook(_hook)  # once per process: a hook cannot be removed


@pytest.fixture(autouse=True)
def watch_reads(request):
    """Fail the test when a command it ran in-process read a file its declaration does not name."""
    WATCH.undeclared.clear()
    WATCH.command = None
    yield
    WATCH.command = None
    if WATCH.undeclared:
        found = sorted({f"gece {c}: {p}" for c, p in WATCH.undeclared})
        WATCH.undeclared.clear()
        pytest.fail(
            "a command read files its declaration does not name (add them to its module's reads(args) or "
            "inputs):\n  " + "\n  ".join(found[:20]),
            pytrace=False,
        )
