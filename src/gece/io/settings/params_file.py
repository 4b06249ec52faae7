"""params.yaml read and checked: the strict YAML loader, the top-level keys, and a section set validated.

A stage validates the sections it reads (:func:`load_sections` with a model of those sections: the whole file
for most stages, :class:`gece.io.settings.params.Params`), so a stage that reads one section imports only that section's
model. Every stage checks the top-level keys of the whole file (:data:`SECTIONS`): a misspelled section is an
error everywhere; a misspelled key inside a section is an error in every stage that reads the section, and in
``gece validate`` and tests/test_params.py, which validate the whole file (docs/pipeline.md, "Parameters").
Every section is a pydantic model that forbids unknown keys (:class:`gece.io.schemas.schema_base.Section`), so a
misspelled key (``metrics.nbins``) is an error that names the key and suggests the right one instead of being
silently ignored.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from gece.base.errors import GeceError

DEFAULT_PARAMS = Path("params.yaml")

# the top-level keys of params.yaml, in the order of gece.io.settings.params.Params (tests/test_params.py: equal)
STAGE_SECTIONS = ("prepare", "extract", "metrics", "groups", "ablate", "calibrate", "annotate", "prompts")
# the sections that say which runs a benchmark has (gece.pipeline.runs): every stage over all runs depends on them
RUN_SECTIONS = ("models", "references", "lmeval_runs", "registry")
SECTIONS = ("benchmarks", *RUN_SECTIONS, *STAGE_SECTIONS)

M = TypeVar("M", bound=BaseModel)
SEE = "see the Parameters section of README.md"


# keys of the layout before one entry per benchmark (issue 39): where each one went
MOVED = {
    "imports": "moved into the benchmark entries: benchmarks.<b>.source: <CrowS-Pairs-format file>",
    "extract.rules": "moved into the benchmark entries: benchmarks.<b>.rule: target | sentence",
    "ablate.neutral": "moved into the benchmark entries: benchmarks.<rewrite>.neutral_of: <benchmark it rewrites>",
}


def _models_in(ann: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names: itself, or the members of a (tagged) union."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    return [m for a in get_args(ann) for m in _models_in(a)]


def _tags(root: type[BaseModel]) -> set[str]:
    """The tags of the tagged unions among ``root``'s fields (a registry entry: ModelSpec or HarnessSpec), which
    pydantic puts in an error's location: not keys of params.yaml."""
    out: set[str] = set()
    for field in root.model_fields.values():
        ann = get_args(field.annotation)[1] if get_origin(field.annotation) is dict else field.annotation
        members = _models_in(ann)
        out |= {m.__name__ for m in members} if len(members) > 1 else set()
    return out


def _suggest(loc: tuple, root: type[BaseModel]) -> str:
    """'did you mean' for an unknown key, from the keys the model allows at that place (the top level: every
    section of :data:`SECTIONS`; inside a mapping of entries, ``benchmarks.<b>`` or ``registry.<m>``, those of
    an entry)."""
    if len(loc) == 1:
        close = difflib.get_close_matches(str(loc[0]), SECTIONS, n=1)
        return f" (did you mean '{close[0]}'?)" if close else f" (allowed: {', '.join(SECTIONS)})"
    model: Any = root
    tags = _tags(root)
    tag = next((p for p in loc if p in tags), None)
    parts = iter([p for p in loc[:-1] if p not in tags])
    for part in parts:
        field = model.model_fields.get(part) if isinstance(part, str) and hasattr(model, "model_fields") else None
        if field is None:
            return ""
        ann = field.annotation
        if get_origin(ann) is dict:  # {name: entry}: the next part is the entry's name
            ann = get_args(ann)[1]
            if next(parts, None) is None:
                return ""
        members = _models_in(ann)
        model = next((m for m in members if m.__name__ == tag), members[0] if members else None)
        if model is None:
            return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (allowed: {', '.join(model.model_fields)})"


