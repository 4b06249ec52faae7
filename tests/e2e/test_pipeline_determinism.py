"""The whole pipeline, twice from a clean state, on a slice: byte-identical artifacts, reports
and dvc.lock (figures included). Two fresh copies of the repository, each with its own DVC
cache, run `dvc repro` on 40 pairs per benchmark (smollm2-135m, the authors' GPT-J scores)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ..score_files import logprobs_above_zero
from .conftest import BENCHMARKS, copy_repo, run
from .conftest import slice_params as _slice

pytestmark = pytest.mark.slow

SMOL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _hashes(repo: Path) -> dict[str, str]:
    """sha256 of every file the pipeline wrote (artifacts/, reports/) and of dvc.lock."""
    files = [p for d in ("artifacts", "reports") for p in (repo / d).rglob("*") if p.is_file()]
    files.append(repo / "dvc.lock")
    return {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if not p.name.endswith(".timing.json")
    }  # run timings: not outputs (see .dvcignore)


def test_pipeline_twice_from_clean_gives_identical_bytes(tmp_path, data_dir, slice_origin):
    """A is the shared slice run (tests/e2e/conftest.py: slice_origin, run from scratch in its own copy);
    B runs the same slice from scratch in another copy with another DVC cache."""
    a = slice_origin.repo
    assert [s for s in slice_origin.ran if s.startswith("extract@")] == ["extract@smollm2-135m"]  # one model load
    assert sum(s.startswith("score@") for s in slice_origin.ran) == len(BENCHMARKS)
    for b in BENCHMARKS:
        report = json.loads((a / f"reports/metrics/{b}/smollm2-135m.json").read_text())
        assert report["n"] == 40 and 0.0 <= report["ece"] <= 1.0 and report["accuracy"] is not None
        # the punctuation-only flag reaches the metrics stage (runs.RUN_COLUMNS): counted under the sentence rule
        # (crows_pairs: none of its pairs), null under the target rule (tests/test_clusters.py: the full counts)
        assert report["n_punct_only"] == (0 if b == "crows_pairs" else None)
        meta = json.loads((a / f"artifacts/scores/{b}/smollm2-135m.meta.json").read_text())
        assert (
            meta["pairs"] == 40
            and meta["limit"] == 40
            and meta["weights"] == {"SmolLM2-135M-Instruct.Q4_1.gguf": SMOL_SHA}
        )
        assert meta["word_prob"] == "chain" and meta == {
            **json.loads((a / f"artifacts/tokens/smollm2-135m/{b}.meta.json").read_text()),
            "word_prob": "chain",
            "side_prob": "joint",
            "data_sha256": meta["data_sha256"],  # each meta records the sha256 of its own data file
        }
        assert (a / f"artifacts/tokens/smollm2-135m/{b}.timing.json").exists()
    assert not (a / "artifacts/tokens/smollm2-135m.shards").exists()
    n, above = logprobs_above_zero(a)  # every score file gece computed holds log-probabilities of at most 0
    assert n == len(BENCHMARKS) and not above, above[:5]
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
