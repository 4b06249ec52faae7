"""The documented lm-evaluation-harness round trip on a slice (docs/lmeval.md): gece lmeval-export for smollm2-135m,
``lm_eval`` with the HF backend on the CPU per task, gece lmeval-import, and the imported p against gece's own
extract + score of the same pairs: WinoBias under ``target``, CrowS-Pairs under ``sentence`` and ``shared``.

lm-eval sums float32 log-probabilities; gece sums correctly rounded float64 ones. The tolerance (docs/lmeval.md):
|Δ(logprob_more − logprob_less)| ≤ 1e-3 per pair, so |Δp| ≤ 2.5e-4, and the two verdicts (p > 0.5) agree except
for a pair whose own difference lies within 1e-3 of 0.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import yaml

from ..conftest import ROOT
from .conftest import run

pytestmark = pytest.mark.slow
BENCHMARKS = ("winobias", "crows_pairs", "crows_pairs_shared")  # target, sentence, shared
N = 12
TOLERANCE = 1e-3  # in a side's log-likelihood difference


def test_lm_eval_round_trip_matches_gece(tmp_path, data_dir):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"] = {b: e for b, e in params["benchmarks"].items() if b in BENCHMARKS}
    params["models"], params["references"] = ["smollm2-135m"], []
    params["ablate"]["special_tokens"] = {}
    params["extract"]["limit"] = N
    params["registry"]["smollm2-135m-lmeval"] = {"source": "lmeval:lmeval/out"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "data").symlink_to(data_dir)
    env = {"HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    for b in BENCHMARKS:
        run(["gece", "prepare", "--benchmark", b], tmp_path, env=env)
    run(["gece", "extract", "--model", "smollm2-135m"], tmp_path, env=env)
    for b in BENCHMARKS:
        run(["gece", "score", "--benchmark", b, "--model", "smollm2-135m"], tmp_path, env=env)

    out = run(["gece", "lmeval-export", "--model", "smollm2-135m", "--limit", str(N)], tmp_path, env=env).stdout
    assert "gece_crows_pairs_shared" in out
    model_dir = run(["gece", "lmeval-model", "--model", "smollm2-135m"], tmp_path, env=env).stdout.strip()
    for b in BENCHMARKS:  # one lm_eval call per task (docs/lmeval.md: tasks of one call share its model arguments)
        record = json.loads((tmp_path / "lmeval/tasks" / f"gece_{b}" / "export.json").read_text())
        assert record["model_dir"] == model_dir and record["pairs_prepared"] == N
        cmd = ["lm_eval", "--model", "hf", "--model_args", record["model_args"], "--tasks", f"gece_{b}"]
        cmd += ["--include_path", "lmeval/tasks", "--output_path", "lmeval/out", "--log_samples"]
        run([*cmd, "--device", "cpu", "--batch_size", "8"], tmp_path, env={**env, "TOKENIZERS_PARALLELISM": "false"})
        run(["gece", "lmeval-import", "--model", "smollm2-135m-lmeval", "--benchmark", b], tmp_path, env=env)

    for b in BENCHMARKS:
        ours = pd.read_parquet(tmp_path / f"artifacts/scores/{b}/smollm2-135m.parquet").set_index("pair_id")
        theirs = pd.read_parquet(tmp_path / f"artifacts/scores/{b}/smollm2-135m-lmeval.parquet").set_index("pair_id")
        record = json.loads((tmp_path / "lmeval/tasks" / f"gece_{b}" / "export.json").read_text())
        left_out = {e["pair_id"] for e in record["excluded"]}
        assert set(theirs.index) == set(ours.index) - left_out and len(theirs) >= N - 5, b
        ours = ours.loc[theirs.index]
        d_ours = (ours["logprob_more"] - ours["logprob_less"]).to_numpy()
        d_theirs = (theirs["logprob_more"] - theirs["logprob_less"]).to_numpy()
        assert np.abs(d_ours - d_theirs).max() <= TOLERANCE, b
        assert np.abs(ours["p"].to_numpy() - theirs["p"].to_numpy()).max() <= TOLERANCE / 4, b
        agree = (ours["p"].to_numpy() > 0.5) == (theirs["p"].to_numpy() > 0.5)
        assert (agree | (np.abs(d_ours) <= TOLERANCE)).all(), b
        if b != "crows_pairs_shared":  # shared: lm-eval's sums lack the common prefix, which cancels in p
            assert np.abs(ours["logprob_more"] - theirs["logprob_more"]).max() <= TOLERANCE, b
            assert (ours["n_tokens_more"] == theirs["n_tokens_more"]).all(), b
        assert (ours["scored_punct_only"].isna() | (ours["scored_punct_only"] == theirs["scored_punct_only"])).all()
        meta = json.loads((tmp_path / f"artifacts/scores/{b}/smollm2-135m-lmeval.meta.json").read_text())
        assert meta["backend"] == "hf" and meta["dtype"] == "float32" and meta["pairs_scored"] == len(theirs)
    assert os.path.isdir(model_dir)
