"""``gece stage-deps``: write dvc.yaml's stages from their declarations.

Each command that is a DVC stage declares it in its module (``STAGE``, :mod:`gece.cmd.stage`): its command line,
matrix, params keys, code dep and how DVC keeps each output, while its data deps and outputs are what the command
itself declares it reads and writes for that command line. This command writes each declared stage whole, in the
order of cli.py's ``COMMANDS``: its comment, ``matrix`` (or ``foreach``), ``cmd``, ``deps`` (the data, then the
code: ``stage-code/<command>.txt``, the manifest of the code its command runs, :mod:`gece.tools.stage_code`),
``params``, ``outs``, ``metrics`` and ``plots``. What it does not declare is kept as written: the lines above
``stages:``, the comments between stages, a stage it does not declare (those a user adds with ``dvc stage add``,
such as ``gece lmeval-stages``' imports, docs/lmeval.md; a stage removed from the declarations is removed from
dvc.yaml by hand) and whatever follows the stages. A second run changes nothing. Only the file given is read.

The matrix stages' deps of params-derived files (the neutral stage's metrics of the benchmarks it compares) come
from params.yaml beside the file, so dvc.yaml is out of date when those entries change: the check below says so.

``gece stage-deps --check`` writes nothing and exits 2 when dvc.yaml differs from what it would write
(tests/test_stage_deps.py fails the same way in CI).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import re
import textwrap
from collections.abc import Collection
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.cmd import command
from gece.cmd.command import Output as Written
from gece.cmd.stage import ALL_PARAMS, Output, Resolved, resolve
from gece.code.closure import PACKAGE, Tree, commands
from gece.code.manifests import STAGE, stage_commands
from gece.io.files.inputs import read_text
from gece.io.files.outputs import write_text

STAGES = re.compile(r"^stages:\s*(#.*)?$")  # the top-level key whose stages are written
STAGE_LINE = re.compile(r"^  ([^\s#][^:]*):\s*(#.*)?$")  # a stage's first line, under `stages:`
WIDTH = 116  # columns of a comment or a folded cmd
PLAIN = re.compile(r"^[A-Za-z0-9$./_(][^#]*$")  # a scalar YAML reads as the same string unquoted


def scalar(value: str) -> str:
    """``value`` as a YAML scalar: as is when YAML reads it back unchanged, else quoted."""
    plain = PLAIN.match(value) and ": " not in value and not value.endswith((" ", ":"))
    return value if plain else json.dumps(value)


def _noted(line: str, note: str) -> str:
    return f"{line}   # {note}\n" if note else f"{line}\n"


def render(stage: Resolved) -> str:
    """One stage's lines in dvc.yaml."""
    lines = [f"  {stage.name}:\n"]
    lines += [f"    # {line}\n" for line in textwrap.wrap(stage.about, WIDTH - 6)]
    body = "    "
    if stage.foreach is not None:
        lines += [f"    foreach: {stage.foreach}\n", "    do:\n"]
        body = "      "
    elif stage.matrix:
        lines += ["    matrix:\n"] + [f"      {axis}: {values}\n" for axis, values in stage.matrix.items()]
    if len(body) + len(f"cmd: {stage.cmd}") <= WIDTH:
        lines.append(f"{body}cmd: {stage.cmd}\n")
    else:
        lines += [f"{body}cmd: >-\n"] + [f"{body}  {line}\n" for line in textwrap.wrap(stage.cmd, WIDTH - len(body))]
    if stage.deps:
        lines += [f"{body}deps:\n"] + [_noted(f"{body}  - {scalar(p)}", note) for p, note in stage.deps]
    if stage.params:
        lines.append(f"{body}params:\n")
        for key, note in stage.params:
            lines.append(_noted(f"{body}  - {key}:" if key == ALL_PARAMS else f"{body}  - {scalar(key)}", note))
    for kind in ("outs", "metrics", "plots"):
        outs = [(p, how) for p, how in stage.outs if how.kind == kind]
        if outs:
            lines.append(f"{body}{kind}:\n")
            lines += [line for p, how in outs for line in _output(p, how, body + "  ")]
    return "".join(lines)


def _output(path: str, how: Output, indent: str) -> list[str]:
    """One output's lines: its path, then its options (``cache``, ``persist``, a plot's template options)."""
    options = {"cache": "false"} if not how.cache else {}
    options |= {"persist": "true"} if how.persist else {}
    options |= {key: scalar(value) for key, value in how.plot.items()}
    if not options:
        return [_noted(f"{indent}- {scalar(path)}", how.note)]
    return [_noted(f"{indent}- {scalar(path)}:", how.note)] + [f"{indent}    {k}: {v}\n" for k, v in options.items()]


