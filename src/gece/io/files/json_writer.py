"""Writing JSON reports: validated against their model, NaN and infinities as null, indented, atomically
(:func:`gece.io.files.outputs.write_text`), so a file's bytes depend only on its data.

Kept apart from the Parquet writers (:mod:`gece.io.files.writer`) so that a stage that writes only JSON imports no
Parquet code. Part of the code that determines a token file's bytes (its meta file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, TypeAdapter, ValidationError

from gece.io.files.outputs import write_text


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, BaseModel):
        return o.model_dump(mode="json", exclude_none=False)
    raise TypeError(f"cannot serialise {type(o).__name__}")


def clean_floats(obj: Any) -> Any:
    """Replace NaN/inf by None recursively (JSON has no NaN; an undefined value is null)."""
    if isinstance(obj, dict):
        return {k: clean_floats(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean_floats(v) for v in obj]
    if isinstance(obj, float | np.floating):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def write_json(path: str | Path, obj: Any, model: type[BaseModel] | TypeAdapter | None = None) -> None:
    """Validate ``obj`` against ``model`` (when given) and write it as indented JSON, atomically."""
    if isinstance(obj, BaseModel):
        payload = obj.model_dump(mode="json")
    else:
        payload = clean_floats(obj)
        if model is not None:
            try:
                if isinstance(model, TypeAdapter):
                    model.validate_python(payload)
                else:
                    model.model_validate(payload)
            except ValidationError as e:  # a bug in gece, not a user error
                raise ValueError(f"refusing to write {path}: {e}") from e
    write_text(path, json.dumps(payload, indent=2, default=_json_default, allow_nan=False) + "\n")
