"""`gece repro` (what `make repro` runs) on a fresh clone, with the 40-pair slice of
tests/e2e/test_pipeline_determinism.py: the clone's default remote is a temporary one that holds
the data snapshot, the prepared benchmarks and the scores (and the run cache), but no other stage's
outputs. `gece repro` pulls those, runs only the stages whose outputs the remote lacked (never a
model), says so in its account, and ends with the same bytes as the run that pushed them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from .conftest import BENCHMARKS, outputs, run

pytestmark = pytest.mark.slow

ENV = {"DVC_NO_ANALYTICS": "1"}


def _cached_stages(repo: Path) -> set[str]:
    """The stages (and .dvc files) with at least one cached output, as DVC reads the project."""
    code = (
        "from dvc.repo import Repo\n"
        "with Repo('.') as r:\n"
        "    print('\\n'.join(s.addressing for s in r.index.stages if any(o.use_cache for o in s.outs)))"
    )
    return set(run(["python", "-c", code], repo, env=ENV).stdout.split())


@pytest.fixture
def origin(slice_origin) -> Path:
    """The slice run from scratch and committed with its dvc.lock (its own DVC cache, run cache included):
    the shared slice of tests/e2e/conftest.py; this test pushes part of it to a remote of its own."""
    return slice_origin.repo


def test_a_fresh_clone_pulls_what_the_remote_holds_and_runs_the_rest(origin, tmp_path):
    lock = (origin / "dvc.lock").read_text()
    pushed = ["data.dvc", *sorted(set(re.findall(r"^  ((?:prepare|extract|score)@[^:]+):$", lock, re.MULTILINE)))]
    assert len(pushed) == 1 + 1 + 2 * len(BENCHMARKS)  # the snapshot, the model's tokens, prepared and scores
    remote = tmp_path / "remote"
    run(["dvc", "remote", "add", "--local", "part", str(remote)], origin)
    run(["dvc", "push", "-r", "part", "--run-cache", *pushed], origin, env=ENV)

    c = tmp_path / "clone"
    run(["git", "clone", "-q", str(origin), str(c)], tmp_path)
    run(["dvc", "config", "--local", "cache.dir", str(tmp_path / "clone-dvc-cache")], c)
    run(["dvc", "remote", "add", "-d", "--local", "part", str(remote)], c)
    assert not (c / "data").exists() and not (c / "artifacts").exists()
    lacked = _cached_stages(c) - set(pushed)  # cached outputs not on the remote: the reports DVC caches, calibrated
    assert lacked and not any(s.startswith(("extract@", "score@")) for s in lacked)

    t0 = time.perf_counter()
    res = run(["gece", "repro"], c, env=ENV)
    print(f"\n[timing] gece repro on the clone: {time.perf_counter() - t0:.1f} s")
    ran = re.findall(r"^Running stage '([^']+)'", res.stdout, re.MULTILINE)
    assert sorted(ran) == sorted(lacked)  # only what the remote lacked; no model ran
    assert f"gece repro: pulled {len(pushed)}, ran {len(lacked)}\n" in res.stdout
    assert f"pulled from DVC remote 'part' ({remote})" in res.stdout
    assert "md5:" not in res.stdout  # the remote's missing files are counted, not listed

    assert outputs(c) == outputs(origin)
    assert (c / "dvc.lock").read_text() == lock
    assert "gece repro: pulled 0, ran 0" in run(["gece", "repro"], c, env=ENV).stdout  # idempotent
