"""A throw-away copy of the repository for pipeline runs (git repo, own DVC cache, data copied in)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path, check: bool = True, timeout: int = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run(["git", "-c", "user.name=gece-test", "-c", "user.email=test@gece", *args], repo)


@pytest.fixture
def repo_copy(tmp_path, data_dir) -> Path:
    """The working tree's tracked and unignored files, committed in a fresh git repo, with data/."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    repo = tmp_path / "repo"
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / f)
    shutil.copytree(data_dir, repo / "data")
    git(repo, "init", "-q")
    run(["dvc", "config", "--local", "cache.dir", str(tmp_path / "dvc-cache")], repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "copy")
    return repo
