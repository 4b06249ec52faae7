"""Reading and writing the pipeline's files: the only code that touches them on disk.

Tabular artifacts are Parquet whose columns and Arrow types follow a pydantic model of
``gece.io.schemas`` (``PreparedPair``, ``ScoreRow``, ...); reports are JSON validated by a pydantic
model. Every write goes to a temporary file in the target directory and is renamed into place
(``gece.io.disk.atomic_path``), so a killed run never leaves a half-written artifact. Every read
checks columns, types and each row, and names the file, the row and the fix when something is
wrong.
"""

from __future__ import annotations

import json
import math
import os
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, TypeAdapter, ValidationError

from gece.errors import GeceError
from gece.io.disk import atomic_path, check_input, check_unique_ids, over_limit, parse_json, read_text, write_text

SCHEMA_VERSION = "1"
ROW_GROUP_ROWS = 2048  # rows per row group of a file written in chunks (extract's window of pairs)
META_PREFIX = "gece."


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


def require_file(path: str | Path, hint: str, size_limit: str | None = None) -> Path:
    """``path`` if it is a readable regular file (within the ``size_limit`` of ``gece.io.disk.LIMITS``),
    else a GeceError with ``hint``.

    Every reader of an input file calls this, so a file under a ``data/`` directory that does not
    exist (the DVC-tracked snapshot was never pulled) says so, instead of "file not found".
    """
    path = Path(path)
    if os.path.lexists(path):
        return check_input(path, hint, size_limit)
    absent = [d for d in Path(os.path.abspath(path)).parents if d.name == "data" and not d.exists()]
    if absent:
        raise GeceError(
            f"{path}: data/ is missing: run `dvc pull data.dvc` (or make data)",
            problems=[f"{absent[-1]} does not exist"],
            hint="the data snapshot is tracked by DVC (data.dvc), not git; `gece pull` checks "
            "the DVC remote and pulls it",
        )
    return check_input(path, hint, size_limit)


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
            problems=[_fmt_error(err) for err in e.errors()[:20]],
            hint="it was written by another gece version or edited by hand; rerun the stage that writes it",
        ) from e


# -------------------------------------------------------------------- Parquet I/O
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


def _fmt_error(err: dict, row_offset: int | None = None) -> str:
    loc = list(err.get("loc", ()))
    where = ""
    if row_offset is not None and loc and isinstance(loc[0], int):
        where = f"row {loc.pop(0) + row_offset}, "
    field = ".".join(str(x) for x in loc)
    got = err.get("input")
    got_s = "" if isinstance(got, dict) else f" (got {got!r})"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}{field + ': ' if field else ''}{msg}{got_s}"


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
            problems=[_fmt_error(err, row_offset=first_row) for err in errs[:20]],
            hint=hint,
        ) from e


def _file_metadata(model: type[BaseModel], meta: dict[str, str] | None) -> dict[bytes, bytes]:
    kv = {f"{META_PREFIX}schema": model.__name__, f"{META_PREFIX}schema_version": SCHEMA_VERSION}
    kv.update({f"{META_PREFIX}{k}": str(v) for k, v in (meta or {}).items()})
    return {k.encode(): v.encode() for k, v in kv.items()}