def _key(loc: tuple, tags: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """A params key as written in params.yaml: ``metrics.n_bins``, ``models[3]``, ``registry key 'X'`` (``tags``:
    a tagged union's tags, left out)."""
    if loc and loc[-1] == "[key]":
        return f"{_key(loc[:-2], tags)} key {loc[-2]!r}" if len(loc) > 2 else f"key {loc[-2]!r}"
    out = ""
    for part in (p for p in loc if p not in tags):
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class _RepeatedKey(Exception):
    def __init__(self, key: object, line: int, first: int):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key written twice in one mapping is an error (PyYAML keeps
    the last value silently), and that a number in exponent notation without a dot (``1e-4``, ``2E3``) is a
    number, as YAML 1.2 and DVC read it (PyYAML follows YAML 1.1, which reads it as the text ``'1e-4'``)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:  # a flow mapping ({a: 1, a: 2}) may repeat a key on one line
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen and key != "<<":
                    raise _RepeatedKey(key, line, seen[key])
                seen[key] = line
            except TypeError:  # an unhashable key: the safe loader reports it
                continue
        return super().construct_mapping(node, deep)


# YAML 1.2's exponent forms that YAML 1.1 reads as text (1e-4, 1.5e3: no dot, or no exponent sign); those 1.1
# reads as numbers already (1.5e+3) never reach this resolver
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml(path: str | Path, hint: str) -> Any:
    """A small YAML file (params.yaml, a .dvc file) read strictly: a regular file within the size limit,
    UTF-8, valid YAML, no key written twice. Every failure is a GeceError naming the file and line."""
    from gece.io.files.inputs import read_text

    text = read_text(path, hint, "params_bytes")
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _RepeatedKey as e:
        raise GeceError(
            f"{path}: line {e.line}: key {e.key!r} is written twice (first on line {e.first}); "
            "YAML would silently keep only the second",
            hint=f"merge the two {e.key!r} entries into one",
        ) from None
    except yaml.YAMLError as e:
        raise GeceError(
            f"{path}: not valid YAML ({e})",
            hint="fix the line shown (indentation, a ':' after each key, quotes around values with ': ' or '#')",
        ) from None
    except RecursionError:
        raise GeceError(f"{path}: not valid YAML (nested too deeply)", hint=hint) from None


def type_note(err: dict) -> str:
    """Why a value of the wrong type is refused, for a pydantic error of a strict section: ``true`` is no
    count, a quoted number is text."""
    got, kind = err.get("input"), err.get("type", "")
    if kind not in ("int_type", "float_type", "bool_type", "string_type"):
        return ""
    if isinstance(got, bool):
        return ": true and false are booleans, not numbers"
    if isinstance(got, float) and kind == "int_type":
        return ": a whole number is written without a decimal point"
    if isinstance(got, str):
        return ": a quoted value is text; write the value without quotes"
    if kind == "string_type":
        return ": quote it to make it text"
    return ""


PARAMS_HINT = (
    "params.yaml holds sections such as benchmarks:, models:, registry:, metrics: at the top level; "
    "see the Parameters section of README.md"
)


def load_sections(path: str | Path, model: type[M]) -> M:
    """Load params.yaml and validate the sections that ``model`` has (its fields are top-level keys); every
    top-level key must be one of :data:`SECTIONS`. Raise a GeceError listing every bad key."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise GeceError(
            f"{path}: parameters file not found", hint="run from the repository root, or pass --params PATH"
        )
    raw = load_yaml(path, hint="--params names the parameters file (params.yaml at the repository root)")
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        kind = "list" if isinstance(raw, list) else f"single value ({raw!r})"
        raise GeceError(f"{path}: the top level is a {kind}, not a mapping of sections", hint=PARAMS_HINT)
    unknown = [k for k in raw if k not in SECTIONS]
    problems = [
        f"{k}: {MOVED[str(k)]} (README.md, Parameters)"
        if k in MOVED
        else f"{_key((k,))}: unknown key{_suggest((k,), model)}"
        for k in unknown
    ]
    try:
        settings = model.model_validate({k: v for k, v in raw.items() if k in model.model_fields})
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            key = _key(loc, _tags(model))
            if err["type"] == "extra_forbidden" and key in MOVED:
                problems.append(f"{key}: {MOVED[key]} (README.md, Parameters)")
            elif err["type"] == "extra_forbidden":
                problems.append(f"{key}: unknown key{_suggest(loc, model)}")
            elif err["type"] == "missing":
                problems.append(f"{key}: required key is missing")
            else:
                msg = err["msg"].removeprefix("Value error, ")
                got = err.get("input")
                shown = "" if isinstance(got, dict | list) or repr(got) in msg else f" (got {got!r})"
                problems.append(f"{msg}{shown}{type_note(err)}" if not loc else f"{key}: {msg}{shown}{type_note(err)}")
        raise GeceError(f"{path}: invalid parameters", problems=problems, hint=SEE) from e
    if problems:
        raise GeceError(f"{path}: invalid parameters", problems=problems, hint=SEE)
    return settings
