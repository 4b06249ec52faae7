"""docs/lmeval.md, followed: its walkthrough (one registry entry with ``engine: lm-eval`` for smollm2-135m, HF
backend, named in ``lmeval_runs``, then ``dvc repro`` and ``dvc metrics diff``) on a temporary copy of the
repository, where lm-eval runs for real on the CPU.

The blocks are read from the page itself (a fenced block after a ``<!-- walkthrough -->`` line: ``yaml`` is merged
into the copy's params.yaml, ``bash`` is run with bash in the copy), so the page and this test cannot drift. The
copy is a slice: one benchmark per rule (WinoBias under ``target``, CrowS-Pairs under ``sentence``, ``shared`` and
``mean``), smollm2-135m, 12 pairs each (the entry's ``limit``, and ``extract.limit`` for gece's own run), no authors'
runs, no ``neutral`` stage; its committed dvc.lock is removed and its reports/ are the committed ones, the HEAD
that ``dvc metrics diff`` compares with.

Then the lm-eval run is checked against gece's exact run of the same model, built by the same ``dvc repro``,
straight from the two score files (and the compare stage's agreement report, ``checked_against``, against
that): lm-eval sums float32 log-probabilities, gece correctly rounded float64 ones;
the tolerance (docs/lmeval.md "Tolerance") is |Δ(logprob_more − logprob_less)| ≤ 1e-3 per pair.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from ..conftest import ROOT
from .conftest import DVC_ENV, copy_repo, git, ran, run

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "lmeval.md"
BENCHMARKS = ("winobias", "crows_pairs", "crows_pairs_shared", "crows_pairs_mean")  # target, sentence, shared, mean
MODEL, RUN = "smollm2-135m", "smollm2-135m-harness"
N = 12  # the entry's limit
TOLERANCE = 1e-3  # in a pair's log-likelihood difference


def walkthrough() -> list[tuple[str, str]]:
    """The page's walkthrough blocks, in order: (language, text)."""
    blocks = re.findall(r"<!-- walkthrough -->\n```(\w+)\n(.*?)\n```", PAGE.read_text(encoding="utf-8"), re.S)
    assert [lang for lang, _ in blocks] == ["yaml", "bash"], "the page's steps changed"
    return blocks


def slice_repo(repo) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    crows = params["benchmarks"]["crows_pairs"]
    params["benchmarks"] = {b: e for b, e in params["benchmarks"].items() if b in BENCHMARKS}
    params["benchmarks"]["crows_pairs_mean"] = crows | {"rule": "mean"}  # the mean rule's variant
    params["models"], params["references"] = [MODEL], []
    params["ablate"] |= {"special_tokens": {}, "prompts": {}, "sizes": [5, 10], "draws": 20}
    params["extract"]["limit"] = N
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    pipeline = yaml.safe_load((repo / "dvc.yaml").read_text())
    del pipeline["stages"]["neutral"]  # it compares GenderLex with its rewrites, which the slice has not
    (repo / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    git(repo, "rm", "-q", "dvc.lock")
    git(repo, "commit", "-qam", "the slice")


def test_one_entry_then_dvc_repro_scores_through_lm_eval(tmp_path, data_dir):
    import resource

    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    (entry, commands) = walkthrough()
    repo = copy_repo(tmp_path / "repo", data_dir)
    slice_repo(repo)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    added = yaml.safe_load(entry[1])
    assert added["registry"][RUN]["limit"] == N and added["lmeval_runs"] == [RUN]
    assert added["registry"][RUN]["checked_against"] == MODEL
    params["registry"] |= added["registry"]
    params["lmeval_runs"] = added["lmeval_runs"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    out = run(["bash", "-euo", "pipefail", "-c", commands[1]], repo, env=DVC_ENV).stdout
    stages = ran(out)
    assert {f"lmeval@{b}-{RUN}" for b in BENCHMARKS} <= set(stages), stages
    assert not [s for s in stages if s.startswith(("extract@", "score@")) and RUN in s], stages  # no token files
    for b in BENCHMARKS:  # dvc metrics diff: the run's metrics are new (HEAD has none)
        assert re.search(rf"^reports/summary\.json\s+runs\.{b}\.{re.escape(RUN)}\.n\s+-\s+\d", out, re.M), out
        assert len(list((repo / "lmeval/runs" / RUN / b).rglob(f"samples_gece_{b}_*.jsonl"))) == 1, b
    summary = json.loads((repo / "reports/summary.json").read_text())
    assert {b for b in BENCHMARKS if RUN in summary["runs"][b]} == set(BENCHMARKS)
    page = (repo / "reports/index.html").read_text(encoding="utf-8")
    assert f"{RUN}: lm-eval runs" in page and "Engine agreement" in page
    assert "up to date" in run(["dvc", "status"], repo, env=DVC_ENV).stdout  # nothing left to run

    # agreement with gece's exact run, from the two score files alone
    for b in BENCHMARKS:
        ours = pd.read_parquet(repo / f"artifacts/scores/{b}/{MODEL}.parquet").set_index("pair_id")
        theirs = pd.read_parquet(repo / f"artifacts/scores/{b}/{RUN}.parquet").set_index("pair_id")
        record = json.loads((repo / "lmeval/runs" / RUN / b / "export.json").read_text())
        left_out = {e["pair_id"] for e in record["excluded"]}
        assert record["pairs_prepared"] == N and set(theirs.index) == set(ours.index) - left_out, b
        assert len(theirs) >= N - 5, b
        ours = ours.loc[theirs.index]
        d_ours = (ours["logprob_more"] - ours["logprob_less"]).to_numpy()
        d_theirs = (theirs["logprob_more"] - theirs["logprob_less"]).to_numpy()
        print(f"\n[agreement] {b}: {len(theirs)} pairs, max |Δ difference| {np.abs(d_ours - d_theirs).max():.2e}")
        assert np.abs(d_ours - d_theirs).max() <= TOLERANCE, b
        reported = summary["agreement"][b][RUN]  # the compare stage's agreement report, recomputed here
        assert reported["n"] == len(theirs) and reported["max_abs_lld_diff"] == pytest.approx(
            np.abs(d_ours - d_theirs).max(), rel=1e-9, abs=1e-12
        ), b
        flips = int(((ours["p"].to_numpy() > 0.5) != (theirs["p"].to_numpy() > 0.5)).sum())
        assert reported["flips"] == flips, b
        agree = (ours["p"].to_numpy() > 0.5) == (theirs["p"].to_numpy() > 0.5)
        assert (agree | (np.abs(d_ours) <= TOLERANCE)).all(), b
        meta = json.loads((repo / f"artifacts/scores/{b}/{RUN}.meta.json").read_text())
        assert meta["backend"] == "hf" and meta["dtype"] == "float32" and meta["pairs_scored"] == len(theirs)
        assert len(meta["unscored"]) == meta["pairs_prepared"] - len(theirs), b
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    print(f"\n[timing] the lm-eval walkthrough: {cpu_s:.1f} s of CPU")
