"""``gece --help`` and ``gece COMMAND --help``: the parser with every command, and help text with the current
params.yaml values in place of ``{params:section.key}``.

:mod:`gece.cli` imports this module by name (``importlib.import_module(HELP_MODULE)``), and only when help is
shown, so it is in no stage's code deps: a stage's command never prints help. ``gece --help`` lists each
command's ``HELP`` read from its module's source (:func:`help_line`), so only the command asked about is imported.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
from pathlib import Path

from gece.base.errors import GeceError
from gece.cli import COMMANDS, GLOBAL_HELP, Parser, add_command, add_globals, named_command

PARAM = re.compile(r"\{params:([a-z_.]+)\}")


def _help_params() -> dict:
    """params.yaml (or the file after ``--params`` on the command line) as plain data, for the defaults shown
    by ``--help``; the built-in defaults where it is missing or invalid (help never fails)."""
    from gece.io.settings.params import Params, load_params

    argv = sys.argv[1:]
    path = Path(argv[argv.index("--params") + 1]) if "--params" in argv[:-1] else Path("params.yaml")
    try:
        return {**load_params(path).model_dump(mode="json"), "_source": f"{path}"}
    except (GeceError, OSError):
        return {
            **{
                name: f.default.model_dump(mode="json") if hasattr(f.default, "model_dump") else f.default
                for name, f in Params.model_fields.items()
                if not f.is_required()
            },
            "_source": f"the built-in defaults ({path} not found or invalid):",
        }


def _param_text(key: str, values: dict) -> str:
    value: object = values
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    shown = (
        "null"
        if value is None
        else ", ".join(map(str, value))
        if isinstance(value, list)
        else ", ".join(f"{k}: {v}" for k, v in value.items()) or "{}"
        if isinstance(value, dict)
        else str(value)
    )
    return f"{shown} from {values.get('_source', 'params.yaml')} {key}"


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help with the current params.yaml values in place of ``{params:section.key}`` (loaded once, when help is
    printed), and the examples of the epilog kept as written."""

    _values: dict | None = None

    @classmethod
    def fill(cls, text: str, bare: bool = False) -> str:
        if not PARAM.search(text):
            return text
        if cls._values is None:
            cls._values = _help_params()
        values = cls._values
        return PARAM.sub(
            lambda m: _param_text(m.group(1), values).split(" from ")[0] if bare else _param_text(m.group(1), values),
            text,
        )

    def _get_help_string(self, action: argparse.Action) -> str:
        return self.fill(action.help or "")

    def _format_text(self, text: str) -> str:
        return super()._format_text(self.fill(text, bare=True))


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {x}" for x in lines)


def help_line(module_name: str) -> str:
    """A command module's ``HELP``, read from its source with :mod:`ast` (the module is not imported, so
    ``gece --help`` loads no command's code)."""
    path = Path(__file__).parent.joinpath(*module_name.split(".")[1:]).with_suffix(".py")
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["HELP"]:
            return ast.literal_eval(stmt.value)
    raise LookupError(f"{path} has no HELP = '...' line (the help of its command)")


def help_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser that prints help: every subcommand with its help line; the options of the one named in ``argv``
    (all of them when ``argv`` is None), so only that command's module is imported."""
    parser = Parser(
        prog="gece",
        description=GLOBAL_HELP,
        epilog=_examples(
            "dvc repro                                   # every stage, as dvc.yaml runs them",
            "gece try HuggingFaceTB/SmolLM2-135M --limit 100   # a new model on 100 pairs",
            "gece summary                                # the findings of the committed reports",
            "gece diff --old HEAD~1 --tol 1e-4           # what moved since the last commit",
            "gece COMMAND --help                         # options, defaults and examples",
        ),
        formatter_class=_Help,
    )
    add_globals(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = named_command(argv) if argv is not None else None
    for name, module_name in COMMANDS.items():
        if argv is not None and name != wanted:
            sub.add_parser(name, help=help_line(module_name))
            continue
        module = importlib.import_module(module_name)
        add_command(
            sub,
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", None) or module.HELP,
            epilog=_examples(*module.EXAMPLES),
            formatter_class=_Help,
        )
    return parser
