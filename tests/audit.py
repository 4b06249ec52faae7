"""What a command reads and writes, checked against what it declares (issue 49, item 2; issue 58, item 1).

Every command declares the paths it reads and writes (``gece.cmd.command.declared_inputs`` and
``declared_outputs``: ``--params``, its input and output options, its module's ``reads(args)`` and ``writes(args)``)
and announces them with the audit event ``gece_command`` before it runs (``gece_command_end`` after). An audit
hook (:func:`sys.addaudithook`, installed once per test process) records, between the two, resolved to real paths:

- every file the command opens for reading (the ``open`` event) or checks as an input (the ``gece_read`` event
  of ``gece.io.files.inputs.require_file``, which every reader of an artifact calls: Parquet is opened by Arrow's
  C++, which raises no ``open`` event);
- every file it creates, replaces, renames, removes or links: ``open`` for writing, ``os.rename``/``os.replace``
  (both paths), ``os.remove``/``os.unlink``, ``os.rmdir``, ``shutil.rmtree``, ``os.symlink``, ``os.link``,
  ``os.mkdir``, ``os.truncate``, ``tempfile.mkstemp``; a path given relative to a directory descriptor is resolved
  through ``/proc/self/fd``;
- what its subprocesses (lm_eval, ``dvc add``) and native code (Arrow's Parquet writer) change: the tree of the
  directory the command runs in is listed when it starts and compared with the tree when it ends (a file
  created, removed, or with another size, modification time or inode).

The autouse fixture :func:`watch_files` fails a test whose command read a file its declaration does not name,
or touched a path outside its declared outputs, so every in-process CLI test checks the declarations against
what really happens.

Only paths below the repository or pytest's temporary directories are judged (where a test puts its files);
of those, these are allowed without a declaration (:func:`allowed`, :func:`writable`):

- reads and writes of Python's imports (``.py``, ``.pyc``, ``.so`` files, ``__pycache__``) and gece's own package
  files (``src/gece``: the report's page.css and page.html), DVC's and git's internals (a path with a ``.dvc`` or
  ``.git`` component, but not a ``.dvc`` file or ``.gitignore``, which a command must declare);
- reads of the Python environment gece runs in (``sys.prefix``): installed packages and their metadata, a packaged
  model's GGUF (named by its ``package:`` source), gece's own installed metadata (``src/gece.egg-info``), a path
  that does not exist (an open that failed read nothing), and a file below a declared output or that the command
  wrote earlier in the same run;
- writes below a directory the command made with ``tempfile.mkdtemp`` (its own scratch) or gece's cache of
  converted models (``$GECE_CACHE``, shared by every command that loads a GGUF), and a temporary file
  beside a declared file (``.<name>.<pid>.<random>.tmp``: :func:`gece.io.files.outputs.atomic_path`), and the
  folders on the way to a declared output (created with ``mkdir -p``);
- writes of the files a test's stand-in for another program keeps for the test (:func:`scaffolding`: the log of
  tests/lmeval_standin.py).
"""

from __future__ import annotations

import getpass
import os
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gece"
METADATA = ROOT / "src" / "gece.egg-info"
TMP = Path(os.path.realpath(tempfile.gettempdir()))
JUDGED = (Path(os.path.realpath(ROOT)), TMP)
# writes: the repository and pytest's temporary directories (the rest of the system's is any program's scratch)
JUDGED_WRITES = (Path(os.path.realpath(ROOT)), TMP / f"pytest-of-{getpass.getuser()}")
ENVIRONMENT = tuple({Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix)})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PRUNED = {".git", ".dvc", ".venv", "__pycache__", "node_modules", ".hypothesis", ".pytest_cache"}
# events that create or remove the name of their first argument (the index of their directory descriptor)
NAMES = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "shutil.rmtree": 1}


