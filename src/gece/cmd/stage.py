"""A DVC stage, declared beside its command: the ``STAGE`` of a command module, from which ``gece stage-deps``
(:mod:`gece.tools.stage_deps`) writes the stage into dvc.yaml.

``STAGE`` is a plain mapping, so a stage's module imports nothing to declare it (the stage-independent core stays
what every stage runs); :class:`Stage` validates it:

- ``argv``: the command's words after ``gece``, with ``{<axis>}`` where the stage's item goes (``{benchmark}``);
- ``matrix``: axis -> the params key whose names it takes (``benchmark: benchmarks``), or ``foreach``: the axis
  and the params key of a mapping whose keys it takes (``${key}`` in dvc.yaml);
- ``params``: the params.yaml keys it depends on (``{<axis>}`` allowed; ``params.yaml``: the whole file);
- ``outputs``: how DVC keeps an output, by the label the command declares it under (``--out``, or a label of its
  ``writes(args)``): ``kind`` (``outs``, ``plots`` or ``metrics``), ``cache``, ``persist``, ``plot`` (the plot's
  template options, ``{<axis>}`` allowed) and ``note``; an output left out is a cached ``outs`` entry;
- ``notes``: the comment beside a dep or a params key, by its path or key as the stage spells it (``{<axis>}``);
- ``about``: what the stage is, the comment at its top;
- ``code``: its code dep: ``manifest`` (``stage-code/<command>.txt``, the code its command runs), ``package``
  (``src/gece`` as a whole: the stage that writes the manifests) or ``stages`` (the manifest of every stage's
  command: the page names the code of the whole pipeline);
- ``package_data``: files of the package the command reads as data (the page's CSS and template).

The data deps and outputs are not declared here: they are what the command declares for the stage's command line
(:func:`gece.cmd.command.declared_inputs`, :func:`gece.cmd.command.declared_outputs`: its input and output options,
``reads(args)`` and ``writes(args)``), computed with a placeholder id for each axis and written back as
``${item.<axis>}``. Three kinds of read are no dep: ``--params`` (the stage's keys are ``params``), DVC's own records
(``dvc.lock``, ``*.dvc``: the last recorded run, which extract and the lm-eval stage reuse; the data snapshot's
hash), and the stage's own outputs or scratch space (``scratch`` outputs, :class:`gece.cmd.command.Output`: no DVC
output) or a folder around them (a resumed run, another model's token files reused); a read inside another one
(a file of a folder the command also declares) is that folder's.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gece.base.errors import GeceError
from gece.cmd.command import declared_inputs, declared_outputs
from gece.code.closure import PACKAGE
from gece.code.manifests import manifest_path

CODE = f"src/{PACKAGE}"  # how dvc.yaml spells the package's folder
ALL_PARAMS = "params.yaml"  # a params dep on the whole file
AXIS = re.compile(r"\{([a-z_]+)\}")
RECORDS = ("dvc.lock",)  # DVC's records, besides every *.dvc file: read to reuse or to name a run, never deps


class Output(BaseModel):
    """How DVC keeps one output of the stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["outs", "plots", "metrics"] = "outs"
    cache: bool = True
    persist: bool = False
    plot: dict[str, str] = Field(default_factory=dict)  # the template's options (a plots output)
    note: str = ""


class Stage(BaseModel):
    """A command module's ``STAGE`` (the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    about: str
    argv: list[str] = Field(min_length=1)
    matrix: dict[str, str] = Field(default_factory=dict)
    foreach: tuple[str, str] | None = None
    params: list[str] = Field(default_factory=list)
    outputs: dict[str, Output] = Field(default_factory=dict)
    notes: dict[str, str] = Field(default_factory=dict)
    code: Literal["manifest", "package", "stages"] = "manifest"
    package_data: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_loop(self) -> Stage:
        if self.matrix and self.foreach is not None:
            raise ValueError("a stage has a matrix or a foreach, not both")
        return self

    def axes(self) -> dict[str, str]:
        """axis -> how dvc.yaml spells its item (``${item.<axis>}``; ``${key}`` for foreach)."""
        if self.foreach is not None:
            return {self.foreach[0]: "${key}"}
        return {axis: f"${{item.{axis}}}" for axis in self.matrix}


@dataclass(frozen=True)
class Resolved:
    """One stage as dvc.yaml writes it: every path and key spelled with ``${item.<axis>}``."""

    name: str
    about: str
    code: str  # Stage.code
    matrix: dict[str, str]
    foreach: str | None
    cmd: str
    deps: list[tuple[str, str]]  # (path, note)
    params: list[tuple[str, str]]  # (key, note)
    outs: list[tuple[str, Output]]  # in the order the command declares them


def placeholder(axis: str) -> str:
    """The id that stands for an axis's item while the command's declarations are computed (a valid id)."""
    return f"stage-item-{axis.replace('_', '-')}"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise GeceError(f"{self.prog}: {message}", hint="fix the argv of the module's STAGE")


def command_args(module: ModuleType, command: str, argv: list[str], params: Path) -> argparse.Namespace:
    """``argv`` (``[global options] <command> ...``) parsed as gece parses it, with the module's declarations."""
    if command not in argv:
        raise GeceError(f"STAGE of {module.__name__}: argv {argv} does not name gece {command}")
    at = argv.index(command)
    top = _Parser(prog="gece", add_help=False)
    top.add_argument("-q", "--quiet", action="store_true")
    top.add_argument("--params", default=str(params))
    globals_ = top.parse_args(argv[:at])
    sub = _Parser(prog=f"gece {command}")
    module.add_arguments(sub)
    sub.set_defaults(reads=getattr(module, "reads", None), writes=getattr(module, "writes", None))
    args = sub.parse_args(argv[at + 1 :])
    args.quiet, args.params, args.command = globals_.quiet, globals_.params, command
    return args


