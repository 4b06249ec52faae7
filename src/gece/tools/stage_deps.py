"""``gece stage-deps``: write each DVC stage's code dep in dvc.yaml: the manifest of the code its command runs.

A stage that runs ``gece <command>`` depends on ``stage-code/<command>.txt`` (:mod:`gece.tools.stage_code`):
the files of the command's import closure (:func:`gece.code.closure.command_closure`), each with the hash of what
its code does. The stage ``code`` writes the manifests from ``src/gece``, so an edit re-runs the stages whose
command's code it changes and no other, and an edit that changes no code (a comment, a docstring) none. This
command writes those deps: for every stage of dvc.yaml whose ``cmd`` is ``gece [options] <command> ...``, its
code dep lines (``- stage-code/....txt``, or the ``- src/gece/....py`` lines of a dvc.yaml written before the
manifests) are replaced by the manifest of its command, where the first of them stood; every other line (data
deps, package data such as the page's CSS, comments) is kept as written. A stage that depends on ``src/gece``
or ``stage-code`` as a whole (the stage ``code`` itself; the report, whose page shows a fingerprint of all the
manifests) and a stage whose command is not gece's are left alone, and so are the stages a user adds with
``dvc stage add`` to a ``dvc.yaml`` of their own (docs/lmeval.md): only the file given is read.

``gece stage-deps --check`` writes nothing and exits 2 when dvc.yaml differs from what it would write
(tests/test_stage_deps.py fails the same way in CI).
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.cmd import command
from gece.cmd.declared import Output
from gece.code.closure import PACKAGE, Tree, commands
from gece.code.manifests import FOLDER, manifest_path
from gece.io.files.inputs import read_text
from gece.io.files.outputs import write_text

CODE = f"src/{PACKAGE}"  # how dvc.yaml spells the package's folder
STAGE = re.compile(r"^  ([A-Za-z0-9_.-]+):\s*(#.*)?$")  # a stage's first line, under `stages:`
CMD = re.compile(r"^\s+cmd:\s*(.+?)\s*$")
CODE_DEP = re.compile(rf"^(\s+)- ({re.escape(CODE)}/\S+\.py|{re.escape(FOLDER.as_posix())}/\S+\.txt)\s*(#.*)?$")
WHOLE = re.compile(rf"^\s+- ({re.escape(CODE)}|{re.escape(FOLDER.as_posix())})/?\s*(#.*)?$")


def gece_command(cmd: str, known: set[str]) -> str | None:
    """The subcommand of ``gece [global options] <command> ...``; None for a command that is not gece's."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    if not words or Path(words[0]).name != PACKAGE:
        return None
    return next((w for w in words[1:] if w in known), None)


def _rewrite(stage: list[str], known: set[str]) -> list[str]:
    """One stage's lines with its code deps replaced by its command's manifest (unchanged when it has none)."""
    at = next((i for i, line in enumerate(stage) if CMD.match(line)), None)
    cmd = CMD.match(stage[at]).group(1) if at is not None else ""  # type: ignore[union-attr]
    if cmd[:1] in (">", "|") and at is not None and at + 1 < len(stage):  # a folded or literal block: its first line
        cmd = stage[at + 1].strip()
    sub = gece_command(cmd.strip("'\""), known) if cmd else None
    code = [i for i, line in enumerate(stage) if CODE_DEP.match(line)]
    if sub is None or not code or any(WHOLE.match(line) for line in stage):
        return stage
    indent = CODE_DEP.match(stage[code[0]]).group(1)  # type: ignore[union-attr]
    deps = [f"{indent}- {manifest_path(sub).as_posix()}\n"]
    return stage[: code[0]] + deps + [line for i, line in enumerate(stage) if i > code[0] and i not in code]


def generate(text: str, tree: Tree = Tree()) -> str:
    """dvc.yaml's text with every gece stage's code dep: the manifest of its command."""
    known = set(commands(tree))
    out: list[str] = []
    stage: list[str] = []
    for line in text.splitlines(keepends=True):
        if STAGE.match(line) or (line.strip() and not line.startswith(" ")):
            out += _rewrite(stage, known)
            stage = []
        stage.append(line)
    return "".join(out + _rewrite(stage, known))


# the line `gece --help` shows for this command (read without importing this module)
HELP = "write each DVC stage's code dep in dvc.yaml: the manifest of its command's code (--check: only compare)"
EXAMPLES = ("gece stage-deps", "gece stage-deps --check   # exit 2 when dvc.yaml is out of date")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", type=Path, default=Path("dvc.yaml"), help="the pipeline file (default: dvc.yaml)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 2 when the file is out of date")
    p.set_defaults(outputs={}, inputs=("file",))


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """--file, rewritten in place (nothing with --check)."""
    return {} if args.check else {"--file": Output(args.file, updated=True)}


def run(args: argparse.Namespace) -> int:
    text = read_text(args.file, "run gece stage-deps in the repository root, beside dvc.yaml", "params_bytes")
    tree = Tree(root=args.file.resolve().parent, src=args.file.resolve().parent / "src")
    if tree.file(f"{PACKAGE}.cli") is None:
        raise GeceError(f"{args.file}: no {CODE}/cli.py beside it", hint="run it in a checkout of gece")
    new = generate(text, tree)
    diff = difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm="", n=0)
    changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    if new == text:
        command.out.print(f"{literal(str(args.file))}: every stage depends on the manifest of its command's code")
        return 0
    if args.check:
        raise GeceError(
            f"{args.file} is out of date: {plural(changed, 'line')} differ from the manifests of the commands",
            hint="run gece stage-deps (make deps) and commit the result",
        )
    write_text(args.file, new)
    command.out.print(f"wrote the code deps of {literal(str(args.file))} ({plural(changed, 'line')} added or removed)")
    return 0
