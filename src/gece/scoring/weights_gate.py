"""The one gate for model files: every weights file a model names is checked before anything is loaded.

A model directory names its weights in three ways, and each is followed (:func:`weight_files`):
``config.json``'s ``transformers_weights`` (a file transformers then loads, ``adapter_model.bin`` included),
``model.safetensors``, and ``model.safetensors.index.json``'s ``weight_map``; every other ``*.safetensors`` in the
folder is checked too (gece hashes them into the score file's meta). Each of them must be

- **safetensors**: not a pickle under any name (``.bin``, ``.pt``, ``.pth``, ``.pkl``, ``.ckpt``, or a file an
  index maps a tensor to that is not ``.safetensors``; a ``torch.save`` file or a raw pickle named
  ``.safetensors`` is recognised by its first bytes): E-MODEL-PICKLE, since unpickling can run any code;
- **whole and in bounds** (:func:`read_safetensors`): the 8-byte header length within the file and at most
  :data:`MAX_HEADER_BYTES` (safetensors' own cap), the header a JSON object of tensors with a known dtype, a
  shape of whole numbers and ``data_offsets`` that tile the data exactly (no hole, no overlap, each extent
  equal to dtype x shape, the last ending where the file ends: a truncated download is refused):
  E-MODEL-WEIGHTS.

A GGUF (:func:`read_gguf`) must start with ``GGUF`` and a version gguf reads (2 or 3); its tensor and metadata
counts are bounded by :data:`MAX_COUNT` and by what the file's bytes could hold before anything is allocated
(a header claiming 2^40 tensors is refused at once), every string, array and tensor info lies within the file,
and every tensor's data (its quantization's block size x its shape) lies within the file: E-MODEL-WEIGHTS.

The config files gece reads (:func:`read_config`: ``config.json``, ``tokenizer_config.json``) are regular files
of at most ``GECE_MAX_JSON_BYTES``, UTF-8 JSON objects, and the fields gece (and the loader it hands them to)
reads have their types (:data:`CONFIG_FIELDS`): a wrong type is E-MODEL-CONFIG naming the file and the field.

Only headers are read: the cost is a few milliseconds per file (about 0.1 s for a GGUF with a 262,144-word
vocabulary), and the parsed headers are what :mod:`gece.scoring.memory` counts (one reader).
"""

from __future__ import annotations

import json
import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gece.base.errors import GeceError
from gece.io.files import limits
from gece.io.files.outputs import node_kind

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
SAFE_HINT = (
    "gece loads safetensors only (or a GGUF): pickle-based weights can run code when loaded; convert "
    "them with model.save_pretrained(dir, safe_serialization=True)"
)
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit on its JSON header
MAX_COUNT = 1 << 20  # tensors, metadata keys or array items a GGUF may claim (the largest real ones: a few thousand)
MAX_ITEMS = 1 << 23  # GGUF metadata strings and arrays in all (gemma-3's 262,144-word vocabulary: 0.26 million)
MAX_ARRAY_DEPTH = 4  # GGUF arrays of arrays
MAX_DIMS = 4  # GGML_MAX_DIMS
GGUF_VERSIONS = (2, 3)
GGUF_ALIGNMENT = 32  # general.alignment's default
# bits per value of each safetensors dtype (the safetensors format's list)
SAFETENSORS_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64,
    "C64": 64,
}  # fmt: skip
FLOAT_DTYPES = ("F64", "F32", "BF16", "F16")  # the values a CPU model keeps in its load dtype
INDEX = "model.safetensors.index.json"
REDOWNLOAD = "download or save the model again (an interrupted download leaves a truncated file)"