def _checked_arrow(
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
    nullable = _nullable(model)
    validate_records(
        [_plain_record(r, nullable) for r in df.to_dict(orient="records")],
        model,
        f"{path} (about to be written)",
        hint="this is a bug in gece",
        first_row=first_row,
    )
    return pa.Table.from_pandas(df, schema=schema.remove_metadata(), preserve_index=False)


def _write_schema(df_columns: list[str], model: type[BaseModel]) -> pa.Schema:
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
    schema = _write_schema(list(df.columns), model)
    table = _checked_arrow(path, df, model, schema).replace_schema_metadata(_file_metadata(model, meta))
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
        table = _checked_arrow(self.path, df, self.model, self._schema, first_row=self.rows + 1)
        self._writer.write_table(table)
        self.rows += len(df)

    def __exit__(self, et, ev, tb) -> bool:
        assert self._writer is not None
        self._writer.close()
        return bool(self._atomic.__exit__(et, ev, tb))


def _nullable(model: type[BaseModel]) -> set[str]:
    """The fields of ``model`` that may be null."""
    return {name for name, info in model.model_fields.items() if _arrow_type(info.annotation)[1]}


def _plain_list(v: np.ndarray) -> list:
    """A numpy array as nested lists; pandas reads a list-of-lists column as arrays of arrays."""
    return [_plain_list(x) if isinstance(x, np.ndarray) else x for x in v.tolist()]


def _plain_record(record: dict, nullable: set[str]) -> dict:
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


def _check_size(path: Path, pf: pq.ParquetFile, columns: list[str]) -> None:
    """A file read whole must fit the run: its rows and the uncompressed bytes of ``columns`` within
    ``gece.io.disk.LIMITS`` (checked from the footer, before any row is read)."""
    md = pf.metadata
    wanted = {i for i in range(md.num_columns) if md.schema.column(i).path.split(".")[0] in columns}
    size = sum(md.row_group(g).column(i).total_uncompressed_size for g in range(md.num_row_groups) for i in wanted)
    for problem in (over_limit(path, "rows", md.num_rows, "rows"), over_limit(path, "bytes", size, "parquet_bytes")):
        if problem:
            raise problem


def pair_ids(path: str | Path, limit: int | None = None) -> pa.ChunkedArray:
    """The ``pair_id`` column of a Parquet artifact (its first ``limit`` rows), read alone and kept in Arrow: a
    streamed reader checks that every pair is there once without holding the rest of the file."""
    try:
        ids = pq.ParquetFile(path).read(columns=["pair_id"]).column("pair_id")
    except (pa.ArrowException, OSError, ValueError, KeyError) as e:
        raise GeceError(f"{path}: not a readable Parquet file ({e})", hint="delete it and rerun its stage") from e
    return ids.slice(0, limit)


def _open_parquet(
    path: str | Path, model: type[BaseModel], whole: bool = True
) -> tuple[pq.ParquetFile, dict[str, str], pa.Schema]:
    """Open a Parquet artifact and check its columns and types against ``model`` (no rows read).

    ``whole``: the caller holds the whole file in memory, so its size is checked against the limits."""
    path = require_file(path, hint="run the stage that writes it (dvc repro) or dvc pull")
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as e:  # ValueError: a damaged footer's names are not UTF-8
        raise GeceError(f"{path}: not a readable Parquet file ({e})", hint="delete it and rerun its stage") from e
    meta = {  # bytes that are not UTF-8 (a damaged footer) are shown as U+FFFD, never a crash
        k.decode(errors="replace")[len(META_PREFIX) :]: v.decode(errors="replace")
        for k, v in (schema.metadata or {}).items()
        if k.decode(errors="replace").startswith(META_PREFIX)
    }
    want = arrow_schema(model)
    missing = [n for n in want.names if n not in schema.names]
    if missing:
        raise GeceError(
            f"{path}: missing column(s) {missing} of the {model.__name__} schema",
            hint="the file was written by another tool or an older gece; rerun the stage that writes it",
        )
    problems = []
    for f in want:
        typ = schema.field(f.name).type
        if typ != f.type and not _castable(typ, f.type):
            problems.append(f"column {f.name}: type {typ}, expected {f.type}")
    if problems:
        raise GeceError(f"{path}: wrong column types", problems=problems, hint="rerun the stage that writes it")
    if whole:
        _check_size(path, pf, want.names)
    return pf, meta, want


def _family(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{_family(t.value_type)}>"
    return str(t)


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Compatible encodings (large_string, nullable ints stored as double) are cast safely on read;
    text is never parsed as a number."""
    return src == dst or (pa.types.is_null(src) or _family(src) == _family(dst))


def _decodes(column: pa.ChunkedArray) -> bool:
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return False
    return True


def _frame(
    path: Path, table: pa.Table, model: type[BaseModel], want: pa.Schema, first_row: int, validate: bool = True
) -> pd.DataFrame:
    """An Arrow chunk cast to the schema's types, as a frame validated row by row (unless ``validate`` is False:
    its rows were validated before they became Arrow)."""
    for f in want:
        col = table.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type, safe=True)
            except pa.ArrowException as e:  # e.g. 1.5 in an int column
                raise GeceError(
                    f"{path}: column {f.name} has values that are not {f.type} ({e})",
                    hint="rerun the stage that writes it",
                ) from e
            table = table.set_column(table.schema.get_field_index(f.name), f.name, col)
    if validate:  # validated from Arrow, where a null (None) and a NaN (an error) are told apart
        try:
            records = table.select(want.names).to_pylist()
        except UnicodeDecodeError as e:  # a damaged data page: Parquet text must be UTF-8
            bad = [n for n in want.names if not _decodes(table.column(n))]
            raise GeceError(
                f"{path}: column(s) {', '.join(bad) or '?'} hold text that is not UTF-8 ({e.reason})",
                hint="the file is damaged; delete it and rerun its stage",
            ) from e
        validate_records(
            records,
            model,
            str(path),
            hint="the file is corrupt or was edited; rerun the stage that writes it",
            first_row=first_row,
        )
    try:
        df = table.to_pandas()
    except (ValueError, KeyError, TypeError):  # damaged pandas metadata in the footer: the columns are valid
        df = table.replace_schema_metadata(None).to_pandas()
    if model.model_config.get("extra") != "allow":
        df = df[want.names]
    return df


def _read_all(pf: pq.ParquetFile, path: Path, columns: list[str] | None) -> pa.Table:
    try:
        return pf.read(columns=columns)
    except (pa.ArrowException, OSError, ValueError) as e:  # a damaged column chunk (truncated file)
        raise GeceError(f"{path}: not a readable Parquet file ({e})", hint="delete it and rerun its stage") from e


def as_table(df: pd.DataFrame, model: type[BaseModel], source: str | Path) -> pd.DataFrame:
    """``df`` as writing it with :func:`write_table` and reading it back gives it: every row validated,
    the columns in ``model``'s order and of its file types (scores made in memory, e.g. from a CSV,
    equal those read from a file, bit for bit). The rows are validated once, as :func:`write_table` does; the
    Arrow table made of them holds the same values, so they are not validated again as a read would."""
    schema = _write_schema(list(df.columns), model)
    return _frame(Path(source), _checked_arrow(source, df, model, schema), model, schema, 1, validate=False)


def read_table(path: str | Path, model: type[BaseModel]) -> tuple[pd.DataFrame, dict[str, str]]:
    """Read and validate a Parquet artifact; return the frame and its ``gece.*`` metadata."""
    path = Path(path)
    pf, meta, want = _open_parquet(path, model)
    columns = None if model.model_config.get("extra") == "allow" else want.names
    df = _frame(path, _read_all(pf, path, columns), model, want, 1)
    if "pair_id" in df.columns and getattr(model, "one_row_per_pair", True):
        check_unique_ids(path, df["pair_id"])
    return df, meta


def parquet_rows(path: str | Path, model: type[BaseModel], whole: bool = True) -> tuple[int, dict[str, str]]:
    """Number of rows and ``gece.*`` metadata of a Parquet artifact, with its schema (and, when it
    is to be read ``whole``, its size) checked."""
    pf, meta, _ = _open_parquet(path, model, whole)
    return pf.metadata.num_rows, meta


def iter_table(path: str | Path, model: type[BaseModel], rows: int, limit: int | None = None) -> Iterator[pd.DataFrame]:
    """Read and validate a Parquet artifact ``rows`` rows at a time (the first ``limit`` rows, if given).

    Memory is bounded by one chunk, whatever the file's size; a bad row is reported with its
    row number in the file.
    """
    path = Path(path)
    pf, _, want = _open_parquet(path, model, whole=False)
    columns = None if model.model_config.get("extra") == "allow" else want.names
    done = 0
    try:
        for batch in pf.iter_batches(batch_size=rows, columns=columns):
            if limit is not None and done >= limit:
                return
            table = pa.Table.from_batches([batch])
            if limit is not None and done + len(table) > limit:
                table = table.slice(0, limit - done)
            yield _frame(path, table, model, want, done + 1)
            done += len(table)
    except (pa.ArrowException, OSError) as e:
        raise GeceError(f"{path}: not a readable Parquet file ({e})", hint="delete it and rerun its stage") from e


def write_figure(path: str | Path, fig: Any, dpi: int = 110, text: dict[str, str] | None = None) -> None:
    """Save a matplotlib figure as PNG atomically (no timestamp metadata: same data, same bytes);
    ``text``: extra PNG text chunks (see :func:`png_text`)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, metadata={"Software": None, **(text or {})})


def png_text(path: str | Path) -> dict[str, str]:
    """The tEXt chunks of a PNG written by :func:`write_figure` (read up to the image data);
    {} when the file is missing or not a PNG."""
    import struct

    out: dict[str, str] = {}
    try:
        with open(path, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                return {}
            while head := f.read(8):
                if len(head) < 8:
                    break
                length, kind = struct.unpack(">I4s", head)
                if kind in (b"IDAT", b"IEND"):
                    break
                body = f.read(length)
                f.seek(4, os.SEEK_CUR)  # CRC
                if kind == b"tEXt" and b"\0" in body:
                    key, value = body.split(b"\0", 1)
                    out[key.decode("latin-1")] = value.decode("latin-1")
    except OSError:
        return {}
    return out


def png_size(path: str | Path) -> tuple[int, int] | None:
    """(width, height) in pixels of a PNG, from its header; None when it is not one."""
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])
