"""What every command module shares: the consoles, an id checked, options checked like params.yaml.

Each ``gece`` subcommand is a module (``gece.cli.COMMANDS``) with ``add_arguments(parser)``
and ``run(args) -> int``; this module holds the parts they have in common, so a command's
module stays about its stage. The options and tables of the stages that read runs (a score file or
``--benchmark``) are in :mod:`gece.cmd.run_tables`; params.yaml's loading in :mod:`gece.io.settings.params`.
"""

from __future__ import annotations

import argparse
from pathlib import Path, PosixPath

from gece.base.errors import GeceError
from gece.base.terminal import console

out = console()  # data is printed through literal() or plain(): never as markup, emoji or escape codes
err = console(stderr=True)


class Folder(PosixPath):
    """An output that is a folder the command owns whole (it replaces it, or keeps only the current runs' files):
    one output of ``writes(args)``, one DVC output of its stage (:mod:`gece.cmd.stage`)."""


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


def declared_outputs(args: argparse.Namespace) -> dict[str, Path | None]:
    """Every path the command of ``args`` writes: its output options (``outputs``: label -> dest) and what its
    ``writes(args)`` derives (the meta file beside a score file, a :class:`Folder`...), label -> path."""
    given = {option: getattr(args, dest) for option, dest in getattr(args, "outputs", {}).items()}
    return given | (args.writes(args) if getattr(args, "writes", None) else {})


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
