"""extract -> metrics through `dvc repro` on a small slice (40 pairs per benchmark, smollm2-135m)."""

from __future__ import annotations

import json

import pytest
import yaml

from .conftest import run

pytestmark = pytest.mark.slow

BENCHMARKS = ("winobias", "winogender", "genderlex", "genderlex_person", "genderlex_someone")


def test_extract_and_metrics_on_a_slice(repo_copy):
    repo = repo_copy
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["models"] = ["smollm2-135m"]
    params["ablate"]["special_tokens"] = {}  # its models must be in models
    params["extract"]["limit"] = 40
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    res = run(["dvc", "repro", "metrics"], repo)
    assert res.stdout.count("Running stage 'extract@") == 5
    for b in BENCHMARKS:
        report = json.loads((repo / f"reports/metrics/{b}/smollm2-135m.json").read_text())
        assert report["n"] == 40 and 0.0 <= report["ece"] <= 1.0 and report["accuracy"] is not None
        meta = json.loads((repo / f"artifacts/scores/{b}/smollm2-135m.meta.json").read_text())
        assert meta["pairs"] == 40 and meta["limit"] == 40 and meta["model"] == "smollm2-135m"
        assert meta["weights"] == {
            "SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"}
        assert not (repo / f"artifacts/scores/{b}/smollm2-135m.shards").exists()
    assert "up to date" in run(["dvc", "status", "metrics"], repo).stdout
    again = run(["dvc", "repro", "metrics"], repo)
    assert "Running stage" not in again.stdout

    # the same slice scored again from scratch (cache and run cache bypassed) is byte-identical
    scores = repo / "artifacts/scores/winogender/smollm2-135m.parquet"
    before = scores.read_bytes()
    run(["dvc", "repro", "--force", "extract@winogender-smollm2-135m"], repo)
    assert scores.read_bytes() == before
    assert "up to date" in run(["dvc", "status", "metrics@winogender-smollm2-135m"], repo).stdout
