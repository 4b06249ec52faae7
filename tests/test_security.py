"""Untrusted models: no code shipped with a model ever runs, and pickle-based weights are refused."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
import yaml

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import models

from .conftest import ROOT
from .refusals import refusal

PICKLED = ["model.pt", "weights.bin", "pytorch_model.pth", "model.pkl", "last.ckpt"]


class _Payload:
    """Unpickling this creates ``marker``: proof that a pickle was loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _evil_pickle(path: Path, marker: Path) -> Path:
    path.write_bytes(pickle.dumps(_Payload(marker)))
    return path


@pytest.mark.parametrize("name", PICKLED)
@refusal("E-MODEL-PICKLE", readers=("model loading",))
def test_pickled_weights_file_is_refused(tmp_path, name):
    marker = tmp_path / "ran"
    src = _evil_pickle(tmp_path / name, marker)
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source=str(src)))
    assert f"model source {src}: pickle-based weights are refused; convert to safetensors" in e.value.message
    assert "save_pretrained(dir, safe_serialization=True)" in e.value.hint and not marker.exists()


@pytest.mark.parametrize("name", PICKLED)
@refusal("E-MODEL-PICKLE", readers=("model loading",))
def test_directory_with_only_pickled_weights_is_refused(tmp_path, name):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    marker = tmp_path / "ran"
    _evil_pickle(tmp_path / name, marker)
    with pytest.raises(GeceError) as e:
        models.resolve(ModelSpec(source=str(tmp_path)))
    assert (
        f"no safetensors weights in {tmp_path} (only pickled {name}: pickle-based weights are refused)"
        in e.value.message
    )
    assert not marker.exists()


def _remote_code_model(path: Path, marker: Path) -> Path:
    """A model directory that works only with trust_remote_code: its code would create ``marker``."""
    path.mkdir()
    (path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "evil-lm",
                "architectures": ["EvilForCausalLM"],
                "auto_map": {
                    "AutoConfig": "modeling_evil.EvilConfig",
                    "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
                },
            }
        )
    )
    (path / "modeling_evil.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    (path / "model.safetensors").write_bytes(b"")
    return path


@refusal("E-MODEL-CODE", readers=("model loading",))
def test_model_needing_remote_code_is_refused_not_run(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "ran"
    src = _remote_code_model(tmp_path / "evil", marker)
    with pytest.raises(GeceError) as e:
        models.load(ModelSpec(source=str(src), device="cpu"))
    assert "needs its own code (trust_remote_code), which gece never runs" in e.value.message
    assert any("config.json: auto_map" in p for p in e.value.problems) and not marker.exists()
    # through the command line: exit 2, nothing scored, nothing run
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["models"] = ["evil"]
    params["registry"] = {"evil": {"source": str(src), "device": "cpu"}}
    params["references"] = []
    params["ablate"]["special_tokens"] = {}
    params["ablate"]["prompts"] = {}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert main(["extract", "p.parquet", "out.parquet", "--model", "evil"]) == 2
    err = capsys.readouterr().err
    assert "needs its own code" in err and "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "out.parquet").exists()


@refusal("E-MODEL-CODE", readers=("model loading",))
def test_custom_tokenizer_code_is_refused(tmp_path):
    src = tmp_path / "m"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (src / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["tok.EvilTokenizer", None]}}))
    (src / "model.safetensors").write_bytes(b"")
    with pytest.raises(GeceError, match="needs its own code") as e:
        models.resolve(ModelSpec(source=str(src)))
    assert e.value.problems == ["tokenizer_config.json: auto_map ['AutoTokenizer']"]


def _tiny_directory(path: Path) -> Path:
    """A tiny random Llama with a fast word-level tokenizer, saved as safetensors."""
    import torch
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>", "he", "she", "left", "the", "nurse", "met", "him", "her", "."]
    tok = Tokenizer(tok_models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(words),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=32,
        )
    )
    model.save_pretrained(path, safe_serialization=True)
    fast.save_pretrained(path)
    return path


def test_directory_with_safetensors_and_pickle_loads_only_safetensors(tmp_path, monkeypatch):
    import torch

    src = _tiny_directory(tmp_path / "m")
    marker = tmp_path / "ran"
    _evil_pickle(src / "pytorch_model.bin", marker)

    def no_pickles(*args, **kwargs):
        raise AssertionError("torch.load called: a pickle was about to be loaded")

    monkeypatch.setattr(torch, "load", no_pickles)
    lm = models.load(ModelSpec(source=str(src), device="cpu", attention="sdpa"))
    assert lm.kind == "directory" and list(lm.weights) == ["model.safetensors"]
    assert lm.model.config.vocab_size == 12 and not marker.exists()


def test_trust_remote_code_is_never_enabled():
    """Every place the package passes trust_remote_code sets it to False."""
    found = [
        (path, m)
        for path in (ROOT / "src" / "gece").rglob("*.py")
        for m in re.finditer(r"trust_remote_code\"?\s*[=:]\s*(\w+)", path.read_text())
    ]
    assert len(found) >= 4
    assert all(m.group(1) == "False" for _, m in found), [f"{p}: {m.group(0)}" for p, m in found]