def _spell(path: Path, axes: dict[str, str], what: str) -> str:
    """A path as dvc.yaml spells it: relative, POSIX, each placeholder id put back as ``{<axis>}``."""
    text = PurePosixPath(path).as_posix()
    if PurePosixPath(text).is_absolute() or ".." in PurePosixPath(text).parts:
        raise GeceError(f"{what} {text}: a stage's paths are relative to the repository root")
    for axis in axes:
        text = text.replace(placeholder(axis), f"{{{axis}}}")
    return text


def _overlaps(a: str, b: str) -> bool:
    pa, pb = PurePosixPath(a), PurePosixPath(b)
    return pa == pb or pa.is_relative_to(pb) or pb.is_relative_to(pa)


def _is_record(path: str) -> bool:
    return PurePosixPath(path).name in RECORDS or PurePosixPath(path).suffix == ".dvc"


def _items(how: Output, item: Callable[[str], str]) -> Output:
    """``how`` with its plot options spelled as dvc.yaml spells the stage's item (a title naming the benchmark)."""
    return how.model_copy(update={"plot": {k: item(v) for k, v in how.plot.items()}}) if how.plot else how


def resolve(
    declared: object, module: ModuleType, command: str, stage_commands: list[str], params: Path = Path(ALL_PARAMS)
) -> Resolved:
    """A module's ``STAGE`` (``declared``) as dvc.yaml writes it; ``stage_commands``: every command that is a stage
    (the ``stages`` code dep)."""
    try:
        stage = Stage.model_validate(declared)
    except ValidationError as e:
        raise GeceError(f"STAGE of {module.__name__} is not a stage declaration", problems=[str(e)]) from None
    axes = stage.axes()
    argv = [AXIS.sub(lambda m: placeholder(m.group(1)), word) for word in stage.argv]
    unknown = {m for word in stage.argv for m in AXIS.findall(word)} - set(axes)
    if unknown:
        raise GeceError(f"STAGE of {module.__name__}: argv names {sorted(unknown)}, not an axis of the stage")
    args = command_args(module, command, argv, params)
    declared = declared_outputs(args)
    outputs = {label: _spell(o.path, axes, label) for label, o in declared.items() if o.kind != "scratch"}
    scratch = [_spell(o.path, axes, label) for label, o in declared.items() if o.kind == "scratch"]
    reads = [_spell(p, axes, "a read") for p in declared_inputs(args)[1:]]  # [0] is --params
    written = [*outputs.values(), *scratch]
    data = [p for p in dict.fromkeys(reads) if not _is_record(p) and not any(_overlaps(p, o) for o in written)]
    data = [p for p in data if not any(p != q and PurePosixPath(p).is_relative_to(q) for q in data)]  # covered
    code = {
        "manifest": [manifest_path(command).as_posix()],
        "package": [CODE],
        "stages": [manifest_path(c).as_posix() for c in stage_commands],
    }[stage.code]
    deps = list(dict.fromkeys([*data, *code, *(f"{CODE}/{f}" for f in stage.package_data)]))  # src/gece read too
    missing = sorted(set(stage.outputs) - set(outputs))
    notes = sorted(set(stage.notes) - set(deps) - set(stage.params))
    if missing or notes:
        raise GeceError(
            f"STAGE of {module.__name__} names what gece {command} does not declare",
            problems=[f"outputs: {label!r} is no output of the command" for label in missing]
            + [f"notes: {key!r} is no dep or params key of the stage" for key in notes],
        )

    def item(text: str) -> str:
        return AXIS.sub(lambda m: axes[m.group(1)] if m.group(1) in axes else m.group(0), text)

    return Resolved(
        name=stage.name,
        about=stage.about,
        code=stage.code,
        matrix={axis: f"${{{key}}}" for axis, key in stage.matrix.items()},
        foreach=f"${{{stage.foreach[1]}}}" if stage.foreach else None,
        cmd=item(" ".join(w if AXIS.search(w) else shlex.quote(w) for w in [PACKAGE, *stage.argv])),
        deps=[(item(d), stage.notes.get(d, "")) for d in deps],
        params=[(item(k), stage.notes.get(k, "")) for k in stage.params],
        outs=[(item(p), _items(stage.outputs.get(label, Output()), item)) for label, p in outputs.items()],
    )