@dataclass
class Watch:
    """The command now running (None between commands), its declared inputs and outputs (path, kind), its scratch
    (made with mkdtemp), what it wrote, its tree when it started (path -> size, mtime, inode), and what it read or
    wrote without declaring it (command, "read"/"wrote", path) over the test."""

    command: str | None = None
    cwd: Path = ROOT
    declared: tuple[Path, ...] = ()
    outputs: tuple[tuple[Path, str], ...] = ()
    scratch: set[Path] = field(default_factory=set)
    written: set[Path] = field(default_factory=set)
    tree: dict[Path, tuple] | None = None
    undeclared: list[tuple[str, str, Path]] = field(default_factory=list)


WATCH = Watch()
SCAFFOLDING: set[Path] = set()  # files a test's stand-in for another program writes (its log), not the command


def scaffolding(path: Path) -> None:
    """Let the programs a test stands in for (tests/lmeval_standin.py) write ``path`` during the test."""
    SCAFFOLDING.add(real(path))


def real(path: str | bytes | os.PathLike) -> Path:
    """``path`` absolute, symlinks resolved (relative to the current directory, as the call that opened it)."""
    return Path(os.path.realpath(os.fsdecode(path)))


def real_name(path: str | bytes | os.PathLike, dir_fd: int | None = None) -> Path:
    """The name ``path`` itself (a link, not what it points to), its folder resolved: relative to ``dir_fd`` when
    given (a descriptor, as ``shutil.rmtree`` passes), else to the current directory."""
    path = os.fsdecode(path)
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):
        path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
    folder, name = os.path.split(os.path.abspath(path))
    return Path(os.path.realpath(folder)) / name


def judged(path: Path, roots=JUDGED) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def internal(path: Path) -> bool:
    """Python's imports, gece's package files, DVC's and git's own state."""
    if path.suffix in (".py", ".pyc", ".so") or "__pycache__" in path.parts or path.is_relative_to(PACKAGE):
        return True
    return bool({".dvc", ".git"} & set(path.parts[:-1]))


def below(path: Path, folders) -> bool:
    return any(path == f or path.is_relative_to(f) for f in folders)


def allowed(path: Path) -> bool:
    """Whether a read of ``path`` needs no declaration (see the module's docstring)."""
    if not judged(path) or internal(path) or path.name in (".dvcignore", ".gitignore"):
        return True
    if any(path.is_relative_to(env) for env in ENVIRONMENT) or path.is_relative_to(METADATA):
        return True
    return below(path, WATCH.written) or below(path, [p for p, _ in WATCH.outputs])


def writable(path: Path, folder_made: bool = False) -> bool:
    """Whether the command of :data:`WATCH` may create, replace or remove ``path`` (see the module's docstring);
    ``folder_made``: ``path`` is a folder it creates (one on the way to an output is allowed)."""
    if not judged(path, JUDGED_WRITES) or internal(path) or below(path, WATCH.scratch):
        return True
    for out, kind in WATCH.outputs:
        if path == out or (kind != "file" and path.is_relative_to(out)) or (folder_made and out.is_relative_to(path)):
            return True
        temporary = path.name.startswith(".") and path.name.lstrip(".").startswith(f"{out.name}.")
        if kind == "file" and path.parent == out.parent and temporary and path.suffix == ".tmp":
            return True
    return below(path, SCAFFOLDING) or below(path, [model_cache()])


def model_cache() -> Path:
    """gece's cache of converted models (``$GECE_CACHE``), which every command that loads a GGUF shares."""
    from gece.scoring.models import cache_root

    return real(cache_root())


def _read(path: Path) -> None:
    if path.exists() and not allowed(path) and not below(path, WATCH.declared):
        WATCH.undeclared.append((WATCH.command or "?", "read", path))


def _wrote(path: Path, folder_made: bool = False) -> None:
    WATCH.written.add(path)
    if not writable(path, folder_made):
        WATCH.undeclared.append((WATCH.command or "?", "wrote", path))


