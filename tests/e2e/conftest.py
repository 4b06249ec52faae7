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


def run(cmd: list[str], cwd: Path, check: bool = True, timeout: int = 1800,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1", **(env or {})}
    res = subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run(["git", "-c", "user.name=gece-test", "-c", "user.email=test@gece", *args], repo)


def copy_repo(dest: Path, data_dir: Path) -> Path:
    """The working tree's tracked and unignored files, committed in a fresh git repo at ``dest``,
    with data/ and a DVC cache of its own (``<dest>-dvc-cache``)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
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
