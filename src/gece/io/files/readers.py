"""Reading the pipeline's files against their schemas (and the PNG figures' writer and readers).

Tabular artifacts are Parquet whose columns and Arrow types follow a pydantic model of
``gece.io.schemas.pair_rows`` (``PreparedPair``, ``ScoreRow``, ...); reports are JSON validated by a pydantic
model. Every read checks columns, types and each row, and names the file, the row and the fix when
something is wrong. The writers of tables and reports are :mod:`gece.io.files.writer`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from gece.base.errors import GeceError
from gece.io.files.inputs import require_file
from gece.io.files.limits import over_limit
from gece.io.files.outputs import atomic_path
from gece.io.files.writer import META_PREFIX, arrow_schema, checked_arrow, validate_records, write_schema

# -------------------------------------------------------------------- Parquet I/O


def check_unique_ids(path: str | Path, pair_id: Any) -> None:
    """Every ``pair_id`` (a column, in file order) must be unique; a GeceError names each repeated id and its rows.

    Counted in Arrow (a hash of the distinct ids), so a file of one id repeated millions of times costs little."""
    import numpy as np
    import pyarrow.compute as pc

    ids = (
        pair_id
        if isinstance(pair_id, pa.Array | pa.ChunkedArray)
        else pa.array(np.asarray(pair_id, dtype=object), type=pa.string())
    )
    if pc.count_distinct(ids, mode="all").as_py() == len(ids):
        return
    counts = pc.value_counts(ids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    problems = []
    for pid, n in zip(
        repeated.field("values")[:20].to_pylist(), repeated.field("counts")[:20].to_pylist(), strict=True
    ):
        rows = pc.indices_nonzero(pc.equal(ids, pa.scalar(pid, pa.string()))).to_pylist()[:10]
        problems.append(
            f"pair_id {pid!r} appears {n} times: rows {', '.join(str(r + 1) for r in rows)}"
            + (", ..." if n > 10 else "")
        )
    more = [f"... and {len(repeated) - 20} more"] if len(repeated) > 20 else []
    raise GeceError(
        f"{path}: {len(repeated)} pair_id(s) appear more than once; each pair must be scored once",
        problems=problems + more,
        hint="the file was concatenated or edited; rerun the stage that writes it (gece extract or "
        "gece reference) from the prepared benchmark",
    )


def _check_size(path: Path, pf: pq.ParquetFile, columns: list[str]) -> None:
    """A file read whole must fit the run: its rows and the uncompressed bytes of ``columns`` within
    ``gece.io.files.limits.LIMITS`` (checked from the footer, before any row is read)."""
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
    schema = write_schema(list(df.columns), model)
    return _frame(Path(source), checked_arrow(source, df, model, schema), model, schema, 1, validate=False)


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
