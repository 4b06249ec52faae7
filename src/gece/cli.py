"""The ``gece`` command: the table of subcommands, argument parsing, exit codes; no logic.

Each subcommand is one module (``COMMANDS``) with ``add_arguments(parser)`` and
``run(args) -> int``: a DVC stage's command runs its stage module and what that imports, and
nothing else (the module is imported only when its command runs). What ``--help`` says of a
command lives in its module: ``HELP`` (one line, also listed by ``gece --help``, which reads it from
the module's source without importing it), ``DESCRIPTION`` (optional) and ``EXAMPLES``. So editing
one command's help changes only that command's code, and DVC re-runs only its stages.

Exit status: 0 success, 2 a problem the user can fix (bad file, bad parameter, missing
package; printed without a traceback), 1 a bug, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from pathlib import Path

from rich.logging import RichHandler

from gece import __version__, native_blas
from gece.base.errors import GeceError
from gece.base.terminal import LiteralFilter, console, literal, visible

# subcommand -> the module that implements it; the DVC stages first, in pipeline order. A command's help
# lives in its module (HELP, DESCRIPTION, EXAMPLES), so editing it re-runs only that command's stages.
COMMANDS: dict[str, str] = {
    "prepare": "gece.pipeline.prepare",
    "annotate": "gece.pipeline.annotate",
    "extract": "gece.pipeline.extract",
    "score": "gece.pipeline.score",
    "lmeval-run": "gece.lmeval.stage",
    "metrics": "gece.pipeline.metrics",
    "calibrate": "gece.pipeline.calibrate",
    "ablate": "gece.pipeline.ablate",
    "neutral": "gece.pipeline.neutral",
    "special-tokens": "gece.pipeline.special_tokens",
    "prompt-extract": "gece.pipeline.prompt_extract",
    "prompts": "gece.pipeline.prompt_ablation",
    "compare": "gece.pipeline.compare",
    "groups": "gece.pipeline.groups",
    "summary": "gece.pipeline.summary",
    "report": "gece.pipeline.report",
    "import": "gece.tools.import_pairs",
    "validate": "gece.tools.validate",
    "pull": "gece.tools.remote",
    "repro": "gece.tools.repro",
    "try": "gece.tools.try_model",
    "diff": "gece.tools.diff",
    "exp-summary": "gece.tools.experiments",
    "lmeval-export": "gece.lmeval.export",
    "lmeval-model": "gece.lmeval.model_dir",
    "lmeval-import": "gece.lmeval.imports",
    "lmeval-stages": "gece.lmeval.dvc_stages",
    "stage-deps": "gece.tools.stage_deps",
    "stage-code": "gece.tools.stage_code",
}

NATIVE_BLAS = {"extract"}  # commands whose only OpenBLAS work is correctly rounded products (gece.native_blas)

err = console(stderr=True)


# ------------------------------------------------------------------------- parser
class Parser(argparse.ArgumentParser):
    """argparse, with a hint after a usage error (exit 2, as any user error)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(
            2,
            f"{self.prog}: error: {visible(message)}\nhint: `{self.prog} --help` lists the options and the "
            "values they take\n",
        )


def named_command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word that is no option), if it is one."""
    rest = iter(argv)
    for word in rest:
        if word == "--params":
            next(rest, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


GLOBAL_HELP = "Calibration of language-model confidence against human judgements of gender bias. "
GLOBAL_HELP += "Each subcommand is one DVC stage (or a tool around them); see README.md."
HELP_MODULE = "gece.cli_help"  # the full parser and the help formatter: imported by name, only when help is shown


def add_globals(parser: argparse.ArgumentParser) -> None:
    """The options every command takes, before its name."""
    parser.add_argument("--version", action="version", version=f"gece {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors (no tables)")
    parser.add_argument(
        "--params", default="params.yaml", help="parameters file whose values are the defaults (default: %(default)s)"
    )


def add_command(sub, name: str, **parser_options) -> None:
    """The subparser of command ``name``: its module's options, ``run``, ``reads`` and ``writes``."""
    module = importlib.import_module(COMMANDS[name])
    p = sub.add_parser(name, **parser_options)
    module.add_arguments(p)
    p.set_defaults(func=module.run, reads=getattr(module, "reads", None), writes=getattr(module, "writes", None))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``gece`` for ``argv``: the global options and the options of the command it names, whose
    module alone is imported. Help (``-h``, ``--help``, no known command, or ``argv`` None: every command's
    options) is built by :mod:`gece.cli_help`, which is imported by name and only then, so a stage's run (and its
    code deps in dvc.yaml, :mod:`gece.code.closure`) does not include the help machinery."""
    name = named_command(argv) if argv is not None else None
    if name is None or "-h" in argv or "--help" in argv:  # type: ignore[operator]
        return importlib.import_module(HELP_MODULE).help_parser(argv)
    parser = Parser(prog="gece", description=GLOBAL_HELP)
    add_globals(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_command(sub, name, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def _labels(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """dest -> how the command line names it (``--out``, ``CSV``), for the command's options and the global ones."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {
        a.dest: max(a.option_strings, key=len) if a.option_strings else a.metavar or a.dest.upper()
        for a in (*parser._actions, *sub._actions)
    }


