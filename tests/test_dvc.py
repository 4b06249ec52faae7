"""The DVC set-up: data.dvc points at the snapshot in the remote and `dvc pull` restores it exactly."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gece.cli import main

from .conftest import ROOT, SHARED

DVC = str(Path(sys.executable).with_name("dvc"))


def test_data_dvc_points_at_snapshot():
    out = yaml.safe_load((ROOT / "data.dvc").read_text())["outs"][0]
    assert out["md5"] == "e441f0f4ad686cedfc84f4e68a47cf05.dir" and out["nfiles"] == 50 and out["path"] == "data"
    config = (ROOT / ".dvc" / "config").read_text()
    assert "remote = origin" in config and "url = ../../shared/dvc-store" in config


def _same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(_same_tree(a / d, b / d) for d in cmp.common_dirs)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A checkout with data.dvc and .dvc/ (no data/) and ../shared beside it; a DVC cache of its own,
    so a pull really reads the remote."""
    if not (SHARED / "dvc-store").is_dir():
        pytest.fail("../shared/dvc-store is missing: the checkout needs ../shared beside it")
    repo = tmp_path / "repo"  # .dvc/config says ../../shared/dvc-store
    repo.mkdir(parents=True)
    (tmp_path / "shared").symlink_to(SHARED)
    for f in ("data.dvc", ".dvcignore"):
        shutil.copy(ROOT / f, repo / f)
    shutil.copytree(ROOT / ".dvc", repo / ".dvc", ignore=shutil.ignore_patterns("cache", "tmp", "config.local"))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([DVC, "config", "--local", "cache.dir", str(tmp_path / "cache")], cwd=repo, check=True)
    return repo


def test_dvc_pull_restores_data_byte_identically(checkout):
    res = subprocess.run([DVC, "pull", "data.dvc"], cwd=checkout, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert _same_tree(checkout / "data", SHARED / "data")
    nfiles = yaml.safe_load((ROOT / "data.dvc").read_text())["outs"][0]["nfiles"]
    assert sum(1 for p in (checkout / "data").rglob("*") if p.is_file()) == nfiles


def test_gece_pull_restores_data(checkout, monkeypatch, capsys):
    monkeypatch.chdir(checkout)
    assert main(["-q", "pull"]) == 0, capsys.readouterr().err
    assert _same_tree(checkout / "data", SHARED / "data")
    assert main(["pull"]) == 0  # again: nothing to do
    assert "pulled data.dvc from DVC remote origin" in capsys.readouterr().out
