"""Reading JSON: bounded, strict parsing (no key twice, no number of a hundred digits, no lone surrogate, a
bounded depth) and a report read against its schema; and the helpers that walk what was read.

Kept apart from the Parquet readers (:mod:`gece.io.files.readers`) so that a stage that reads only JSON reports imports
no Parquet code.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from gece.base.errors import GeceError
from gece.io.files.inputs import read_text, require_file
from gece.io.schemas.schema_base import fmt_error

JSON_DEPTH = 64  # arrays and objects inside one another: gece's own files and lm-eval's logs nest fewer than 10
JSON_NUMBER_CHARS = 100  # characters of one number: a float as Python writes it has at most 24
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # an escaped UTF-16 half, which is text only in a pair


class _JsonRefused(ValueError):
    """A JSON value that parses but is refused: the message says why."""


def _number(kind: type) -> Any:
    def parse(text: str) -> Any:
        if len(text) > JSON_NUMBER_CHARS:
            raise _JsonRefused(f"a number of {len(text):,} characters (at most {JSON_NUMBER_CHARS}): {text[:20]}...")
        return kind(text)

    return parse


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _JsonRefused(f"key {twice[:80]!r} is written twice in one object (JSON would keep the second)")
    return out


def _check_tree(value: Any, surrogates: bool) -> None:
    """Refuse nesting deeper than :data:`JSON_DEPTH` and (when ``surrogates``) a string with half of a UTF-16 pair."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth >= JSON_DEPTH:
                raise _JsonRefused(f"nested more than {JSON_DEPTH} deep")
            items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
            for k, x in items:
                if surrogates and k is not None:
                    stack.append((k, depth + 1))
                stack.append((x, depth + 1))
        elif surrogates and isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise _JsonRefused(f"a string holds half of a UTF-16 surrogate pair: {v[:40]!r}") from None


def parse_json(text: str, source: str, hint: str) -> Any:
    """``text`` (the JSON of ``source``: a file, or a file and line) parsed with bounds: nesting at most
    :data:`JSON_DEPTH` deep, numbers of at most :data:`JSON_NUMBER_CHARS` characters (Python parses a long
    integer in time quadratic in its digits), no key written twice in one object, no lone surrogate in a string.
    ``NaN`` and ``Infinity`` parse as floats: a schema that needs a finite number refuses them.
    Anything else is a GeceError naming ``source`` and ``hint``."""
    try:
        value = json.loads(text, parse_int=_number(int), parse_float=_number(float), object_pairs_hook=_unique_keys)
        _check_tree(value, bool(_SURROGATE.search(text)))
    except json.JSONDecodeError as e:
        raise GeceError(f"{source}: not valid JSON: line {e.lineno}, column {e.colno}: {e.msg}", hint=hint) from None
    except RecursionError:
        raise GeceError(
            f"{source}: not valid JSON (nested too deeply), at most {JSON_DEPTH} levels", hint=hint
        ) from None
    except _JsonRefused as e:
        raise GeceError(f"{source}: refused JSON: {e}", hint=hint) from None
    return value


def read_json_file(path: str | Path, hint: str, size_limit: str = "json_bytes") -> Any:
    """A JSON file from outside, read by :func:`read_text` and parsed by :func:`parse_json`."""
    return parse_json(read_text(path, hint, size_limit), str(path), hint)


def read_json_lines(path: str | Path, hint: str, size_limit: str) -> list[tuple[int, Any]]:
    """A JSON-lines file from outside (one JSON value a line; blank lines skipped): (line number, value) pairs,
    each line parsed by :func:`parse_json`, so an error names the file and the line."""
    text = read_text(path, hint, size_limit)
    return [
        (n, parse_json(line, f"{path}: line {n}", hint))
        for n, line in enumerate(text.split("\n"), start=1)
        if line.strip()
    ]


def flatten(obj: object, prefix: str = "") -> dict[str, object]:
    """Nested mappings as {``a.b.c``: leaf}, the way ``dvc metrics diff`` names the keys."""
    if isinstance(obj, dict):
        flat: dict[str, object] = {}
        for k, v in obj.items():
            flat.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return flat
    return {prefix: obj}


def is_number(x: object) -> bool:
    """Whether ``x`` is an int or a float (a bool is not; NaN and infinities are)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def is_finite_number(x: object) -> bool:
    """Whether ``x`` is an int or a finite float (a bool is not, nor NaN or an infinity)."""
    return is_number(x) and math.isfinite(x)  # type: ignore[arg-type]


def read_json(path: str | Path, model: type[BaseModel] | TypeAdapter | None = None) -> Any:
    path = require_file(path, hint="run the stage that writes it (dvc repro)", size_limit="json_bytes")
    text = read_text(path, "run the stage that writes it (dvc repro)", "json_bytes")  # a bad byte: its line
    data = parse_json(text, str(path), "delete it and rerun the stage")  # bounded depth and numbers
    if model is None:
        return data
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(data)
        return model.model_validate(data)
    except ValidationError as e:
        raise GeceError(
            f"{path}: does not match the {getattr(model, '__name__', 'expected')} schema",
            problems=[fmt_error(err) for err in e.errors()[:20]],
            hint="it was written by another gece version or edited by hand; rerun the stage that writes it",
        ) from e