def declared(tree: Tree = Tree(), params: Path = Path(ALL_PARAMS)) -> list[Resolved]:
    """Every stage declared by a command module (``STAGE``): the stage that writes the manifests first (the others
    depend on them), then in the order of ``COMMANDS``."""
    names, modules = stage_commands(tree), commands(tree)
    stages = [
        resolve(getattr(module, STAGE), module, name, names, params)
        for name, module in ((n, importlib.import_module(modules[n])) for n in names)
    ]
    return sorted(stages, key=lambda s: s.code != "package")


def split(text: str) -> tuple[list[str], list[tuple[str, list[str], list[str]]], list[str], list[str]]:
    """dvc.yaml's lines: those up to ``stages:``; each stage (name, the comment lines above it, its lines); the
    comment lines after the last stage; the lines from the next top-level key on."""
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if STAGES.match(line)), None)
    if at is None:
        raise GeceError("dvc.yaml has no top-level `stages:`", hint="run gece stage-deps beside gece's dvc.yaml")
    head, stages, comments, blanks = lines[: at + 1], [], [], []  # type: ignore[var-annotated]
    for i, line in enumerate(lines[at + 1 :], at + 1):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip():
            blanks.append(line)
        elif indent == 0 and not line.startswith("#"):  # the next top-level key
            return head, stages, comments, lines[i:]
        elif STAGE_LINE.match(line):
            stages.append((STAGE_LINE.match(line).group(1), comments, [line]))  # type: ignore[union-attr]
            comments, blanks = [], []
        elif indent > 2 and stages and not comments:  # the stage's own line (a blank line inside it kept)
            stages[-1][2].extend([*blanks, line])
            blanks = []
        else:  # a comment between stages
            comments.append(line)
            blanks = []
    return head, stages, comments, []


def _join(head: list[str], blocks: list[list[str]], trailing: list[str], rest: list[str]) -> str:
    """dvc.yaml's text from its parts (:func:`split`): one blank line between stages."""
    out = head + [line for i, block in enumerate(blocks) for line in (["\n"] if i else []) + block]
    out += (["\n"] if trailing and blocks else []) + trailing
    return "".join(out + (["\n"] if rest else []) + rest)


def generate(text: str, stages: list[Resolved]) -> str:
    """dvc.yaml's text with every declared stage written from its declaration and every other line kept."""
    head, old, trailing, rest = split(text)
    above = {name: comments for name, comments, _ in old}
    ours = {s.name for s in stages}
    blocks = [[*above.get(s.name, []), render(s)] for s in stages]
    blocks += [comments + body for name, comments, body in old if name not in ours]
    return _join(head, blocks, trailing, rest)


def with_stages(before: str, after: str, names: Collection[str]) -> str:
    """``before`` with the stages ``names`` as ``after`` writes them: each in the place of the stage of that name, or
    after the last stage; every other line as ``before`` has it. ``dvc stage add`` rewrites the whole file in DVC's
    own layout; this keeps its stages and nothing else of that rewrite."""
    head, old, trailing, rest = split(before)
    added = {name: body for name, _, body in split(after)[1] if name in names}
    blocks = [comments + added.pop(name, body) for name, comments, body in old] + list(added.values())
    return _join(head, blocks, trailing, rest)


# the line `gece --help` shows for this command (read without importing this module)
HELP = "write dvc.yaml's stages from the stage declarations of the command modules (--check: only compare)"
EXAMPLES = ("gece stage-deps", "gece stage-deps --check   # exit 2 when dvc.yaml is out of date")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", type=Path, default=Path("dvc.yaml"), help="the pipeline file (default: dvc.yaml)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 2 when the file is out of date")
    p.set_defaults(outputs={}, inputs=("file",))


def writes(args: argparse.Namespace) -> dict[str, Written]:
    """--file, rewritten in place (nothing with --check)."""
    return {} if args.check else {"--file": Written(args.file, updated=True)}


def run(args: argparse.Namespace) -> int:
    text = read_text(args.file, "run gece stage-deps in the repository root, beside dvc.yaml", "params_bytes")
    root = args.file.resolve().parent
    tree = Tree(root=root, src=root / "src")
    if tree.file(f"{PACKAGE}.cli") is None:
        raise GeceError(f"{args.file}: no src/{PACKAGE}/cli.py beside it", hint="run it in a checkout of gece")
    new = generate(text, declared(tree, Path(args.params)))
    diff = difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm="", n=0)
    changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    if new == text:
        command.out.print(f"{literal(str(args.file))}: every stage is what its declaration writes")
        return 0
    if args.check:
        raise GeceError(
            f"{args.file} is out of date: {plural(changed, 'line')} differ from the stage declarations",
            hint="run gece stage-deps (make deps) and commit the result",
        )
    write_text(args.file, new)
    command.out.print(f"wrote the stages of {literal(str(args.file))} ({plural(changed, 'line')} added or removed)")
    return 0
