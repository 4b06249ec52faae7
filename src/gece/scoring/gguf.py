"""A GGUF converted, once, into a plain transformers directory (float32 safetensors and the tokenizer).

transformers dequantizes a GGUF on every load (20-50 s on two CPU cores for the default models, mostly the
tokenizer's conversion), so :func:`converted_dir` converts it once into ``<models>/<gguf sha256>/`` (gece's
cache, :func:`gece.scoring.models.converted_dir`) and later loads read that directory in a second or two. The
cache is keyed by the GGUF's sha256, the transformers version and :data:`CACHE_FORMAT`
(``gece-model.json``), so it never serves weights other than the file named there.

**Method (streamed).** The config and the tokenizer are read from the GGUF's metadata (``AutoConfig`` and
``AutoTokenizer`` with ``gguf_file``, no weight read); the tokenizer is saved, reloaded and checked to give the
same ids, and freed. The model is built on the meta device (no memory) only to name its parameters. Then the
GGUF, memory-mapped by ``gguf.GGUFReader``, is read one tensor at a time: dequantized to float32 by
``gguf.quants.dequantize`` (in blocks of rows, into one array), passed through transformers' own
per-architecture tensor processor (Llama's q/k reverse permutation, Gemma's ``norm - 1``, ...) and renamed by
transformers' own GGUF name map (``transformers.modeling_gguf_pytorch_utils``: ``TENSOR_PROCESSORS``,
``get_gguf_hf_weights_map``), which is exactly what ``from_pretrained(gguf_file=...)`` does for these
architectures, in the same order of operations, so the values are the same bits. The tensors go into
safetensors shards of at most :data:`SHARD_BYTES` (a larger tensor gets a shard of its own), each written as
soon as it is full (``model.safetensors``, or ``model-0000i-of-0000n.safetensors`` and
``model.safetensors.index.json``). Tied weights (the LM head of SmolLM2 and Gemma 3) are not written, as
``save_pretrained`` leaves them out, and are tied again when the directory is loaded.

**Self-check.** The directory is loaded the way gece loads it (``from_pretrained``, float32) and must report no
missing, unexpected or mismatched key; then every tensor of its state dict must have the sha256 (of its bytes)
recorded when that tensor was dequantized, or share its storage with one that has (a tied weight). So each
weight of the model gece will score equals, bit for bit, the GGUF's tensor as transformers dequantizes and
processes it, and no parameter is left at its random initialization. It costs one float32 copy of the
weights, what scoring the model needs anyway, instead of keeping a GGUF-loaded model as a reference (the
former check compared logits with one, which took two more copies).

**Memory.** Peak RSS of the conversion alone, measured with ``/usr/bin/time -v`` in a process of its own (two
CPU cores, transformers 5.25), against the target of 1.3 x the float32 size + 1 GB:

=====================  ===============  =====================  ==========  =========
GGUF                   float32 weights  former (whole model)   streamed    target
=====================  ===============  =====================  ==========  =========
SmolLM2-135M Q4_1      0.54 GB          1.64 GB                1.02 GB     1.70 GB
gemma-3-270m Q4_K_M    1.07 GB          3.44 GB                1.49 GB     2.39 GB
=====================  ===============  =====================  ==========  =========

The streamed conversion holds at most one shard and the tensor being dequantized while it writes (gemma-3's
embedding, 0.67 GB, is a shard of its own), and the loaded model during the self-check: about one float32
copy of the weights plus the runtime (:data:`gece.scoring.memory.GGUF_CONVERSION_COPIES`). Two things kept it
there: ``gguf.GGUFReader`` parses the metadata into objects (0.7 GB for gemma-3's 262k-token vocabulary),
dropped once the architecture is read, and the pages of the mapped file read so far are dropped after each
tensor, as is the heap each phase leaves (``malloc_trim``).

Architectures that transformers 5 reads with its newer GGUF loader (``transformers.integrations.gguf``:
qwen3.5, lfm2), whose name maps and dequantization differ from the above, are converted as before: the
GGUF-loaded model's state dict is saved and the logits compared on a probe, at about three float32 copies
(:data:`gece.scoring.memory.GGUF_WHOLE_CONVERSION_COPIES`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gece.base.errors import GeceError
from gece.scoring import heap

CACHE_FORMAT = "2"  # bump when the converted-model layout changes (2: sharded safetensors, streamed)
SHARD_BYTES = 512 * 2**20  # the largest safetensors shard written (a tensor larger than this gets its own)
DEQUANT_ROWS_BYTES = 64 * 2**20  # float32 output dequantized at once (gguf.quants holds it twice)
PROBE = "The nurse said that he would be late, and then she left."  # a converted model's logits are checked on it
TOKENIZER_CHECK = (PROBE, "Hello, world! 123 naïve café — «quotes»\n\tindented  spaces", "日本語のテキスト")


def header(path: Path) -> tuple[int, str]:
    """The number of values a GGUF's tensors dequantize to and its ``general.architecture``, from its header as the
    gate checks it (:func:`gece.scoring.weights_gate.read_gguf`: bounded, no tensor read, no metadata array
    parsed into objects; gguf's ``GGUFReader`` took 13 s and 0.87 GB for gemma-3-270m's 262,144-word vocabulary)."""
    from gece.scoring import weights_gate

    checked = weights_gate.read_gguf(path)
    return checked.counts()[0], str(checked.architecture)


def architecture(path: Path) -> str:
    """The GGUF's ``general.architecture``, from transformers' reader, which leaves the vocabulary's arrays
    unparsed (:func:`header` reads the same key and the element counts, at a cost)."""
    from transformers.integrations.gguf.reader import read_gguf_metadata

    metadata, _ = read_gguf_metadata(str(path))
    return str(metadata["general.architecture"])


def streamed(arch: str) -> bool:
    """Whether transformers reads this architecture with its legacy GGUF loader (``load_gguf_checkpoint``),
    the one the streamed conversion reproduces; the others are converted whole."""
    from transformers.integrations.gguf.utils import is_gguf_arch_supported

    return not is_gguf_arch_supported(arch)


def _converted_ok(path: Path, sha: str) -> bool:
    import transformers

    try:
        info = json.loads((path / "gece-model.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        info.get("gguf_sha256") == sha
        and info.get("transformers") == transformers.__version__
        and info.get("format") == CACHE_FORMAT
    )


def _cannot(gguf: Path, e: Exception) -> GeceError:
    return GeceError(
        f"{gguf}: transformers cannot load this GGUF ({e})",
        hint="transformers supports GGUF for common architectures (llama, gemma3, qwen2, ...)",
    )


def load_gguf(gguf: Path):
    """Load a GGUF with transformers (dequantized to float32): (model, tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False
        )
    except (ValueError, KeyError, OSError) as e:
        raise _cannot(gguf, e) from e
    return model.eval(), tok


