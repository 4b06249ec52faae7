"""The whole pipeline, twice from a clean state, on a slice: byte-identical artifacts, reports
and dvc.lock (figures included). Two fresh copies of the repository, each with its own DVC
cache, run `dvc repro` on 40 pairs per benchmark (smollm2-135m, the authors' GPT-J scores)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, copy_repo, run

pytestmark = pytest.mark.slow

BENCHMARKS = tuple(yaml.safe_load((ROOT / "params.yaml").read_text())["benchmarks"])  # native and imported
SMOL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _slice(repo: Path) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["models"] = ["smollm2-135m"]
    params["ablate"]["special_tokens"] = {}  # its models must be in models
    params["ablate"]["sizes"] = [10, 20]
    params["ablate"]["draws"] = 20
    params["references"] = ["paper-gpt-j-6b"]  # the released scores of one model (every benchmark it has)
    params["extract"]["limit"] = 40
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _hashes(repo: Path) -> dict[str, str]:
    """sha256 of every file the pipeline wrote (artifacts/, reports/) and of dvc.lock."""
    files = [p for d in ("artifacts", "reports") for p in (repo / d).rglob("*") if p.is_file()]
    files.append(repo / "dvc.lock")
    return {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)
            if not p.name.endswith(".timing.json")}  # run timings: not outputs (see .dvcignore)


def test_pipeline_twice_from_clean_gives_identical_bytes(tmp_path, data_dir):
    a = copy_repo(tmp_path / "a", data_dir)
    _slice(a)
    for p in ("artifacts", "reports", "dvc.lock"):  # clean: nothing from the committed runs
        run(["git", "rm", "-rq", "--ignore-unmatch", p], a)
    res = run(["dvc", "repro"], a)
    assert res.stdout.count("Running stage 'extract@") == len(BENCHMARKS)
    for b in BENCHMARKS:
        report = json.loads((a / f"reports/metrics/{b}/smollm2-135m.json").read_text())
        assert report["n"] == 40 and 0.0 <= report["ece"] <= 1.0 and report["accuracy"] is not None
        meta = json.loads((a / f"artifacts/scores/{b}/smollm2-135m.meta.json").read_text())
        assert meta["pairs"] == 40 and meta["limit"] == 40 and meta["weights"] == {
            "SmolLM2-135M-Instruct.Q4_1.gguf": SMOL_SHA}
        assert (a / f"artifacts/scores/{b}/smollm2-135m.timing.json").exists()
        assert not (a / f"artifacts/scores/{b}/smollm2-135m.shards").exists()
    assert "up to date" in run(["dvc", "status"], a).stdout
    assert "Running stage" not in run(["dvc", "repro"], a).stdout

    b = copy_repo(tmp_path / "b", data_dir)
    _slice(b)
    for p in ("artifacts", "reports", "dvc.lock"):
        run(["git", "rm", "-rq", "--ignore-unmatch", p], b)
    run(["dvc", "repro"], b)
    ha, hb = _hashes(a), _hashes(b)
    assert ha.keys() == hb.keys()
    assert [k for k in ha if ha[k] != hb[k]] == []
    kinds = {Path(k).suffix for k in ha}
    assert {".parquet", ".json", ".png", ".md", ".html", ".lock"} <= kinds
    assert any(k.startswith("reports/figures/") for k in ha) and "reports/index.html" in ha
