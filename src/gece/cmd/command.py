"""What every command module shares: the consoles, an id checked, options checked like params.yaml.

Each ``gece`` subcommand is a module (``gece.cli.COMMANDS``) with ``add_arguments(parser)``
and ``run(args) -> int``; this module holds the parts they have in common, so a command's
module stays about its stage. The options and tables of the stages that read runs (a score file or
``--benchmark``) are in :mod:`gece.cmd.run_tables`; params.yaml's loading in :mod:`gece.io.settings.params`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gece.base.errors import GeceError
from gece.base.terminal import console

out = console()  # data is printed through literal() or plain(): never as markup, emoji or escape codes
err = console(stderr=True)


Kind = Literal["file", "folder", "scratch"]


@dataclass(frozen=True)
class Output:
    """One path a command writes, one value of its ``writes(args)`` (a plain path there is a ``file``). ``file``:
    written whole, atomically (a temporary file beside it, renamed); ``folder``: the command owns the folder whole
    and may create, replace or remove anything below it (it replaces it, or keeps only the current runs' files);
    ``scratch``: a folder it may write and remove below that is no output (the shards of a killed run, a task
    lm-eval reads) and no DVC output of its stage. ``updated``: the command also reads what an earlier run left
    there (a resumed folder, a file rewritten in place), so the path may be one of its inputs. ``hint``: how to fix
    a path that cannot be written (for one derived from an option, which option to change).

    The one declaration of a command's writes: the CLI checks them before any work (``gece.cli.check_paths``),
    ``gece stage-deps`` makes the file and folder outputs its stage's DVC outputs (:mod:`gece.cmd.stage`), and the
    tests hold every write the command makes to them (tests/audit.py)."""

    path: Path
    kind: Kind = "file"
    updated: bool = False
    hint: str | None = None


def declared_inputs(args: argparse.Namespace) -> list[Path]:
    """Every path the command of ``args`` reads, as its module declares them: ``--params``, the options named
    by ``inputs`` (``p.set_defaults(inputs=(...))``) and what its ``reads(args)`` derives from the arguments
    (the prepared file of ``--benchmark``, a run's source directory...). Files or directories."""
    given = [getattr(args, name) for name in getattr(args, "inputs", ())]
    derived = args.reads(args) if getattr(args, "reads", None) else []
    return [
        Path(args.params),
        *(Path(p) for g in given for p in (g if isinstance(g, list) else [g]) if p is not None),
    ] + [Path(p) for p in derived]


def declared_outputs(args: argparse.Namespace) -> dict[str, Output]:
    """Every path the command of ``args`` writes, label -> :class:`Output`: its output options (``outputs``:
    label -> dest, files) and what its ``writes(args)`` derives (the meta file beside a score file, a folder, its
    scratch space...)."""
    given = {option: getattr(args, dest) for option, dest in getattr(args, "outputs", {}).items()}
    derived = args.writes(args) if getattr(args, "writes", None) else {}
    return {
        label: p if isinstance(p, Output) else Output(Path(p))
        for label, p in (given | derived).items()
        if p is not None
    }


def check_id(value: str, option: str) -> str:
    """``value`` of a command-line ``option`` if it is a valid benchmark or model id, else a GeceError."""
    from gece.io.settings.ids import check_id as check

    return check(value, option)


def override(settings, **given):
    """``settings`` (a params section) with the command-line options that were given, validated
    like params.yaml: an option outside its bounds is an error, not silently accepted."""
    from pydantic import ValidationError

    from gece.io.settings.params_file import type_note

    values = {k: v for k, v in given.items() if v is not None}
    if not values:
        return settings
    try:
        return type(settings).model_validate({**settings.model_dump(), **values})
    except ValidationError as e:
        options = [f"--{str(er['loc'][0]).replace('_', '-')}" if er["loc"] else "options" for er in e.errors()]
        problems = [
            f"{option}: {er['msg']} (got {er.get('input')!r}){type_note(er)}"
            for option, er in zip(options, e.errors(), strict=True)
        ]
        section = type(settings).__name__.removesuffix("Params").lower()
        raise GeceError(
            f"invalid command-line option {', '.join(dict.fromkeys(options))}",
            problems=problems,
            hint=f"pass a value within the bounds shown, or leave the option out to use {section} "
            "settings of params.yaml (see `gece COMMAND --help` and docs/pipeline.md)",
        ) from e
