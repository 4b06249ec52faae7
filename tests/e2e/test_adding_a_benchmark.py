"""docs/benchmarks.md, followed: its walkthrough blocks run in order on a temporary copy of the repository.

The blocks are read from the page itself (a fenced block after a ``<!-- walkthrough -->`` line: ``bash`` is run
with bash in the copy, ``yaml`` is merged into its params.yaml), so the page and this test cannot drift. The
copy is a slice (WinoBias beside the new benchmark, smollm2-135m, the authors' GPT-J scores, 12 pairs per
benchmark, the extract stage run first as the "before"); its remote is a temporary folder in place of
the page's ``/path/to/my-dvc-store``. After each step the test checks what the page says it does.
"""

from __future__ import annotations

import re

import pytest
import yaml

from ..conftest import ROOT
from .conftest import DVC_ENV, copy_repo, git, ran, run

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "benchmarks.md"
MODEL = "smollm2-135m"
NEW = "my_bench"
LIMIT = 12


def walkthrough() -> list[tuple[str, str]]:
    """The page's walkthrough blocks, in order: (language, text)."""
    blocks = re.findall(r"<!-- walkthrough -->\n```(\w+)\n(.*?)\n```", PAGE.read_text(encoding="utf-8"), re.S)
    assert [lang for lang, _ in blocks] == ["bash", "yaml", "bash", "bash", "bash", "bash"], "the page's steps changed"
    return blocks


def stale(repo) -> set[str]:
    """The stages `dvc status` lists (what a full dvc repro would run)."""
    out = run(["dvc", "status"], repo, env=DVC_ENV).stdout
    return {m.group(1) for m in re.finditer(r"^(\S[^\n]*?):\s*$", out, re.M)}


def test_the_page_adds_a_benchmark_and_takes_it_back(tmp_path, data_dir):
    import resource

    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    steps = walkthrough()
    repo = copy_repo(tmp_path / "repo", data_dir)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["benchmarks"] = {"winobias": {}}
    params["models"], params["references"] = [MODEL], ["paper-gpt-j-6b"]
    params["ablate"]["special_tokens"] = {}
    params["ablate"]["prompts"] = {}
    params["extract"]["limit"] = LIMIT
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git(repo, "rm", "-q", "dvc.lock")  # the slice's own lock: what its cache holds (as after a dvc pull)
    run(["dvc", "repro", f"extract@{MODEL}"], repo, env=DVC_ENV)  # the last recorded run of extract
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before")
    before = {p: (repo / p).read_bytes() for p in ("params.yaml", "dvc.lock", "data.dvc")}
    tokens = repo / "artifacts" / "tokens" / MODEL
    winobias_tokens = (tokens / "winobias.parquet").read_bytes()
    stale_before = stale(repo)

    def bash(i: int, check: bool = True):
        script = steps[i][1].replace("/path/to/my-dvc-store", str(tmp_path / "my-dvc-store"))
        res = run(["bash", "-euo", "pipefail", "-c", script], repo, check=check, env=DVC_ENV)
        return res.stdout if check else res

    # 1. the data, checked
    out = bash(0)
    assert "valid" in out and f"{LIMIT} pairs" in " ".join(out.split())
    # 2. the entry
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["benchmarks"] |= yaml.safe_load(steps[1][1])["benchmarks"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # 3. what re-runs: the new benchmark's stages, each model's extract scoring it alone, the other prepare stages
    out = bash(2)
    assert sorted(ran(out)) == sorted(
        [f"prepare@{NEW}", "prepare@winobias", f"extract@{MODEL}", f"score@{NEW}-{MODEL}", f"metrics@{NEW}"]
    )
    assert f"scored 1 benchmark with {MODEL}" in out and "reused 1" in out
    assert (tokens / "winobias.parquet").read_bytes() == winobias_tokens  # reused, byte for byte
    assert sorted(p.name for p in tokens.glob("*.timing.json")) == [f"{NEW}.timing.json"]
    assert (repo / "reports" / "metrics" / NEW / f"{MODEL}.json").is_file()
    assert not (repo / "reports" / "metrics" / NEW / "paper-gpt-j-6b.json").exists()  # no released scores
    new_stale = stale(repo) - stale_before
    assert new_stale == {f"{s}@{NEW}" for s in ("annotate", "calibrate", "ablate", "compare", "groups")}, new_stale
    # 4. a remote of one's own, the snapshot with the new file, pushed
    out = bash(3)
    assert (tmp_path / "my-dvc-store").is_dir() and any((tmp_path / "my-dvc-store").rglob("*"))
    cloud = run(["dvc", "status", "--cloud"], repo, env=DVC_ENV).stdout
    assert "new:" not in cloud and "data" not in cloud, cloud  # what the cache holds is on the remote
    assert (repo / "data.dvc").read_bytes() != before["data.dvc"]
    # 5. committed
    bash(4)
    assert "benchmark my_bench" in git(repo, "log", "-1", "--format=%s").stdout
    assert not git(repo, "diff", "HEAD", "--name-only", "--", "params.yaml", "dvc.lock", "data.dvc").stdout.strip()
    # 6. undone: the parameters, lock and snapshot of before, and data/ without the new file
    res = bash(5, check=False)
    # dvc checkout restores every output dvc.lock records; the slice never ran most stages (no entry in its lock),
    # and those, only those, it reports as missing: in a repository where `dvc repro` ran, it succeeds
    missing = set(re.findall(r"^(artifacts/\S+|reports/\S+)$", res.stderr.split("Checkout failed")[-1], re.M))
    stages = yaml.safe_load((repo / "dvc.lock").read_text())["stages"].values()
    locked = {o["path"] for st in stages for o in st["outs"]}
    assert res.returncode == 0 or (missing and not missing & locked), res.stderr
    assert {p: (repo / p).read_bytes() for p in before} == before
    assert not (repo / "data" / "benchmarks" / f"{NEW}.csv").exists()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\n[timing] the walkthrough: {cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime:.1f} s of CPU")