# ------------------------------------------------------------------ safetensors out
def _digest(tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().numpy().view("uint8")).hexdigest()


def write_safetensors(path: Path, tensors: dict[str, Any]) -> None:
    """Write CPU float32 tensors as a safetensors file without a second copy of them in memory
    (``safetensors.torch.save_file`` turns each tensor into a ``bytes`` object first)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, t in tensors.items():
        size = t.numel() * t.element_size()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for t in tensors.values():
            f.write(memoryview(t.contiguous().numpy()).cast("B"))


class _Shards:
    """Tensors gathered into shards of at most ``limit`` bytes, each written as soon as it is full."""

    def __init__(self, directory: Path, limit: int):
        self.directory, self.limit = directory, limit
        self.pending: dict[str, Any] = {}
        self.pending_bytes = 0
        self.files: list[tuple[str, list[str]]] = []  # (temporary file name, tensor names)
        self.total = 0

    def add(self, name: str, tensor) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.limit:
            self.flush()
        self.pending[name] = tensor
        self.pending_bytes += size
        self.total += size

    def flush(self) -> None:
        if not self.pending:
            return
        name = f"shard-{len(self.files):05d}.tmp"
        write_safetensors(self.directory / name, self.pending)
        self.files.append((name, list(self.pending)))
        self.pending, self.pending_bytes = {}, 0

    def finish(self) -> list[str]:
        """Rename the shards as ``save_pretrained`` names them, write the index when there are several."""
        self.flush()
        n = len(self.files)
        names = ["model.safetensors"] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
        weight_map = {}
        for (tmp, tensors), final in zip(self.files, names, strict=True):
            os.replace(self.directory / tmp, self.directory / final)
            weight_map.update(dict.fromkeys(tensors, final))
        if n > 1:
            index = {"metadata": {"total_size": self.total}, "weight_map": dict(sorted(weight_map.items()))}
            (self.directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
        return names


# ------------------------------------------------------------------ streamed tensors
def _dequantize(tensor) -> Any:
    """A GGUF tensor as float32 numpy values (what ``gguf.quants.dequantize`` gives), dequantized a block of
    rows at a time into one array: dequantizing a whole tensor at once holds its values twice."""
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quant_shape_from_byte_shape

    data, qtype = tensor.data, tensor.tensor_type
    if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16) or data.ndim < 2:
        return np.array(dequantize(data, qtype), dtype=np.float32)  # a copy: F32 is a view of the mapped file
    shape = quant_shape_from_byte_shape(data.shape, qtype)
    out = np.empty(shape, dtype=np.float32)
    row_values = int(np.prod(shape[1:]))
    step = max(1, DEQUANT_ROWS_BYTES // (4 * row_values))
    for i in range(0, shape[0], step):
        out[i : i + step] = dequantize(data[i : i + step], qtype)
    return out


def _release() -> None:
    """Hand the memory freed by a phase back to the system (glibc keeps the heap otherwise:
    :func:`gece.scoring.heap.release_free_memory`)."""
    gc.collect()
    heap.release_free_memory()


def _drop_pages(reader) -> None:
    """Drop the pages of the memory-mapped GGUF read so far from this process (clean file pages: read again from
    the page cache if needed), so that they do not add up to the file's size."""
    import mmap

    mapped = getattr(getattr(reader, "data", None), "_mmap", None)
    if mapped is not None and hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        with contextlib.suppress(OSError, ValueError):
            mapped.madvise(mmap.MADV_DONTNEED)


