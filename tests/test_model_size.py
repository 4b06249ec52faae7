"""Models at their checkpoint's size on the CPU (issue 40): weights kept in their stored dtype and upcast a
block of rows at a time inside the correctly rounded products, bfloat16 and float16 checkpoints computed in
float32, and the memory estimate that refuses a model before loading it.

The checks are on tiny random Llama and Gemma-3 models saved in each dtype; the size bench
(``bench/bench_size.py``) runs the same code on models of real shapes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from gece.cli import main
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import engine, exact, heap, memory, models

from .conftest import ROOT
from .refusals import refusal
from .tiny import tiny_model


def _save(tmp_path, kind: str, dtype) -> str:
    """A tiny random model of ``kind`` saved in ``dtype`` with a fast word-level tokenizer."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>", *(f"w{i}" for i in range(94))]
    tok = Tokenizer(tok_models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    path = tmp_path / f"{kind}-{str(dtype).removeprefix('torch.')}"
    model = tiny_model(kind).to(dtype)
    model.save_pretrained(path, safe_serialization=True)
    fast.save_pretrained(path)
    return str(path)


IDS = torch.tensor([[1, 5, 17, 33, 2, 60, 61, 9, 90, 4, 4, 12]])


def _logits(lm: models.LoadedModel):
    with torch.inference_mode():
        return lm.model(input_ids=IDS).logits.float()


def test_resolve_dtype_keeps_the_stored_dtype_on_the_cpu():
    assert models.resolve_dtype("auto", "cpu", "bfloat16") == torch.bfloat16
    assert models.resolve_dtype("auto", "cpu") == torch.float32
    assert models.resolve_dtype("auto", "cuda", "bfloat16") == torch.float32
    assert models.resolve_dtype("float16", "cpu", "bfloat16") == torch.float16
    assert models.resolve_dtype("float32", "cpu", "bfloat16") == torch.float32


HALF = [("llama", torch.bfloat16), ("gemma", torch.bfloat16), ("llama", torch.float16)]


@pytest.mark.parametrize(("kind", "dtype"), HALF)
def test_half_checkpoint_kept_in_its_dtype_scores_as_in_float32(tmp_path, kind, dtype):
    """A bfloat16 or float16 checkpoint on the CPU keeps its linear and embedding weights in that dtype and
    gives the same logits, bit for bit, as the same checkpoint loaded in float32 (every stored value is a
    float32 value); within 1e-5 in log-probability of a float64 forward of the same weights."""
    source = _save(tmp_path, kind, dtype)
    kept = models.load(ModelSpec(source=source))
    assert kept.dtype == str(dtype).removeprefix("torch.")
    linears = [m for m in kept.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.dtype == dtype for m in linears)
    assert kept.model.get_input_embeddings().weight.dtype == dtype
    stored = (torch.nn.Linear, torch.nn.Embedding)
    others = [p for m in kept.model.modules() if not isinstance(m, stored) for p in m.parameters(False)]
    assert others and all(p.dtype == torch.float32 for p in others)  # norms compute in float32
    upcast = models.load(ModelSpec(source=source, dtype="float32"))
    assert torch.equal(_logits(kept), _logits(upcast))
    if kind == "gemma":  # the embedding scale is the float32 model's, not rounded to 8 bits
        assert kept.model.get_input_embeddings().embed_scale.item() == np.float32(48**0.5)
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float64, attn_implementation="eager").eval()
    with torch.inference_mode():
        lp64 = ref(input_ids=IDS).logits.log_softmax(-1)
    lp = engine.log_probs(_logits(kept))
    assert float((lp - lp64).abs().max()) < 1e-5


def test_weights_in_blocks_give_the_same_bits(monkeypatch):
    """Cutting a layer's rows into blocks of any size changes no bit of the correctly rounded product, nor does
    cutting a block's product for an input of more rows than the block's width, nor do the row norms a first
    product keeps for the next."""
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((97, 48)).astype(np.float32))
    w32 = torch.from_numpy(rng.standard_normal((101, 48)).astype(np.float32))
    w32[0, :2] = torch.tensor([-0.0, 1e-40])  # the upcast keeps signed zeros and subnormals
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        w = w32.to(dtype)
        whole = exact.matmul(x, w.float().T)
        for block in (8 * 48, 8 * 48 * 7, 8 * 48 * 20, 1 << 25):  # 20 rows: products of 9, 9 and 2
            monkeypatch.setattr(exact, "WEIGHT_BLOCK_BYTES", block)
            for cached in (True, False):
                op = exact.Weights([lambda w=w: w], cached=cached)
                got = exact.matmul_weights(x, op)
                assert torch.equal(got, whole)
                if cached:  # the norms kept by the first product, read by the next
                    assert op.normed == set(range(0, 101, op.rows))
                    assert torch.equal(exact.matmul_weights(x, op), whole)


