"""``gece stage-code``: write, for every ``gece`` command, the code it runs, each file by what its code does.

``stage-code/<command>.txt`` (:mod:`gece.code.manifests`) lists the files of ``gece <command>``'s import closure
(:func:`gece.code.closure.command_closure`: cli.py, ``gece/__init__.py`` and its module's closure), one line each:
the path and the sha256 of the file's syntax tree without comments, layout or docstrings
(:func:`gece.code.syntax.canonical_source`). Each DVC stage depends on the manifest of its command instead of on
the ``.py`` files themselves (``gece stage-deps`` writes those deps), and the stage ``code`` of dvc.yaml, which
depends on ``src/gece`` as a whole, runs this command. So:

- an edit that cannot change what a command does (a comment, a blank line, a reflowed call, a docstring)
  re-runs the ``code`` stage, which writes the same bytes, and DVC runs nothing after it;
- an edit that can (a statement, an import, a new module in the closure, a renamed one) changes the
  manifest of every command that runs the file, and DVC re-runs exactly their stages.

Docstrings are left out because no gece command reads one (``__doc__`` appears nowhere in the package:
tests/test_stage_code.py holds that). Package data (the page's CSS and template) is not Python: the report
stage declares it (``package_data`` of its ``STAGE``, :mod:`gece.cmd.stage`).

The manifests are small text files that git keeps (``cache: false``), so a review shows which commands a
change re-runs. ``gece stage-code --check`` writes nothing and exits 2 when a manifest is out of date
(``make deps`` writes them; tests/test_stage_code.py fails the same way).
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.cmd import command
from gece.cmd.command import Output
from gece.code.closure import PACKAGE, Tree
from gece.code.manifests import FOLDER, HEADER, manifests
from gece.io.files.outputs import write_text

# the line `gece --help` shows for this command (read without importing this module)
HELP = "write stage-code/<command>.txt, the code each command runs by what it does (the stage `code`)"
EXAMPLES = ("gece stage-code", "gece stage-code --check   # exit 2 when a manifest is out of date")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out", type=Path, default=FOLDER, help="the folder of the manifests, beside dvc.yaml (default: %(default)s)"
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 2 when a manifest is out of date")
    p.set_defaults(outputs={})


def reads(args: argparse.Namespace) -> list[Path]:
    """The package's sources (code, read as text: an --out inside them is refused); ``--check`` also reads the
    manifests it compares."""
    return [Path("src") / PACKAGE, *([args.out] if args.check else [])]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """--out, the folder of the manifests, which it owns: a manifest of a command that is gone is removed (only a
    file that is one of gece's manifests; nothing with --check)."""
    return {} if args.check else {"--out": Output(args.out, "folder")}


def head(path: Path, n: int) -> bytes | None:
    """The first ``n`` bytes of ``path`` and one more (to tell a longer file), or None when it is no regular file (a
    link, a FIFO, a device, a folder, nothing). Bytes that are no UTF-8 are simply other bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(n + 1) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None


def is_manifest(path: Path) -> bool:
    """Whether ``path`` is one of gece's manifests (it starts as :data:`HEADER` does): the only files of --out this
    command removes."""
    start = HEADER.split("{command}")[0].encode()
    return (head(path, len(start)) or b"").startswith(start)


# dvc.yaml's first stage (gece.cmd.stage): every other stage depends on its command's manifest, written here
STAGE = {
    "name": "code",
    "about": "the code each gece command runs, by what it does: the other stages depend on their command's manifest",
    "argv": ["stage-code"],
    "code": "package",
    "outputs": {"--out": {"cache": False, "note": "stage-code/<command>.txt, kept by git"}},
    "notes": {"src/gece": "every module: a comment or a docstring changes no manifest, so re-runs nothing else"},
}


def run(args: argparse.Namespace) -> int:
    tree = Tree(root=Path.cwd(), src=Path.cwd() / "src")
    if tree.file(f"{PACKAGE}.cli") is None:
        raise GeceError(f"no src/{PACKAGE}/cli.py in {Path.cwd()}", hint="run it in the root of a checkout of gece")
    wanted = manifests(tree, args.out)
    found = sorted(args.out.glob("*.txt")) if args.out.is_dir() else []
    extra = [p for p in found if p not in wanted and is_manifest(p)]
    if args.check:
        stale = [p for p, text in wanted.items() if head(p, len(text.encode())) != text.encode()]
        if stale or extra:
            raise GeceError(
                f"{args.out}: {plural(len(stale) + len(extra), 'manifest')} out of date",
                problems=[f"{p}: differs from the code" for p in stale] + [f"{p}: no such command" for p in extra],
                hint="run gece stage-code (make deps) and commit the result",
            )
        command.out.print(f"{literal(str(args.out))}: the {len(wanted)} manifests are up to date")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for path in extra:
        path.unlink()
    for path, text in wanted.items():
        write_text(path, text)
    command.out.print(f"{literal(str(args.out))}: wrote the code of {len(wanted)} commands")
    return 0