def gguf_tensors(gguf: Path, model) -> Iterator[tuple[str, Any]]:
    """(transformers name, float32 tensor) of each weight of a GGUF, one at a time, as transformers' legacy GGUF
    loader (``load_gguf_checkpoint(return_tensors=True)``) makes them for ``model`` (which may be on the meta
    device: only its parameter names are read)."""
    import numpy as np
    import torch
    from gguf import GGUFReader
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
        load_gguf_checkpoint,
        read_field,
    )

    parsed = {"config": load_gguf_checkpoint(str(gguf), return_tensors=False)["config"], "tensors": {}}
    _release()  # the tokenizer's lists parsed with the config
    reader = GGUFReader(str(gguf))  # memory-mapped
    arch = read_field(reader, "general.architecture")[0]
    reader.fields.clear()  # the metadata parsed into objects (0.7 GB for gemma-3's 262k-token vocabulary)
    _release()
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=parsed["config"])
    key_map = get_gguf_hf_weights_map(model, processor)
    for tensor in reader.tensors:
        weights = _dequantize(tensor)
        _drop_pages(reader)
        result = processor.process(
            weights=weights, name=tensor.name, tensor_key_mapping=key_map, parsed_parameters=parsed
        )
        del weights
        if result.name in key_map:
            weights = result.weights
            if not weights.flags.c_contiguous or not weights.flags.writeable:
                weights = np.ascontiguousarray(weights).copy()
            yield key_map[result.name], torch.from_numpy(weights).to(torch.float32)
    yield from parsed.pop("tensors").items()  # where the MoE processors put the tensors they merge


