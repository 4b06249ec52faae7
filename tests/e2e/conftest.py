"""A throw-away copy of the repository for pipeline runs (git repo, own DVC cache, data copied in)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ..conftest import ROOT, SLICE_MODULES

BIN = Path(sys.executable).parent


def run(
    cmd: list[str], cwd: Path, check: bool = True, timeout: int = 1800, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    full = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1", **(env or {})}
    res = subprocess.run(cmd, check=False, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run(["git", "-c", "user.name=gece-test", "-c", "user.email=test@gece", *args], repo)


def copy_repo(dest: Path, data_dir: Path) -> Path:
    """The working tree's tracked and unignored files, committed in a fresh git repo at ``dest``,
    with data/ and a DVC cache of its own (``<dest>-dvc-cache``)."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    shutil.copytree(data_dir, dest / "data")
    git(dest, "init", "-q")
    run(["dvc", "config", "--local", "cache.dir", str(dest.with_name(dest.name + "-dvc-cache"))], dest)
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "copy")
    return dest


@pytest.fixture
def repo_copy(tmp_path, data_dir) -> Path:
    """A throw-away copy of the repository (see :func:`copy_repo`)."""
    return copy_repo(tmp_path / "repo", data_dir)


# ------------------------------------------------------------------------------ the slice
# the slice's benchmarks: one of each kind (native with the target rule and released scores: winobias;
# imported, scored by the sentence rule: crows_pairs) and the three the neutral ablation compares. winogender
# and winoqueer are left out: the same code paths as winobias and crows_pairs, and 16 stages less per run
BENCHMARKS = ("winobias", "genderlex", "genderlex_person", "genderlex_someone", "crows_pairs")
DVC_ENV = {"DVC_NO_ANALYTICS": "1"}


def slice_params(repo: Path) -> None:
    """The slice: :data:`BENCHMARKS`, smollm2-135m and the authors' GPT-J scores, 40 pairs per benchmark, small
    ablations."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["benchmarks"] = {b: e for b, e in params["benchmarks"].items() if b in BENCHMARKS}
    params["models"] = ["smollm2-135m"]
    params["ablate"]["special_tokens"] = {}  # its models must be in models
    params["ablate"]["prompts"] = {}
    params["ablate"]["sizes"] = [10, 20]
    params["ablate"]["draws"] = 20
    params["references"] = ["paper-gpt-j-6b"]  # the released scores of one model (every benchmark it has)
    params["extract"]["limit"] = 40
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def outputs(repo: Path) -> dict[str, str]:
    """sha256 of every file under artifacts/ and reports/ (run timings are no DVC output)."""
    files = [p for d in ("artifacts", "reports") for p in (repo / d).rglob("*") if p.is_file()]
    return {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if not p.name.endswith(".timing.json")
    }


def ran(out: str) -> list[str]:
    """The stages a `dvc repro` output says it ran."""
    return re.findall(r"Running stage '([^']+)'", out)


@dataclass
class Origin:
    repo: Path  # A: the sliced pipeline, run once
    cache: Path  # A's DVC cache
    remote: Path  # the temporary default remote A pushed to (with --run-cache)
    no_lock: str  # commit with the sliced params.yaml and the remote, no dvc.lock, no results
    with_lock: str  # the next commit: dvc.lock and reports/ added
    outputs: dict[str, str]  # sha256 of every file under artifacts/ and reports/
    lock: bytes
    seconds: float  # A's dvc repro
    ran: list[str]  # the stages it ran


def pytest_collection_modifyitems(config, items):
    """A test that uses the slice outside :data:`SLICE_MODULES` would run it again in another worker."""
    stray = sorted({it.nodeid.split("::")[0] for it in items if "slice_origin" in it.fixturenames} - set(SLICE_MODULES))
    if stray:
        raise pytest.UsageError(f"{', '.join(stray)} use slice_origin: add them to SLICE_MODULES in tests/conftest.py")


@pytest.fixture(scope="session")
def slice_origin(tmp_path_factory, data_dir) -> Origin:
    """Repository A, shared by the e2e tests that start from a run slice (test_scale, test_repro): the slice
    committed without results, `dvc repro` from scratch, `dvc push --run-cache` to a temporary default
    remote, then dvc.lock and reports/ committed. Tests may add remotes to it, not change its files."""
    root = tmp_path_factory.mktemp("slice")
    a = copy_repo(root / "a", data_dir)
    slice_params(a)
    for p in ("artifacts", "reports", "dvc.lock"):
        run(["git", "rm", "-rq", "--ignore-unmatch", p], a)
    remote = root / "remote"
    run(["dvc", "remote", "add", "-d", "tmp", str(remote)], a)
    git(a, "commit", "-qam", "slice, temporary remote")
    no_lock = git(a, "rev-parse", "HEAD").stdout.strip()

    t0 = time.perf_counter()
    res = run(["dvc", "repro"], a, env=DVC_ENV)
    seconds = time.perf_counter() - t0
    pushed = run(["dvc", "push", "--run-cache"], a, env=DVC_ENV)
    assert re.search(r"\d+ files pushed", pushed.stdout), pushed.stdout
    git(a, "add", "-A")
    git(a, "commit", "-qm", "results")
    print(f"\n[timing] A: dvc repro of the slice from scratch {seconds:.1f} s")
    return Origin(
        a,
        root / "a-dvc-cache",
        remote,
        no_lock,
        git(a, "rev-parse", "HEAD").stdout.strip(),
        outputs(a),
        (a / "dvc.lock").read_bytes(),
        seconds,
        ran(res.stdout),
    )
