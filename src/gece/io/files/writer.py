"""Writing the pipeline's files against their schemas: Parquet tables and JSON reports, atomically.

Tabular artifacts are Parquet whose columns and Arrow types follow a pydantic row model of
:mod:`gece.io.schemas.pair_rows` (or :mod:`gece.io.schemas.tokens`); reports are JSON validated by a pydantic model.
Every
write goes to a temporary file in the target directory and is renamed into place
(:func:`gece.io.files.outputs.atomic_path`), so a killed run never leaves a half-written artifact, and a file's
bytes depend only on its data. The readers are :mod:`gece.io.files.readers`. This module is part of the code
that determines a token file's bytes (:func:`gece.scoring.extraction.scoring_code`), so it holds only the
writers.
"""

from __future__ import annotations

import math
import types
import typing
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, TypeAdapter, ValidationError

from gece.base.errors import GeceError
from gece.io.files.outputs import atomic_path
from gece.io.schemas.schema_base import fmt_error

SCHEMA_VERSION = "1"


ROW_GROUP_ROWS = 2048  # rows per row group of a file written in chunks (extract's window of pairs)


META_PREFIX = "gece."


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Arrow type and nullability for a pydantic field annotation."""
    nullable = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        (annotation,) = args
        origin = typing.get_origin(annotation)
    if origin is Literal:
        lit = typing.get_args(annotation)
        return (pa.int64() if isinstance(lit[0], int) else pa.string()), nullable
    if origin is list:
        (inner,) = typing.get_args(annotation)
        return pa.list_(_arrow_type(inner)[0]), nullable
    mapping = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    return mapping[annotation], nullable


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    fields = []
    for name, info in model.model_fields.items():
        typ, nullable = _arrow_type(info.annotation)
        fields.append(pa.field(name, typ, nullable=nullable))
    return pa.schema(fields)


def validate_records(
    records: list[dict], model: type[BaseModel], source: str, *, hint: str, first_row: int = 1
) -> None:
    """Validate every record; raise a GeceError naming the source, the rows and the fix.

    ``first_row`` is the 1-based row number of ``records[0]`` in the file (chunked reads).
    """
    try:
        TypeAdapter(list[model]).validate_python(records)
    except ValidationError as e:
        errs = e.errors()
        raise GeceError(
            f"{source}: {len(errs)} invalid value(s) for the {model.__name__} schema",
            problems=[fmt_error(err, row_offset=first_row) for err in errs[:20]],
            hint=hint,
        ) from e


def _file_metadata(model: type[BaseModel], meta: dict[str, str] | None) -> dict[bytes, bytes]:
    kv = {f"{META_PREFIX}schema": model.__name__, f"{META_PREFIX}schema_version": SCHEMA_VERSION}
    kv.update({f"{META_PREFIX}{k}": str(v) for k, v in (meta or {}).items()})
    return {k.encode(): v.encode() for k, v in kv.items()}


def checked_arrow(
    path: str | Path, df: pd.DataFrame, model: type[BaseModel], schema: pa.Schema, first_row: int = 1
) -> pa.Table:
    """``df`` validated row by row against ``model`` and converted to an Arrow table of ``schema``; a column the
    frame lacks whose field defaults to None (a later addition to the schema, e.g. ``ScoreRow.scored_punct_only``)
    is written as nulls."""
    fields = model.model_fields
    optional = [c for c in schema.names if c not in df.columns and c in fields and fields[c].default is None]
    if optional:
        df = df.assign(**dict.fromkeys(optional, None))
    missing = [c for c in schema.names if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: columns {missing} of the {model.__name__} schema are missing")
    df = df[schema.names]
    nullable = nullable_fields(model)
    validate_records(
        [plain_record(r, nullable) for r in df.to_dict(orient="records")],
        model,
        f"{path} (about to be written)",
        hint="this is a bug in gece",
        first_row=first_row,
    )
    return pa.Table.from_pandas(df, schema=schema.remove_metadata(), preserve_index=False)


def write_schema(df_columns: list[str], model: type[BaseModel]) -> pa.Schema:
    """``model``'s Arrow schema, plus float columns for the extra columns of a model that allows them."""
    schema = arrow_schema(model)
    extra = [c for c in df_columns if c not in schema.names]
    if extra and model.model_config.get("extra") == "allow":
        for c in extra:
            schema = schema.append(pa.field(c, pa.float64(), nullable=True))
    elif extra:
        raise ValueError(f"columns {extra} are not in the {model.__name__} schema")
    return schema


def write_table(path: str | Path, df: pd.DataFrame, model: type[BaseModel], meta: dict[str, str] | None = None) -> None:
    """Validate ``df`` row by row against ``model`` and write it as Parquet, atomically.

    ``meta`` (e.g. benchmark and model ids) is stored in the file's key-value metadata.
    Output bytes depend only on the data, so identical inputs give identical files.
    """
    schema = write_schema(list(df.columns), model)
    table = checked_arrow(path, df, model, schema).replace_schema_metadata(_file_metadata(model, meta))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


class TableWriter:
    """Write a Parquet artifact chunk by chunk (one row group per chunk), atomically.

    Memory stays bounded by one chunk. Each chunk is validated like :func:`write_table`; the
    file appears under ``path`` only when the ``with`` block ends without an exception. A
    single chunk gives the same bytes as :func:`write_table`.
    """

    def __init__(self, path: str | Path, model: type[BaseModel], meta: dict[str, str] | None = None):
        self.path, self.model, self.meta = Path(path), model, meta
        self.rows = 0
        self._schema = arrow_schema(model)
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> typing.Self:
        self._atomic = atomic_path(self.path)
        self._tmp = self._atomic.__enter__()
        self._writer = pq.ParquetWriter(
            self._tmp, self._schema.with_metadata(_file_metadata(self.model, self.meta)), compression="zstd"
        )
        return self

    def write(self, df: pd.DataFrame) -> None:
        assert self._writer is not None, "use TableWriter in a with block"
        table = checked_arrow(self.path, df, self.model, self._schema, first_row=self.rows + 1)
        self._writer.write_table(table)
        self.rows += len(df)

    def __exit__(self, et, ev, tb) -> bool:
        assert self._writer is not None
        self._writer.close()
        return bool(self._atomic.__exit__(et, ev, tb))


def nullable_fields(model: type[BaseModel]) -> set[str]:
    """The fields of ``model`` that may be null."""
    return {name for name, info in model.model_fields.items() if _arrow_type(info.annotation)[1]}


def _plain_list(v: np.ndarray) -> list:
    """A numpy array as nested lists; pandas reads a list-of-lists column as arrays of arrays."""
    return [_plain_list(x) if isinstance(x, np.ndarray) else x for x in v.tolist()]


def plain_record(record: dict, nullable: set[str]) -> dict:
    """Convert numpy scalars/arrays in a record into plain Python for validation.

    pandas stores a null as NaN: NaN becomes None in ``nullable`` columns only, so a NaN in any
    other column fails validation as what it is ("should be a finite number", not "missing").
    """
    out = {}
    for k, v in record.items():
        if isinstance(v, np.ndarray):
            v = _plain_list(v)
        elif isinstance(v, np.generic):
            v = v.item()
        if k in nullable and isinstance(v, float) and math.isnan(v):
            v = None
        out[k] = v
    return out
