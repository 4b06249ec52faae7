"""docs/lmeval.md, followed: its walkthrough blocks (gece lmeval-export for smollm2-135m, ``lm_eval`` with the HF
backend on the CPU per task, the registry entry, ``dvc add`` of the lm-eval output, one ``dvc stage add`` import
per benchmark, ``dvc repro``, ``dvc metrics diff``) run in order on a temporary copy of the repository.

The blocks are read from the page itself (a fenced block after a ``<!-- walkthrough -->`` line: ``bash`` is run
with bash in the copy, ``yaml`` is merged into its params.yaml), so the page and this test cannot drift. The copy
is a slice: WinoBias under ``target``, CrowS-Pairs under ``sentence`` and ``shared``, smollm2-135m, 12 pairs per
benchmark, no authors' runs, no ``neutral`` stage (GenderLex is not in it); its committed dvc.lock is removed
(the slice's own lock is what its ``dvc repro`` writes) and its reports/ are the committed ones, the HEAD that
``dvc metrics diff`` compares with.

Then the imported p is checked against gece's own extract + score of the same pairs, which the same ``dvc repro``
built. lm-eval sums float32 log-probabilities; gece sums correctly rounded float64 ones. The tolerance
(docs/lmeval.md): |Δ(logprob_more − logprob_less)| ≤ 1e-3 per pair, so |Δp| ≤ 2.5e-4, and the two verdicts
(p > 0.5) agree except for a pair whose own difference lies within 1e-3 of 0.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from ..conftest import ROOT
from ..test_stage_deps import deps_report
from .conftest import DVC_ENV, copy_repo, git, ran, run

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "lmeval.md"
BENCHMARKS = ("winobias", "crows_pairs", "crows_pairs_shared")  # target, sentence, shared
MODEL, RUN = "smollm2-135m", "smollm2-135m-lmeval"
N = 12  # the page's --limit
TOLERANCE = 1e-3  # in a pair's log-likelihood difference


def walkthrough() -> list[tuple[str, str]]:
    """The page's walkthrough blocks, in order: (language, text)."""
    blocks = re.findall(r"<!-- walkthrough -->\n```(\w+)\n(.*?)\n```", PAGE.read_text(encoding="utf-8"), re.S)
    assert [lang for lang, _ in blocks] == ["bash", "yaml", "bash"], "the page's steps changed"
    return blocks


def test_the_page_runs_lm_eval_imports_and_reports_the_run(tmp_path, data_dir):
    import resource

    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    steps = walkthrough()
    assert f"--limit {N}" in steps[0][1]
    repo = copy_repo(tmp_path / "repo", data_dir)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["benchmarks"] = {b: e for b, e in params["benchmarks"].items() if b in BENCHMARKS}
    params["models"], params["references"] = [MODEL], []
    params["ablate"] |= {"special_tokens": {}, "sizes": [5, 10], "draws": 20}
    params["extract"]["limit"] = N
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    pipeline = yaml.safe_load((repo / "dvc.yaml").read_text())
    del pipeline["stages"]["neutral"]  # it compares GenderLex with its rewrites, which the slice has not
    (repo / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    git(repo, "rm", "-q", "dvc.lock")
    git(repo, "commit", "-qam", "the slice")

    def bash(i: int) -> str:
        return run(["bash", "-euo", "pipefail", "-c", steps[i][1]], repo, env=DVC_ENV).stdout

    # 1. export and lm_eval: one samples file per task
    bash(0)
    for b in BENCHMARKS:
        assert len(list((repo / "lmeval/out" / MODEL).rglob(f"samples_gece_{b}_[0-9]*.jsonl"))) == 1, b
    # 2. the registry entry
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["registry"] |= yaml.safe_load(steps[1][1])["registry"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # 3. the import stages, dvc repro, dvc metrics diff
    out = bash(2)
    assert {f"lmeval-import-{b}" for b in BENCHMARKS} <= set(ran(out)), ran(out)
    assert (repo / f"lmeval/out/{MODEL}.dvc").is_file()
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    for b in BENCHMARKS:
        deps = stages[f"lmeval-import-{b}"]["deps"]
        assert f"lmeval/out/{MODEL}" in deps and "src/gece" in deps, deps
    assert not deps_report(repo), deps_report(repo)  # the added stages' code dep passes tests/test_stage_deps.py
    for b in BENCHMARKS:  # dvc metrics diff: the run's metrics are new (HEAD has none)
        assert re.search(rf"^reports/summary\.json\s+runs\.{b}\.{re.escape(RUN)}\.n\s+-\s+\d", out, re.M), out
    summary = json.loads((repo / "reports/summary.json").read_text())
    assert {b for b in BENCHMARKS if RUN in summary["runs"][b]} == set(BENCHMARKS)
    page = (repo / "reports/index.html").read_text(encoding="utf-8")
    assert f"{RUN}: lm-eval runs" in page
    assert "up to date" in run(["dvc", "status"], repo, env=DVC_ENV).stdout  # nothing left to run

    # the imported p against gece's own scores of the same pairs (built by the same dvc repro)
    for b in BENCHMARKS:
        ours = pd.read_parquet(repo / f"artifacts/scores/{b}/{MODEL}.parquet").set_index("pair_id")
        theirs = pd.read_parquet(repo / f"artifacts/scores/{b}/{RUN}.parquet").set_index("pair_id")
        record = json.loads((repo / "lmeval/tasks" / f"gece_{b}" / "export.json").read_text())
        assert record["pairs_prepared"] == N
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
        meta = json.loads((repo / f"artifacts/scores/{b}/{RUN}.meta.json").read_text())
        assert meta["backend"] == "hf" and meta["dtype"] == "float32" and meta["pairs_scored"] == len(theirs)
        assert left_out <= set(meta["unscored"]) and not set(meta["unscored"]) & set(theirs.index), b
        assert len(meta["unscored"]) == meta["pairs_prepared"] - len(theirs), b
    assert "unscored" not in page  # the ids stay in the meta files; the page shows pairs_scored of pairs_prepared
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    print(f"\n[timing] the lm-eval walkthrough: {cpu_s:.1f} s of CPU")