def listing(root: Path) -> dict[Path, tuple]:
    """Every file and folder below ``root`` (links not followed; DVC's, git's and Python's internals and every Python
    environment, a folder with a ``pyvenv.cfg`` such as .venv-engines, left out): path -> (kind, size, modification
    time, inode)."""
    out: dict[Path, tuple] = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in PRUNED and not os.path.exists(os.path.join(here, d, "pyvenv.cfg"))]
        for name in [*dirs, *files]:
            path = Path(here) / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out[path] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _changes() -> None:
    """What changed in the command's tree since it started (native code and subprocesses included)."""
    if WATCH.tree is None:
        return
    now = listing(WATCH.cwd)
    for path in set(now) | set(WATCH.tree):
        before, after = WATCH.tree.get(path), now.get(path)
        if before == after or (before and after and stat.S_ISDIR(before[0]) and stat.S_ISDIR(after[0])):
            continue  # the same, or a folder whose entries changed (judged one by one)
        made = before is None and after is not None and stat.S_ISDIR(after[0])
        if not writable(real_name(path), made):
            WATCH.undeclared.append((WATCH.command or "?", "wrote", path))


def _opened(args: tuple) -> None:
    path, mode, flags = args
    if path is None or isinstance(path, int):  # a file descriptor: opened before
        return
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
    if writes:
        _wrote(real(path))
    else:
        _read(real(path))


def _started_command(command: str, inputs: tuple, outputs: tuple) -> None:
    WATCH.command, WATCH.cwd = command, Path.cwd()
    WATCH.declared = tuple(real(p) for p in inputs)
    # an output that is a link: its name (a writer replaces the link) and what it points to
    WATCH.outputs = tuple({(f(p), kind) for p, kind in outputs for f in (real, real_name)})
    WATCH.scratch, WATCH.written, WATCH.tree = set(), set(), listing(WATCH.cwd)


def _hook(event: str, args: tuple) -> None:
    """The audit hook: never raises (an exception here would fail the call that raised the event)."""
    try:
        if event == "gece_command":
            _started_command(*args)
        elif event == "gece_command_end":
            _changes()
            WATCH.command = None
        elif WATCH.command is None:
            return
        elif event == "open":
            _opened(args)
        elif event == "gece_read":
            _read(real(args[0]))
        elif event == "os.rename":  # os.replace raises it too
            _wrote(real_name(args[0], args[2]))
            _wrote(real_name(args[1], args[3]))
        elif event == "os.link":
            _wrote(real_name(args[1], args[3]))
        elif event == "os.symlink":
            _wrote(real_name(args[1], args[2]))
        elif event in NAMES:
            _wrote(real_name(args[0], args[NAMES[event]]), folder_made=event == "os.mkdir")
        elif event in ("os.truncate", "tempfile.mkstemp"):
            _wrote(real(args[0]))
        elif event == "tempfile.mkdtemp":
            WATCH.scratch.add(real(args[0]))
    except Exception:  # a path that cannot be resolved is neither read nor written
        pass


sys.addaudithook(_hook)  # once per process: a hook cannot be removed


@pytest.fixture(autouse=True)
def watch_files():
    """Fail the test when a command it ran in-process read a file its declaration does not name, or wrote outside
    its declared outputs."""
    WATCH.undeclared.clear()
    WATCH.command = None
    yield
    WATCH.command = None
    SCAFFOLDING.clear()
    found = undeclared()
    if found:
        pytest.fail(
            "a command read or wrote files its declaration does not name (add them to its module's reads(args) or "
            "writes(args), gece.cmd.command.Output):\n  " + "\n  ".join(found[:20]),
            pytrace=False,
        )


def undeclared() -> list[str]:
    """What the commands run since the last call read or wrote without declaring it (``gece <command> read|wrote
    <path>``), forgotten once returned."""
    found = sorted({f"gece {c} {how} {p}" for c, how, p in WATCH.undeclared})
    WATCH.undeclared.clear()
    return found
