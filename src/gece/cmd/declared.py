"""What a command reads and writes: the one declaration of its files, checked before it runs.

A command module declares its inputs by option (``p.set_defaults(inputs=(dest, ...))``) and by derivation
(``reads(args) -> list[Path]``: the prepared file of ``--benchmark``, a run's folder), and its outputs the same
way: ``p.set_defaults(outputs={label: dest})`` for the options that name a file it writes, and
``writes(args) -> dict[str, Output]`` for the rest (a meta file beside a score file, a stage's folder, its scratch
space). :func:`outputs` joins both: the outputs of a stage, what the CLI checks before any work (:func:`check`), and
what the tests hold every write to (tests/audit.py records each file a command creates, replaces, renames, removes
or links, and what its subprocesses change, and fails on anything outside these paths).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gece.base.errors import GeceError

Kind = Literal["file", "folder", "scratch"]


@dataclass(frozen=True)
class Output:
    """One path a command writes. ``file``: written whole, atomically (a temporary file beside it, renamed);
    ``folder``: the command owns the folder whole and may create, replace or remove anything below it (a stage's
    output folder); ``scratch``: a folder it may write and remove below that is no output (the shards of a killed
    run, a task lm-eval reads). ``updated``: the command also reads what an earlier run left there (a resumed
    folder, a file rewritten in place), so the path may be one of its inputs. ``hint``: how to fix a path that cannot
    be written (for one derived from an option, which option to change)."""

    path: Path
    kind: Kind = "file"
    updated: bool = False
    hint: str | None = None


def inputs(args) -> list[Path]:
    """Every path the command of ``args`` reads: ``--params``, its ``inputs`` options and its ``reads(args)``."""
    given = [getattr(args, name) for name in getattr(args, "inputs", ())]
    derived = args.reads(args) if getattr(args, "reads", None) else []
    flat = [p for g in given for p in (g if isinstance(g, list) else [g]) if p is not None]
    return [Path(args.params), *map(Path, flat), *map(Path, derived)]


def outputs(args) -> dict[str, Output]:
    """Every path the command of ``args`` writes, label -> :class:`Output`: its ``outputs`` options (files) and
    its ``writes(args)``."""
    given = {label: getattr(args, dest) for label, dest in getattr(args, "outputs", {}).items()}
    derived = args.writes(args) if getattr(args, "writes", None) else {}
    return {label: Output(Path(p)) for label, p in given.items() if p is not None} | derived


def check_folder(label: str, out: Output, read: list[Path]) -> None:
    """A folder output: a directory or a new path that can be created, neither inside nor around an input."""
    from gece.io.files.outputs import check_output, overlap

    hint = out.hint or f"give {label} a directory of its own"
    if os.path.lexists(out.path) and not out.path.is_dir():
        raise GeceError(f"{label} {out.path} is not a directory", hint=hint)
    if not out.path.exists():
        check_output(out.path, label, hint)
    real = Path(os.path.realpath(out.path))
    for given in [] if out.updated else read:
        how = overlap(real, Path(os.path.realpath(given)))
        if how is not None:
            raise GeceError(
                f"{label} {out.path} {how} the input {given}; writing it would replace or write into what the "
                "command reads",
                hint=f"give {label} a path outside {given}",
            )


def check(args, labels: dict[str, str]) -> tuple[list[Path], dict[str, Output]]:
    """Every path on the command line can be looked up, and every output is writable, checked before any work
    (:mod:`gece.io.files.outputs`): a file output is a regular file or a new path, not equal to, inside or around an
    input, and no two outputs are one path; a folder output a directory or a new one, outside the inputs. Returns
    the declared inputs and outputs."""
    from gece.io.files.inputs import check_names
    from gece.io.files.outputs import check_output, check_outputs

    given = vars(args).items()
    named = {labels.get(d, d): p for d, v in given for p in (v if isinstance(v, list) else [v]) if isinstance(p, Path)}
    check_names({"--params": args.params} | named)
    read, written = inputs(args), outputs(args)
    for label, out in written.items():
        if out.kind == "file":
            check_output(out.path, label, out.hint)
        else:
            check_folder(label, out, read)
    check_outputs({k: o.path for k, o in written.items() if o.kind == "file" and not o.updated}, read)
    return read, written
