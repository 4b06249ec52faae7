"""Command-line values checked when they are parsed: a bad one is a usage error (exit 2) that names the option,
before any work (no git call, no DVC call, no model load, no data read).

argparse calls these as ``type=``: each returns the value or raises :class:`argparse.ArgumentTypeError`, whose
message argparse prints after the option's name (``argument --tol: ...``). Numbers are read in ASCII only:
Python's ``int()`` and ``float()`` also read Unicode digits (``'٣'``, ``'１'``) and ``'1_000'``,
which nobody means on a command line. A stage's option that overrides a params.yaml key takes the key's own
bounds (:func:`setting`), so the command line and params.yaml accept the same values.
"""

from __future__ import annotations

import argparse
import math
import re
import types
import typing
from collections.abc import Callable

WHOLE = re.compile(r"[+-]?[0-9]{1,19}")  # ASCII digits; 19 digits hold any bound of params.yaml
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")  # no '_', no hex, no inf or nan


def _whole(text: str) -> int:
    """A whole number written in ASCII digits (``²``, ``١٢``, ``1_0``, ``1.5`` and ``1e3`` are refused)."""
    if not WHOLE.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number written in ASCII digits (e.g. 10)")
    return int(text)


def _number(text: str) -> float:
    """A finite float written in ASCII (Python's float() also reads '١', '1_0' or 'inf', which nobody means here)."""
    stripped = text.strip()
    if stripped.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give one such as 1e-6")
    if not DECIMAL.fullmatch(stripped):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number written in ASCII (e.g. 1e-6)")
    value = float(stripped)
    if not math.isfinite(value):  # 1e400
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give one such as 1e-6")
    return value


def tolerance(text: str) -> float:
    """An absolute tolerance: a finite number >= 0 (``inf`` would hide every change, ``nan`` none)."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; a tolerance is 0 or more (e.g. 1e-6)")
    return value


def count(text: str) -> int:
    """A count of things: a whole number >= 1, written in ASCII digits (``²`` or ``1.5`` is refused)."""
    if not re.fullmatch(r"[+-]?[0-9]{1,9}", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 999999999")
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is less than 1; give a whole number of 1 or more")
    return value


def regex(text: str) -> re.Pattern[str]:
    """A Python regular expression, compiled."""
    try:
        return re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid regular expression ({e}); escape special characters, e.g. 'runs\\.winobias'"
        ) from None


def _kinds(annotation: object) -> set[type]:
    """The plain types a field's annotation allows (``int | None`` -> {int, NoneType})."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return {k for a in typing.get_args(annotation) for k in _kinds(a)}
    return {annotation} if isinstance(annotation, type) else set()


def setting(section: type, name: str) -> Callable[[str], object]:
    """The argparse type of a stage option that overrides params.yaml's ``<section>.<name>``: the text read as
    the key's type (a whole number in ASCII digits for an integer key, a finite ASCII number for a number key;
    a key that also takes text, such as ``extract.batch_size: auto``, takes a word too), then checked against
    the key's own bounds (``section`` is its pydantic settings class, e.g. ``MetricsParams``)."""
    from typing import Annotated

    from pydantic import ConfigDict, TypeAdapter, ValidationError

    field = section.model_fields[name]  # type: ignore[attr-defined]
    kinds = _kinds(field.annotation)
    adapter = TypeAdapter(
        Annotated[field.annotation, *field.metadata], config=ConfigDict(strict=True, allow_inf_nan=False)
    )

    def check(text: str) -> object:
        value: object
        if str in kinds and not re.fullmatch(r"\s*[-+.0-9].*", text):
            value = text  # a word (batch_size: auto): the key's validator says whether it is one
        elif int in kinds and float not in kinds:
            value = _whole(text)
        else:
            value = _number(text)
        try:
            return adapter.validate_python(value)
        except ValidationError as e:
            msg = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise argparse.ArgumentTypeError(f"{msg} (got {text!r})") from None

    check.__name__ = name  # argparse names a type by it in some messages
    return check