def check_paths(args: argparse.Namespace, labels: dict[str, str] | None = None) -> tuple[list[Path], dict]:
    """Every path on the command line is one the system can look up (no name too long), and every output it
    declares (:class:`gece.cmd.command.Output`) is writable, checked before any work (see gece.io.files.outputs):
    a file output is a regular file or a new path, not equal to, inside or around an input, and no two outputs are
    one path; a folder output a directory (no symlink) or a new one, outside the inputs (unless ``updated``: the
    command reads what it left there). Returns the declared inputs and outputs."""
    from gece.cmd.command import declared_inputs, declared_outputs
    from gece.io.files.inputs import check_names
    from gece.io.files.output_dirs import check_output_dir
    from gece.io.files.outputs import check_output, check_outputs, overlap

    labels = labels or {}
    check_names(
        {"--params": args.params}
        | {
            f"{labels.get(dest, dest)}": p
            for dest, value in vars(args).items()
            for p in (value if isinstance(value, list) else [value])
            if isinstance(p, Path)
        }
    )
    inputs, outputs = declared_inputs(args), declared_outputs(args)
    for label, out in outputs.items():
        if out.kind == "file":
            check_output(out.path, label, out.hint)
        else:
            hint = out.hint or f"remove {out.path} or move it away: gece writes this folder whole"
            if out.path.is_symlink():
                raise GeceError(
                    f"{label} {out.path} is a symlink: gece writes this folder, never through a link", hint=hint
                )
            check_output_dir(out.path, label, hint=hint)
            real = Path(os.path.realpath(out.path))
            for given in [] if out.updated else inputs:
                how = overlap(real, Path(os.path.realpath(given)))
                if how is not None:
                    raise GeceError(
                        f"{label} {out.path} {how} the input {given}; writing it would replace or write into what "
                        "the command reads",
                        hint=f"give {label} a path outside {given}",
                    )
    check_outputs({k: o.path for k, o in outputs.items() if o.kind == "file" and not o.updated}, inputs)
    return inputs, outputs


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):  # `gece ... | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = sys.argv[1:] if argv is None else argv
    if named_command(argv) in NATIVE_BLAS:
        native_blas()  # before the command's module loads numpy
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if err.is_terminal:
        handler: logging.Handler = RichHandler(console=err, show_time=False, show_path=False, markup=False)
    else:  # plain lines for logs and DVC
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    handler.addFilter(LiteralFilter())
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, handlers=[handler], force=True)
    try:
        inputs, outputs = check_paths(args, _labels(parser, args.command))
        written = tuple((str(o.path), o.kind) for o in outputs.values())
        sys.audit("gece_command", args.command, tuple(map(str, inputs)), written)  # for the tests that watch its files
        try:
            return args.func(args)
        finally:
            sys.audit("gece_command_end", args.command)
    except GeceError as e:
        err.print(f"[red]error[/]: {literal(e.message)}", highlight=False)
        for p in e.problems:
            err.print(f"  - {literal(p)}", highlight=False)
        if e.hint:
            err.print(f"[cyan]hint[/]: {literal(e.hint)}", highlight=False)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130


if __name__ == "__main__":
    sys.exit(main())
