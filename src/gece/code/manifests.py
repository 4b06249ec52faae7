"""The manifest of a ``gece`` command: the files of the code it runs, each with the hash of what its code does.

``stage-code/<command>.txt`` lists the files of ``gece <command>``'s import closure
(:func:`gece.code.closure.command_closure`: cli.py, ``gece/__init__.py`` and its module's closure), one line each: the
path and the sha256 of the file's syntax tree without comments, layout or docstrings
(:func:`gece.code.syntax.canonical_source`, the same on every Python version). ``gece stage-code``
(:mod:`gece.tools.stage_code`) writes them, the DVC stages depend on them, and the report's page names the code that
built it by the hash of the manifests of the commands that are stages (:func:`stage_commands`, :func:`fingerprint`).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from gece.code.closure import Tree, command_closure, command_names, commands
from gece.code.syntax import source_hash

FOLDER = Path("stage-code")  # the manifests, beside dvc.yaml; a stage's code dep is FOLDER / f"{command}.txt"
HEADER = (
    "# The code `gece {command}` runs: each file of its import closure, with the sha256 of its syntax tree\n"
    "# without comments, layout or docstrings. Its DVC stages depend on this file, not on the .py files: an\n"
    "# edit that leaves it unchanged re-runs nothing. Written by `gece stage-code` (the stage `code`).\n"
)


def manifest_path(command_name: str, folder: Path = FOLDER) -> Path:
    """Where the manifest of ``gece <command_name>`` lies."""
    return folder / f"{command_name}.txt"


def file_digest(path: Path) -> str:
    """sha256 of what a Python file does: its syntax tree without comments, layout or docstrings."""
    return source_hash(path, docstrings=False)


def manifest(closure: set[str], digests: dict[str, str], command_name: str) -> str:
    """The text of ``gece <command_name>``'s manifest: the header, then ``<path> <sha256>`` per file of its
    ``closure``, sorted (``digests``: path -> :func:`file_digest`)."""
    return HEADER.format(command=command_name) + "".join(f"{rel} {digests[rel]}\n" for rel in sorted(closure))


def manifests(tree: Tree = Tree(), folder: Path = FOLDER) -> dict[Path, str]:
    """Every command's manifest: path (relative to the repository root) -> text. Each file is parsed once."""
    closures = {name: command_closure(name, tree) for name in command_names(tree)}
    digests = {rel: file_digest(tree.root / rel) for rel in set().union(*closures.values())}
    return {manifest_path(name, folder): manifest(files, digests, name) for name, files in closures.items()}


STAGE = "STAGE"  # the name a command module declares its DVC stage under (gece.cmd.stage)


def declares_stage(path: Path) -> bool:
    """Whether the module at ``path`` assigns ``STAGE`` at its top level, read with ast (no import)."""
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == STAGE for t in targets):
            return True
    return False


def stage_commands(tree: Tree = Tree()) -> list[str]:
    """The commands that are DVC stages, in the order of cli.py's ``COMMANDS``: those whose module declares one."""
    return [name for name, module in commands(tree).items() if declares_stage(tree.file(module))]  # type: ignore[arg-type]


def fingerprint(tree: Tree = Tree()) -> str:
    """sha256 of the manifest of every command that is a stage (:func:`stage_commands`, sorted): the code of the
    whole pipeline by what it does; the commands that are no stage (``gece diff``...) build no result."""
    stages = set(stage_commands(tree))
    h = hashlib.sha256()
    for path, text in sorted(manifests(tree).items()):
        if path.stem in stages:
            h.update(path.name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()