# ------------------------------------------------------------------ conversion
def _write_tokenizer(gguf: Path, tmp: Path) -> None:
    """Save the GGUF's tokenizer and check the saved one gives the same ids and offsets."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, trust_remote_code=False)
    except (ValueError, KeyError, OSError) as e:
        raise _cannot(gguf, e) from e
    tok.save_pretrained(tmp)
    saved = AutoTokenizer.from_pretrained(tmp, trust_remote_code=False)
    for text in TOKENIZER_CHECK:
        kwargs = {"return_offsets_mapping": True} if getattr(tok, "is_fast", False) else {}
        if tok(text, **kwargs) != saved(text, **kwargs):
            raise RuntimeError(f"converting {gguf} changed its tokenizer ({text!r}); please report this bug")


def _check_bos(gguf: Path, tmp: Path) -> None:
    """The converted tokenizer adds the BOS token exactly when the GGUF says it should (``tokenizer.ggml.
    add_bos_token``): some transformers releases convert a GGUF's tokenizer without its post-processor (Gemma 3
    under transformers 5.19), and a model scored without the BOS it was trained with scores something else."""
    import transformers
    from transformers import AutoTokenizer
    from transformers.integrations.gguf.reader import read_gguf_metadata

    wants = read_gguf_metadata(str(gguf))[0].get("tokenizer.ggml.add_bos_token")
    tok = AutoTokenizer.from_pretrained(tmp, trust_remote_code=False)
    if wants is None or tok.bos_token_id is None:
        return
    adds = tok("a")["input_ids"][:1] == [tok.bos_token_id]
    if bool(wants) != adds:
        raise GeceError(
            f"{gguf}: transformers {transformers.__version__} converts this GGUF's tokenizer "
            f"{'without' if wants else 'with'} the BOS token the GGUF asks for (tokenizer.ggml.add_bos_token: "
            f"{bool(wants)}); its scores would not be the model's",
            hint="use the transformers release of constraints.txt (make install), or a model directory instead of "
            "the GGUF",
        )


def _write_weights(gguf: Path, tmp: Path, shard_bytes: int) -> tuple[Any, dict[str, str]]:
    """Write the config and the weights, streamed; (config, {name: sha256 of the tensor's bytes})."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    try:
        config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name, trust_remote_code=False)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    except (ValueError, KeyError, OSError) as e:
        raise _cannot(gguf, e) from e
    skeleton.config.architectures = [type(skeleton).__name__]
    skeleton.config.save_pretrained(tmp)
    if skeleton.can_generate():
        GenerationConfig.from_model_config(skeleton.config).save_pretrained(tmp)
    shards = _Shards(tmp, shard_bytes)
    digests = {}
    for name, tensor in gguf_tensors(gguf, skeleton):
        digests[name] = _digest(tensor)
        shards.add(name, tensor)
        del tensor
    shards.finish()
    return skeleton.config, digests


def _check_weights(gguf: Path, tmp: Path, digests: dict[str, str]) -> None:
    """Load the directory as gece does; every tensor must be one the conversion wrote, bit for bit (by sha256),
    or share its storage with one (a tied weight), and no key may be missing, unexpected or mismatched."""
    import torch
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(
        tmp, dtype=torch.float32, use_safetensors=True, trust_remote_code=False, output_loading_info=True
    )
    problems = [f"{kind}: {sorted(map(str, keys))[:5]}" for kind, keys in info.items() if keys]
    state = model.state_dict()
    checked = {}
    for name, t in state.items():
        if name in digests:
            if _digest(t) != digests[name]:
                problems.append(f"{name}: the loaded tensor differs from the GGUF's")
            checked[t.data_ptr()] = name
    for name, t in state.items():
        if name not in digests and t.data_ptr() not in checked:
            problems.append(f"{name}: no tensor of the GGUF (left at its initialization)")
    problems += [f"{name}: written but not a tensor of the model" for name in sorted(set(digests) - set(state))]
    if problems:
        raise RuntimeError(f"converting {gguf} did not give the GGUF's weights: {problems[:10]}; please report it")


def _convert_whole(gguf: Path, tmp: Path) -> None:
    """The conversion of architectures transformers reads with its newer GGUF loader: the GGUF-loaded model's
    state dict saved from a model made ``from_config`` (a GGUF-loaded model cannot ``save_pretrained``), checked
    to give bit-identical logits. About three float32 copies of the weights."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    src, tok = load_gguf(gguf)
    config = copy.deepcopy(src.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(src.state_dict(), strict=True)
    plain.save_pretrained(tmp, safe_serialization=True, max_shard_size=SHARD_BYTES)
    tok.save_pretrained(tmp)
    del plain
    reloaded = AutoModelForCausalLM.from_pretrained(
        tmp, dtype=torch.float32, use_safetensors=True, trust_remote_code=False
    ).eval()
    ids = tok(PROBE, return_tensors="pt").input_ids
    with torch.inference_mode():
        if not torch.equal(src(ids).logits, reloaded(ids).logits):
            raise RuntimeError(f"converting {gguf} changed the model's logits; please report this bug")


def convert_gguf(gguf: Path, sha: str, dest: Path, shard_bytes: int = SHARD_BYTES) -> Path:
    """Write a plain transformers directory (float32 safetensors shards + tokenizer) for a GGUF at ``dest``:
    built in a temporary directory next to it, checked (module docstring), then renamed into place."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        method = "streamed" if streamed(architecture(gguf)) else "whole"
        if method == "streamed":
            _write_tokenizer(gguf, tmp)
            _release()
            _, digests = _write_weights(gguf, tmp, shard_bytes)
            _release()
            _check_weights(gguf, tmp, digests)
        else:
            _convert_whole(gguf, tmp)
        _check_bos(gguf, tmp)
        meta = {
            "format": CACHE_FORMAT,
            "gguf_file": gguf.name,
            "gguf_sha256": sha,
            "method": method,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        }
        (tmp / "gece-model.json").write_text(json.dumps(meta, indent=2) + "\n")
        if dest.exists():  # stale (another format) or written meanwhile by another run
            if _converted_ok(dest, sha):
                return dest
            trash = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.replace(dest, trash / "x")
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.replace(tmp, dest)
        except OSError:
            if not _converted_ok(dest, sha):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def converted_dir(gguf: Path, sha: str, models: Path) -> Path:
    """The transformers directory for a GGUF under the cache folder ``models`` (built on first use), one per
    transformers release (``<sha256>-transformers-<version>``): an environment with another release (the engines
    environment's, say) converts its own copy and never replaces this one."""
    import transformers

    dest = models / f"{sha}-transformers-{transformers.__version__}"
    if _converted_ok(dest, sha):
        return dest
    return convert_gguf(gguf, sha, dest)
