"""Command-line values checked when they are parsed: a bad one is a usage error (exit 2) that names the option,
before any work (no git call, no DVC call, no model load).

argparse calls these as ``type=``: each returns the value or raises :class:`argparse.ArgumentTypeError`, whose
message argparse prints after the option's name (``argument --tol: ...``).
"""

from __future__ import annotations

import argparse
import math
import re


def _number(text: str) -> float:
    """A finite float written in ASCII (Python's float() also reads '１' or '١', which nobody means here)."""
    try:
        if not text.isascii():
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 1e-6)") from None
    if not math.isfinite(value):
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