def test_load_hashes_the_weights_files_beside_the_load(tmp_path):
    """A directory's weights files are hashed in a thread while transformers loads them: the same sha256 per file,
    and an error in the thread is raised in the caller's."""
    source = _save(tmp_path, "llama", torch.bfloat16)
    lm = models.load(ModelSpec(source=source))
    files = sorted(Path(source).glob("*.safetensors"))
    assert files and lm.weights == {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    with pytest.raises(ZeroDivisionError):
        engine.Background(lambda: 1 / 0).result()


def test_memory_estimate_counts_the_weights_in_their_kept_dtype(tmp_path):
    source = _save(tmp_path, "llama", torch.bfloat16)
    resolved = models.resolve(ModelSpec(source=source))
    lm = models.load(ModelSpec(source=source))
    stored = {id(p): p for p in lm.model.parameters()}.values()
    bf16 = sum(p.numel() * p.element_size() for p in stored if p.dtype == torch.bfloat16)
    values = sum(p.numel() for p in stored)
    assert bf16 > 0.99 * 2 * values  # the norms (float32 in memory, bfloat16 in the file) are the rest
    assert models.estimate_memory(resolved, "bfloat16").weights == 2 * values
    assert models.estimate_memory(resolved, "float32").weights == 4 * values
    est = models.estimate_memory(resolved, "bfloat16", threads=2)
    head = engine.HEAD_ROWS * 4 + engine.SOFTMAX_ROWS * 20  # float32 logits; asked rows, float32 and 2 x float64
    naive = 2 * exact.WEIGHT_BLOCK_BYTES + 97 * (engine.NAIVE_ROWS * 4 + engine.SOFTMAX_ROWS * 20)  # the self-check
    tokenizer = 97 * memory.TOKENIZER_BYTES_PER_WORD
    assert est.scoring == 2 * (2 * exact.WEIGHT_BLOCK_BYTES + 97 * head) + naive + tokenizer + memory.RUNTIME_BYTES


@refusal("E-MODEL-MEMORY", readers=("model loading",))
def test_model_that_cannot_fit_is_refused_before_loading(tmp_path, monkeypatch, capsys):
    source = _save(tmp_path, "llama", torch.bfloat16)
    monkeypatch.setattr(memory, "available_memory", lambda: 0.5e9)
    loads: list[str] = []
    monkeypatch.setattr(models, "_load_directory", lambda path, *a, **k: loads.append(str(path)))
    with pytest.raises(models.GeceError) as e:
        models.load(ModelSpec(source=source))
    assert "needs about 0.8 GB of memory on the CPU (0.0 GB of bfloat16 weights" in e.value.message
    assert "0.5 GB is available" in e.value.message and "device: multi" in e.value.hint
    with pytest.raises(models.GeceError) as e:
        models.load(ModelSpec(source=source, dtype="float32"))
    assert "dtype: bfloat16" in e.value.hint  # a float32 model is told of the half-size dtype
    assert main(["--params", str(ROOT / "params.yaml"), "try", source, "--limit", "2"]) == 2
    assert "needs about" in capsys.readouterr().err
    assert loads == []  # nothing was loaded


def _size_bench():
    """bench/size.py as a module (it is a script, not part of the package), loaded anew: its settings
    (``GECE_SIZE_PAIRS``, ...) are read at import."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("size_bench", ROOT / "bench" / "size.py")
    size = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(size)
    return size


@pytest.mark.slow
def test_size_bench_runs_a_tiny_shape(tmp_path, monkeypatch):
    """The size bench's code on its ``tiny`` shape (bfloat16, the 49,152-word vocabulary): gece in its own
    process keeps the weights in bfloat16, meets the memory target and matches the bench's own float64
    forward within 1e-5 (minicons is left to `make bench-size`)."""
    import json

    monkeypatch.setenv("GECE_SIZE_PAIRS", "4")
    size = _size_bench()
    out = tmp_path / "size.json"
    report = size.main(["tiny"], out=out, methods=("float64", "gece"))
    assert json.loads(out.read_text()) == report
    row = report["models"]["tiny"]
    assert row["machine"]["cpus"] >= 1 and isinstance(row["machine"]["bf16_products"], bool) and row["pairs"] == 4
    assert row["gece"]["dtype"] == "bfloat16" and row["gece"]["pairs"] == 4
    assert row["gece"]["max_abs_diff_vs_float64"] <= 1e-5 and row["pass"] == {"memory": True, "accuracy": True}


def test_minicons_in_bfloat16_runs_where_the_cpu_multiplies_bfloat16(monkeypatch):
    """The size bench runs minicons in bfloat16 by default only on a CPU with native bfloat16 products (elsewhere
    torch emulates them, 13x slower than float32); GECE_SIZE_BF16=1 asks for it anywhere."""
    size = _size_bench()
    monkeypatch.delenv("GECE_SIZE_BF16", raising=False)
    assert size.default_methods({"bf16_products": True}) == size.METHODS
    without = size.default_methods({"bf16_products": False})
    assert "minicons_bfloat16" not in without and set(without) == set(size.METHODS) - {"minicons_bfloat16"}
    monkeypatch.setenv("GECE_SIZE_BF16", "1")
    assert size.default_methods({"bf16_products": False}) == size.METHODS


def test_malloc_trim_is_found_on_glibc():
    """heap.release_free_memory, which engine.score calls after every batch, finds glibc's malloc_trim on a glibc
    Linux (a no-op elsewhere); its effect on the peak is measured by the size bench, not here."""
    import platform

    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert heap._malloc_trim() is not None
    heap.release_free_memory()  # harmless anywhere
