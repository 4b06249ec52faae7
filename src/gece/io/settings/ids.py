"""The id format of benchmarks and models: ids become file and directory names, so they are checked once, here.

Kept apart from the registry's model entry (:mod:`gece.io.settings.model_entry`) and the params sections, so that every
stage can check an id (a ``--benchmark``, a path of :mod:`gece.io.paths.layout`) without importing either.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from gece.base.errors import GeceError

# Benchmark and model ids become file and directory names (data/benchmarks/<b>.csv,
# artifacts/scores/<b>/<m>.parquet): no separators, no leading dot, nothing outside the repository.
ID_RULE = "[a-z0-9][a-z0-9._-]*"


ID_PATTERN = re.compile(ID_RULE)


ID_HELP = (
    f"ids are lowercase letters, digits, '.', '_' and '-', starting with a letter or digit "
    f"(regex {ID_RULE}), e.g. winobias or gemma-3-270m"
)


def is_id(value: object) -> bool:
    """Whether ``value`` is a valid benchmark or model id (the whole string matches ``ID_RULE``)."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def valid_id(value: str) -> str:
    if not is_id(value):
        raise ValueError(f"{value!r} is not a valid id: {ID_HELP}")
    return value


def check_id(value: str, what: str) -> str:
    """``value`` if it is a valid id, else a GeceError naming ``what`` (an option or key) and the rule."""
    if not is_id(value):
        raise GeceError(f"{what} {value!r} is not a valid id", hint=ID_HELP)
    return value


Id = Annotated[str, AfterValidator(valid_id)]
