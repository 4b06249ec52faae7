"""SIGKILL during `gece extract` loses nothing: before the first shard, mid-run and during the
final write (GECE_KILL_AT, see gece.base.faults), a rerun completes, reuses the finished shards and
writes the same bytes as an uninterrupted run; under `dvc repro` too (the stage's shards lie beside
the output folder DVC removes), and DVC never records a partial output."""

from __future__ import annotations

import json
import signal

import pytest
import yaml

from .conftest import run

pytestmark = pytest.mark.slow

OUT = "out/winobias.parquet"  # one benchmark, its shards beside it
STAGE = "extract@smollm2-135m"
STAGE_OUT = "artifacts/tokens/smollm2-135m"
STAGE_SHARDS = "artifacts/tokens/smollm2-135m.shards/winobias"
ARGS = ["--limit", "48", "--batch-size", "4"]  # 12 batches: 3 shards of 4 batches


def _extract(repo, out, kill=None, check=True):
    cmd = ["gece", "-q", "extract", "artifacts/prepared/winobias.parquet", out, "--model", "smollm2-135m", *ARGS]
    return run(cmd, repo, check=check, env={"GECE_KILL_AT": kill} if kill else None)


SHARDS = OUT.replace(".parquet", ".shards")


def _shards(repo, d=SHARDS):
    return sorted(p.name for p in (repo / d).glob("shard-*.parquet"))


def _leftovers(repo):
    return sorted(p.name for p in (repo / OUT).parent.glob(".*.tmp"))


@pytest.fixture
def prepared(repo_copy):
    run(["gece", "prepare", "data/benchmarks/winobias.csv", "artifacts/prepared/winobias.parquet"], repo_copy)
    return repo_copy


def test_killed_extract_resumes_to_the_same_bytes(prepared):
    repo = prepared
    _extract(repo, "artifacts/reference/m.parquet")  # uninterrupted
    reference = (repo / "artifacts/reference/m.parquet").read_bytes()
    reference_meta = (repo / "artifacts/reference/m.meta.json").read_bytes()

    res = _extract(repo, OUT, kill="extract:loaded", check=False)  # model loaded, no shard yet
    assert res.returncode == -signal.SIGKILL
    assert not (repo / OUT).exists() and _shards(repo) == []

    res = _extract(repo, OUT, kill="extract:shard:1", check=False)  # mid-run
    assert res.returncode == -signal.SIGKILL
    assert not (repo / OUT).exists() and _shards(repo) == ["shard-00000.parquet", "shard-00001.parquet"]

    res = _extract(repo, OUT, kill="rename:winobias.parquet", check=False)  # during the final write
    assert res.returncode == -signal.SIGKILL
    assert not (repo / OUT).exists() and len(_shards(repo)) == 3
    assert len(_leftovers(repo)) == 1  # the killed writer's temporary file, never renamed

    _extract(repo, OUT)
    assert (repo / OUT).read_bytes() == reference
    assert (repo / OUT.replace(".parquet", ".meta.json")).read_bytes() == reference_meta
    timing = json.loads((repo / OUT.replace(".parquet", ".timing.json")).read_text())
    assert timing["shards_resumed"] == 3
    assert _leftovers(repo) == [] and _shards(repo) == []


def test_dvc_never_records_a_partial_output(prepared):
    repo = prepared
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["extract"].update(limit=48, batch_size=4)
    params.update(benchmarks={"winobias": {}, "winogender": {}}, models=["smollm2-135m"])
    params["ablate"].update(special_tokens={})
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["dvc", "repro", "-s", "prepare@winobias", "prepare@winogender"], repo)
    (repo / "dvc.lock").unlink(missing_ok=True)
    run(["dvc", "commit", "-f", "prepare@winobias", "prepare@winogender"], repo)

    def lock_entry():
        lock = yaml.safe_load((repo / "dvc.lock").read_text())
        return lock["stages"].get(STAGE)

    for kill, shards in (("extract:shard:1", 2), ("rename:winobias.parquet", 3)):
        res = run(["dvc", "repro", "-s", STAGE], repo, check=False, env={"GECE_KILL_AT": kill})
        assert res.returncode != 0
        assert lock_entry() is None and not (repo / STAGE_OUT / "winobias.parquet").exists()
        assert len(_shards(repo, STAGE_SHARDS)) == shards  # kept for the next run, whatever DVC removed
        assert STAGE in run(["dvc", "status", STAGE], repo).stdout  # still to be run

    run(["dvc", "repro", "-s", STAGE], repo)
    timing = json.loads((repo / STAGE_OUT / "winobias.timing.json").read_text())
    assert timing["shards_resumed"] == 3 and not (repo / STAGE_SHARDS).parent.exists()
    (out,) = lock_entry()["outs"]
    assert out["path"] == STAGE_OUT and out["md5"].endswith(".dir")
    assert "up to date" in run(["dvc", "status", STAGE], repo).stdout
    _extract(repo, "artifacts/reference/m.parquet")  # the same settings, never interrupted
    assert (repo / STAGE_OUT / "winobias.parquet").read_bytes() == (repo / "artifacts/reference/m.parquet").read_bytes()