# ------------------------------------------------------------------------ headers
@dataclass(frozen=True)
class Tensor:
    """One tensor of a weights file's header: its dtype (or GGUF type name), shape and byte extent in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute offset in the file
    nbytes: int

    @property
    def values(self) -> int:
        """The number of values (the product of the shape)."""
        count = 1
        for d in self.shape:
            count *= d
        return count


@dataclass(frozen=True)
class WeightsHeader:
    """A checked weights file: its kind (``safetensors`` or ``gguf``), size, tensors and, for a GGUF, its
    ``general.architecture``."""

    path: Path
    kind: str
    size: int
    tensors: tuple[Tensor, ...]
    architecture: str | None = None

    def counts(self) -> tuple[int, int]:
        """(floating-point values, bytes of the other tensors as stored); a GGUF's tensors all dequantize to
        floating-point values."""
        if self.kind == "gguf":
            return sum(t.values for t in self.tensors), 0
        values = sum(t.values for t in self.tensors if t.dtype in FLOAT_DTYPES)
        return values, sum(t.nbytes for t in self.tensors if t.dtype not in FLOAT_DTYPES)


class _Bad(Exception):
    """A header that breaks a bound; the message says which (turned into a GeceError naming the file)."""


def _weights_error(path: Path, source: str, why: str, hint: str = REDOWNLOAD) -> GeceError:
    return GeceError(f"model source {source}: {path} is not a valid weights file: {why}", hint=hint)


def _pickle_error(path: Path, source: str, why: str) -> GeceError:
    return GeceError(f"model source {source}: {path}: {why}: pickle-based weights are refused", hint=SAFE_HINT)


def looks_pickled(head: bytes) -> str | None:
    """What the first bytes of a file say it is when it is a pickle: a ``torch.save`` zip archive or a raw pickle
    (protocol 2-5); None otherwise."""
    if head.startswith(b"PK\x03\x04"):
        return "a torch.save (zip) archive"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return f"a pickle (protocol {head[1]})"
    return None


def _open_regular(path: Path, source: str) -> int:
    """The size of ``path``, a readable regular file (no FIFO, device, directory or dangling link)."""
    limits.check_input(path, hint=f"model source {source}: restore {path.name} ({REDOWNLOAD})")
    return path.stat().st_size


def _not_safetensors_hint(head: bytes) -> str:
    if head.startswith(b"version "):
        return "this is a git-lfs pointer, not the weights: run git lfs pull in the model's repository"
    return REDOWNLOAD


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise _Bad(f"key {next(k for k in keys if keys.count(k) > 1)!r} appears twice")
    return dict(pairs)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _safetensors_tensor(name: str, entry: Any, base: int) -> Tensor:
    """One header entry checked: a known dtype, a shape of whole numbers, offsets whose extent is dtype x shape."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise _Bad(f"tensor {name!r}: an entry must hold exactly dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in SAFETENSORS_BITS:
        raise _Bad(f"tensor {name!r}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_whole(d) for d in shape):
        raise _Bad(f"tensor {name!r}: shape {shape!r} is not a list of whole numbers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o) for o in offsets)):
        raise _Bad(f"tensor {name!r}: data_offsets {offsets!r} is not a pair of whole numbers")
    begin, end = offsets
    tensor = Tensor(name, dtype, tuple(shape), base + begin, end - begin)
    bits = tensor.values * SAFETENSORS_BITS[dtype]
    if end < begin or bits % 8 or bits // 8 != end - begin:
        raise _Bad(
            f"tensor {name!r}: data_offsets {offsets} span {end - begin:,} bytes, but {dtype} x {list(shape)} "
            f"takes {bits / 8:,.0f}"
        )
    return tensor


def _tile(tensors: list[Tensor], base: int, size: int) -> None:
    """The tensors' extents tile the data from ``base`` to ``size`` exactly (as safetensors itself requires)."""
    at = base
    for t in sorted(tensors, key=lambda t: (t.start, t.nbytes)):
        if t.start != at:
            raise _Bad(f"tensor {t.name!r} starts at data byte {t.start - base:,}, not {at - base:,} (hole or overlap)")
        at += t.nbytes
    if at > size:
        raise _Bad(
            f"the header describes {at - base:,} bytes of tensor data and the file holds {size - base:,}: the file "
            "is truncated"
        )
    if at < size:
        raise _Bad(f"{size - at:,} bytes after the last tensor's data")


def parse_safetensors(path: Path, source: str = "") -> WeightsHeader:
    """:func:`read_safetensors` without the regular-file check (the file is opened as given)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if kind := looks_pickled(head):
            raise _pickle_error(path, source, f"{kind} named .safetensors")
        if len(head) < 8:
            raise _weights_error(path, source, f"{size} bytes, shorter than a safetensors header's 8-byte length")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES or 8 + n > size:
            beyond = (
                f"safetensors' limit of {MAX_HEADER_BYTES:,} bytes"
                if n > MAX_HEADER_BYTES
                else f"the end of the file ({size:,} bytes)"
            )
            why = f"its first 8 bytes give a header of {n:,} bytes, beyond {beyond}: not safetensors, or cut short"
            raise _weights_error(path, source, why, _not_safetensors_hint(head))
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
        if not isinstance(header, dict):
            raise _Bad("the header is not a JSON object")
        meta = header.pop("__metadata__", {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise _Bad("__metadata__ is not an object of strings")
        tensors = [_safetensors_tensor(name, entry, 8 + n) for name, entry in header.items()]
        _tile(tensors, 8 + n, size)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _weights_error(path, source, f"its header is not valid JSON ({str(e)[:200]})") from None
    except _Bad as e:
        raise _weights_error(path, source, str(e)) from None
    return WeightsHeader(path, "safetensors", size, tuple(tensors))


def read_safetensors(path: Path, source: str = "") -> WeightsHeader:
    """The checked header of a safetensors file (module docstring); a GeceError naming the file otherwise:
    E-MODEL-PICKLE for a pickle under this name, E-MODEL-WEIGHTS for a header out of bounds or a truncated file."""
    _open_regular(path, source)
    return parse_safetensors(path, source)


# --------------------------------------------------------------------------- GGUF
_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes
_STRING, _ARRAY = 8, 9


class _Cursor:
    """Bounded reads over a GGUF's bytes: every read past the end is a :class:`_Bad`, never an allocation."""

    def __init__(self, data: Any, size: int):
        self.data, self.size, self.at, self.items = data, size, 0, 0

    def take(self, n: int, what: str) -> int:
        """Advance over ``n`` bytes (of ``what``), returning where they start."""
        if n > self.size - self.at:
            raise _Bad(f"{what} at byte {self.at:,} needs {n:,} bytes, past the end of the file ({self.size:,} bytes)")
        start, self.at = self.at, self.at + n
        return start

    def u32(self, what: str) -> int:
        return struct.unpack_from("<I", self.data, self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack_from("<Q", self.data, self.take(8, what))[0]

    def count(self, what: str, each: int) -> int:
        """A count (u64) of items of at least ``each`` bytes, bounded by :data:`MAX_COUNT` and the bytes left."""
        n = self.u64(what)
        if n > MAX_COUNT or n * each > self.size - self.at:
            raise _Bad(
                f"it claims {n:,} {what}, more than the {self.size - self.at:,} bytes left could describe "
                f"(at most {MAX_COUNT:,} are read)"
            )
        return n

    def string(self, what: str) -> bytes:
        n = self.u64(f"the length of {what}")
        return bytes(self.data[self.take(n, what) : self.at])

    def skip_value(self, vtype: int, what: str, depth: int = 0) -> None:
        """Move past one metadata value of GGUF type ``vtype``."""
        if vtype in _SCALARS:
            self.take(_SCALARS[vtype], what)
        elif vtype == _STRING:
            self.take(self.u64(f"the length of {what}"), what)
        elif vtype == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise _Bad(f"{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}")
            item = self.u32(f"the item type of {what}")
            n = self.count(f"items in {what}", _SCALARS.get(item, 8))
            if item in _SCALARS:
                self.take(n * _SCALARS[item], what)
            else:
                self.items += n
                if self.items > MAX_ITEMS:
                    raise _Bad(f"{what}: more than {MAX_ITEMS:,} strings and arrays in its metadata")
                for _ in range(n):
                    self.skip_value(item, what, depth + 1)
        else:
            raise _Bad(f"{what}: unknown value type {vtype}")


def _gguf_tensor(cur: _Cursor, quant: dict[int, tuple[str, int, int]]) -> tuple[str, str, tuple[int, ...], int, int]:
    """One tensor info: (name, type, shape, offset in the data, bytes)."""
    name = cur.string("a tensor name").decode("utf-8", "replace")
    n_dims = cur.u32(f"tensor {name!r}'s number of dimensions")
    if n_dims > MAX_DIMS:
        raise _Bad(f"tensor {name!r} has {n_dims:,} dimensions (at most {MAX_DIMS})")
    dims = tuple(cur.u64(f"tensor {name!r}'s shape") for _ in range(n_dims))
    qtype = cur.u32(f"tensor {name!r}'s type")
    offset = cur.u64(f"tensor {name!r}'s offset")
    if qtype not in quant:
        raise _Bad(f"tensor {name!r}: unknown type {qtype}")
    type_name, block, type_size = quant[qtype]
    values = 1
    for d in dims:
        values *= d
    if dims and dims[0] % block:
        raise _Bad(f"tensor {name!r}: {dims[0]:,} values per row is not a multiple of {type_name}'s block of {block}")
    return name, type_name, dims[::-1], offset, values // block * type_size


def _quant_sizes() -> dict[int, tuple[str, int, int]]:
    """GGML type id -> (name, values per block, bytes per block), from the gguf package."""
    from gguf.constants import GGML_QUANT_SIZES

    return {int(t): (t.name, block, size) for t, (block, size) in GGML_QUANT_SIZES.items()}


def _parse_gguf(data: Any, size: int) -> tuple[int, list[tuple[str, str, tuple[int, ...], int, int]], str]:
    """(data start, tensor infos, architecture) of a GGUF's bytes, every read bounded."""
    cur = _Cursor(data, size)
    if size < 4 or bytes(data[:4]) != b"GGUF":
        raise _Bad(f"it does not start with GGUF's magic bytes (it starts with {bytes(data[:8])!r})")
    cur.take(4, "the magic")
    version = cur.u32("the version")
    if version not in GGUF_VERSIONS:
        raise _Bad(f"GGUF version {version} (gece reads versions {', '.join(map(str, GGUF_VERSIONS))})")
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.count("metadata keys", 8 + 4 + 1)
    if n_tensors > MAX_COUNT or n_tensors * 24 > size:
        raise _Bad(f"it claims {n_tensors:,} tensors, more than its {size:,} bytes hold (at most {MAX_COUNT:,})")
    arch, alignment, keys = None, GGUF_ALIGNMENT, set()
    for _ in range(n_kv):
        key = cur.string("a metadata key").decode("utf-8", "replace")
        if key in keys:
            raise _Bad(f"metadata key {key!r} appears twice")
        keys.add(key)
        vtype = cur.u32(f"the type of {key!r}")
        start = cur.at
        cur.skip_value(vtype, repr(key))
        if key == "general.architecture" and vtype == _STRING:
            arch = bytes(data[start + 8 : cur.at]).decode("utf-8", "replace")
        elif key == "general.alignment" and vtype == 4:
            alignment = struct.unpack_from("<I", data, start)[0]
    if alignment < 1 or alignment & (alignment - 1):
        raise _Bad(f"general.alignment {alignment} is not a power of two")
    if arch is None:
        raise _Bad("no general.architecture string in its metadata")
    quant = _quant_sizes()
    tensors = [_gguf_tensor(cur, quant) for _ in range(n_tensors)]
    start = -(-cur.at // alignment) * alignment
    return start, tensors, arch


def _mapped(f: Any, size: int) -> Any:
    """The file memory-mapped read-only (an empty view for an empty file, which mmap refuses)."""
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else memoryview(b"")


def parse_gguf(path: Path, source: str = "") -> WeightsHeader:
    """:func:`read_gguf` without the regular-file check."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f, _mapped(f, size) as data:
            data_start, infos, arch = _parse_gguf(data, size)
        names, tensors = set(), []
        for name, qtype, shape, offset, nbytes in infos:
            if name in names:
                raise _Bad(f"tensor {name!r} appears twice")
            names.add(name)
            if data_start + offset + nbytes > size:
                raise _Bad(
                    f"tensor {name!r} ({qtype} {list(shape)}) ends at byte {data_start + offset + nbytes:,}, beyond "
                    f"the end of the file ({size:,} bytes): the file is truncated"
                )
            tensors.append(Tensor(name, qtype, shape, data_start + offset, nbytes))
    except _Bad as e:
        with open(path, "rb") as f:
            hint = REDOWNLOAD if f.read(4) == b"GGUF" else "pass a GGUF file (llama.cpp's format)"
        raise _weights_error(path, source, f"not a readable GGUF: {e}", hint) from None
    return WeightsHeader(path, "gguf", size, tuple(tensors), arch)


def read_gguf(path: Path, source: str = "") -> WeightsHeader:
    """The checked header of a GGUF (module docstring): its tensors and ``general.architecture``; a GeceError
    (E-MODEL-WEIGHTS) naming the file and the bound it breaks otherwise. Only the header is read."""
    _open_regular(path, source)
    with open(path, "rb") as f:
        if kind := looks_pickled(f.read(8)):
            raise _pickle_error(path, source, f"{kind} named .gguf")
    return parse_gguf(path, source)


# ------------------------------------------------------------------------- configs
# field -> (JSON types allowed, what it should be); None (null) is allowed for each
CONFIG_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "auto_map": ((dict,), 'an object such as {"AutoModelForCausalLM": "module.Class"}'),
    "architectures": ((list,), 'a list of class names such as ["LlamaForCausalLM"]'),
    "model_type": ((str,), 'a string such as "llama"'),
    "dtype": ((str,), 'a string such as "bfloat16"'),
    "torch_dtype": ((str,), 'a string such as "bfloat16"'),
    "vocab_size": ((int,), "a whole number of 1 or more"),
    "max_position_embeddings": ((int,), "a whole number of 1 or more"),
    "transformers_weights": ((str,), 'a file name such as "model.safetensors"'),
    "text_config": ((dict,), "an object (the text model's config)"),
}
TOKENIZER_FIELDS = {"auto_map": ((dict, list), 'an object such as {"AutoTokenizer": ["module.Class", null]}')}


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}[
        type(value)
    ]


def _class_names(value: Any) -> bool:
    """An ``auto_map`` entry: a class name, or a list of names and nulls (a tokenizer's slow and fast classes)."""
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(x, str | None) for x in value))


def _field_problem(key: str, value: Any, types: tuple[type, ...]) -> str | None:
    """Why ``value`` is not of ``types`` (a boolean is no number, a count is 1 or more), or None."""
    if value is None:
        return None
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        return f"got {_type_name(value)} ({json.dumps(value)[:60]})"
    if isinstance(value, int) and value < 1:
        return f"got {value}"
    if key == "architectures" and not all(isinstance(v, str) for v in value):
        return "an item is not a string"
    if key == "auto_map" and isinstance(value, dict):
        bad = [k for k, v in value.items() if not _class_names(v)]
        if bad:
            return f"{bad[0]!r} is not a class name or a list of them"
    return None


Fields = dict[str, tuple[tuple[type, ...], str]]


def check_config_fields(path: Path, config: dict, fields: Fields, prefix: str = "") -> None:
    """Each field of ``fields`` present in ``config`` has its type; a GeceError (E-MODEL-CONFIG) names the file,
    the field and what it should be."""
    for key, (types, what) in fields.items():
        if key in config and (why := _field_problem(key, config[key], types)):
            raise GeceError(
                f"{path}: field {prefix}{key} must be {what}, {why}",
                hint=f"fix {prefix}{key} in {path.name} (save_pretrained writes it), or remove the field",
            )
    if isinstance(config.get("text_config"), dict) and not prefix:
        nested = {k: v for k, v in fields.items() if k not in ("text_config", "auto_map", "transformers_weights")}
        check_config_fields(path, config["text_config"], nested, "text_config.")


def read_json_object(path: Path, source: str, what: str = "config") -> dict:
    """A model's JSON file: a regular UTF-8 file within ``GECE_MAX_JSON_BYTES`` holding a JSON object, each key
    once; a GeceError naming the file otherwise."""
    hint = f"restore {path.name} in the model directory (save_pretrained writes it)"
    limits.check_input(path, hint=f"model source {source}: {hint}", size_limit="json_bytes")
    try:
        value = json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError, _Bad) as e:
        raise GeceError(f"model source {source}: {path} is not valid JSON ({str(e)[:200]})", hint=hint) from None
    if not isinstance(value, dict):
        raise GeceError(f"model source {source}: {path} is not a JSON object ({what})", hint=hint)
    return value


def read_config(path: Path, source: str = "") -> dict:
    """``config.json`` or ``tokenizer_config.json`` read by :func:`read_json_object` with its fields typed
    (:data:`CONFIG_FIELDS`, :data:`TOKENIZER_FIELDS`)."""
    config = read_json_object(path, source)
    check_config_fields(path, config, TOKENIZER_FIELDS if path.name == "tokenizer_config.json" else CONFIG_FIELDS)
    return config


# ---------------------------------------------------------------- a model directory
def _inside(name: str) -> bool:
    """A relative name that stays inside the directory it is joined to (no absolute path, no ``..``)."""
    parts = name.replace("\\", "/").split("/")
    return bool(name) and "\0" not in name and not os.path.isabs(name) and ".." not in parts and "" not in parts


def _exists(path: Path) -> bool:
    """Whether ``path`` exists (a name too long or otherwise unreadable counts as missing, as it cannot be read)."""
    try:
        path.stat()
    except (OSError, ValueError):
        return False
    return True


def _index_files(directory: Path, source: str) -> dict[str, list[str]]:
    """The files ``model.safetensors.index.json`` maps tensors to -> those tensors."""
    path = directory / INDEX
    index = read_json_object(path, source, "a safetensors index")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise GeceError(
            f"model source {source}: {path}: weight_map must be an object of tensor name -> file name",
            hint="restore the index (save_pretrained writes it)",
        )
    files: dict[str, list[str]] = {}
    for tensor, name in weight_map.items():
        files.setdefault(name, []).append(tensor)
    return files


def _refuse_named(directory: Path, name: str, by: str, source: str, tensors: list[str] = ()) -> None:
    """A weights file named by ``by`` must stay in the directory and be a safetensors file by name."""
    more = f" and {len(tensors) - 1:,} more" if len(tensors) > 1 else ""
    mapped = f" (tensor {tensors[0]!r}{more})" if tensors else ""
    if not _inside(name):
        raise GeceError(
            f"model source {source}: {by} names {name!r}{mapped}, a path outside the model directory",
            hint=f"restore {by} in {directory}: it names files of the directory itself",
        )
    if not name.endswith(".safetensors"):
        kind = "a pickle-based file" if name.lower().endswith(PICKLE_SUFFIXES) else "not a safetensors file"
        raise GeceError(
            f"model source {source}: {by} maps weights{mapped} to {name}, {kind}: pickle-based weights are refused",
            hint=SAFE_HINT,
        )


def weight_files(directory: Path, source: str, config: dict) -> dict[str, Path]:
    """Every weights file a model directory names (name as given -> path): ``config.json``'s
    ``transformers_weights``, ``model.safetensors``, the files of ``model.safetensors.index.json`` and every other
    ``*.safetensors`` of the folder, each checked by name (inside the directory, ``.safetensors``: a pickle is
    refused, E-MODEL-PICKLE) and to exist."""
    named: dict[str, str] = {}
    explicit = config.get("transformers_weights")
    if explicit is not None and explicit != INDEX:
        if explicit.endswith(".safetensors.index.json"):
            raise GeceError(
                f"model source {source}: config.json's transformers_weights names the index {explicit!r}",
                hint=f"gece reads the index {INDEX} only: rename it, or remove transformers_weights from config.json",
            )
        _refuse_named(directory, explicit, "config.json's transformers_weights", source)
        named[explicit] = "config.json's transformers_weights"
    if (directory / INDEX).exists():
        for name, tensors in _index_files(directory, source).items():
            _refuse_named(directory, name, INDEX, source, tensors)
            named.setdefault(name, INDEX)
    for p in sorted(directory.glob("*.safetensors")):
        named.setdefault(p.name, "the folder")
    if not named:
        pickled = sorted(p.name for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES)
        raise GeceError(
            f"model source {source}: no safetensors weights in {directory}"
            + (f" (only pickled {', '.join(pickled)}: pickle-based weights are refused)" if pickled else ""),
            hint=SAFE_HINT,
        )
    for name, by in named.items():
        if not _exists(directory / name):
            raise GeceError(
                f"model source {source}: {by} names {name}, which is not in {directory}",
                hint="download the missing file, or restore the model directory",
            )
    return {name: directory / name for name in named}


def check_entries(directory: Path, source: str) -> None:
    """No entry of a model directory is a FIFO, socket or device (the loaders read its files by name: reading one
    would hang or never end); symlinks are followed, as the loaders follow them."""
    for entry in sorted(directory.iterdir()):
        try:
            mode = entry.stat().st_mode
        except OSError:
            continue  # a dangling link: its reader says the file is missing
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise GeceError(
                f"model source {source}: {entry} is {node_kind(mode)}, not a file",
                hint="a model directory holds regular files (save_pretrained writes them); remove it",
            )


def check_directory(directory: Path, source: str = "") -> tuple[WeightsHeader, ...]:
    """The checked headers of every weights file a model directory names (:func:`weight_files`), ``config.json``
    typed (:func:`read_config`), no entry a FIFO or device (:func:`check_entries`); every tensor the index maps to
    a file must be in that file's header."""
    check_entries(directory, source)
    config = read_config(directory / "config.json", source)
    files = weight_files(directory, source, config)
    headers = {name: read_safetensors(path, source) for name, path in files.items()}
    if (directory / INDEX).exists():
        for name, tensors in _index_files(directory, source).items():
            missing = sorted(set(tensors) - {t.name for t in headers[name].tensors})
            if missing:
                raise _weights_error(
                    files[name],
                    source,
                    f"{INDEX} maps {len(missing):,} tensor(s) to it that its header does not hold ({missing[0]!r})",
                    "restore the index and its files from one download",
                )
    return tuple(headers.values())
