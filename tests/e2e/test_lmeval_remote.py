"""An imported lm-eval run travels through a DVC remote (docs/dvc.md "lm-eval runs"): the lm-eval output directory
is DVC-tracked, the import is a stage whose dep is that directory, and a clone that pulls from a temporary remote
gets the score files and rebuilds nothing. The samples are hand-made (tests/test_lmeval.py): no model runs here."""

from __future__ import annotations

import pytest
import yaml

from gece.pipeline import prepare as prepare_stage

from ..conftest import ROOT
from ..test_lmeval import good_samples, write_samples
from .conftest import DVC_ENV, git, run

pytestmark = pytest.mark.slow
STAGE = {
    "stages": {
        "lmeval-import": {
            "foreach": ["winobias"],
            "do": {
                "cmd": "gece lmeval-import --model smol-lm --benchmark ${item}",
                "deps": ["lm", "artifacts/prepared/${item}.parquet"],
                "params": ["registry.smol-lm"],
                "outs": [
                    "artifacts/scores/${item}/smol-lm.parquet",
                    "artifacts/scores/${item}/smol-lm.meta.json",
                ],
            },
        }
    }
}


def test_an_imported_run_comes_from_the_remote(tmp_path, data_dir, monkeypatch):
    repo, remote, clone = tmp_path / "repo", tmp_path / "remote", tmp_path / "clone"
    repo.mkdir()
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (repo / "dvc.yaml").write_text(yaml.safe_dump(STAGE, sort_keys=False))
    (repo / "data").symlink_to(data_dir)
    prepare_stage.prepare(data_dir / "benchmarks" / "winobias.csv", repo / "artifacts/prepared/winobias.parquet")
    monkeypatch.chdir(repo)
    write_samples(repo, good_samples())
    env = {**DVC_ENV, "PYTHONPATH": str(ROOT / "src")}
    git(repo, "init", "-q")
    run(["dvc", "init", "-q"], repo, env=env)
    run(["dvc", "add", "-q", "lm"], repo, env=env)  # the lm-eval output: DVC-tracked, not git
    out = run(["dvc", "repro"], repo, env=env).stdout
    assert "Running stage 'lmeval-import@winobias'" in out
    run(["dvc", "remote", "add", "-d", "tmp", str(remote)], repo, env=env)
    run(["dvc", "push", "-q"], repo, env=env)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "an lm-eval run")
    scores = (repo / "artifacts/scores/winobias/smol-lm.parquet").read_bytes()

    git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert not (clone / "artifacts/scores/winobias/smol-lm.parquet").exists()
    run(["dvc", "pull", "-q"], clone, env=env)
    assert (clone / "artifacts/scores/winobias/smol-lm.parquet").read_bytes() == scores
    assert (clone / "lm").is_dir()
    out = run(["dvc", "repro"], clone, env=env).stdout
    assert "Running stage" not in out  # nothing rebuilt
    assert "up to date" in run(["dvc", "status"], clone, env=env).stdout
