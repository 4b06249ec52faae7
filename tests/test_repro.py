"""``gece repro`` on a two-stage DVC project of its own (a -> b, both outputs cached): what it pulls
from the default remote, what it runs, and the account it prints. The real pipeline, sliced:
tests/e2e/test_repro.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gece.base.errors import GeceError
from gece.tools import repro

BIN = Path(sys.executable).parent
DVC_YAML = f"""stages:
  a:
    cmd: {sys.executable} -c "import pathlib; pathlib.Path('a.txt').write_text(pathlib.Path('in.txt').read_text() * 2)"
    deps: [in.txt]
    outs: [a.txt]
  b:
    cmd: {sys.executable} -c "import pathlib as p; p.Path('b.txt').write_text(p.Path('a.txt').read_text().upper())"
    deps: [a.txt]
    outs: [b.txt]
"""


def sh(*cmd: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"{' '.join(cmd)}: {res.stdout}\n{res.stderr}"
    return res.stdout


def git(repo: Path, *args: str) -> str:
    return sh("git", "-c", "user.name=gece-test", "-c", "user.email=test@gece", *args, cwd=repo)


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> tuple[Path, str]:
    """The project run once (its cache holds a, b and their run-cache entries); returns the repo and
    the commit without dvc.lock (HEAD has it)."""
    root = tmp_path_factory.mktemp("repro") / "origin"
    root.mkdir()
    git(root, "init", "-q")
    sh("dvc", "init", "-q", cwd=root)
    (root / "in.txt").write_text("gece\n")
    (root / "dvc.yaml").write_text(DVC_YAML)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "no lock")
    no_lock = git(root, "rev-parse", "HEAD").strip()
    sh("dvc", "repro", cwd=root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "lock")
    return root, no_lock


def push(origin: Path, remote: Path, *targets: str, run_cache: bool = False) -> Path:
    remote.mkdir()
    sh("dvc", "remote", "add", "--local", "-f", "push-to", str(remote), cwd=origin)
    sh("dvc", "push", "-r", "push-to", *(["--run-cache"] if run_cache else []), *targets, cwd=origin)
    return remote


def clone(origin: Path, dest: Path, remote: Path, rev: str | None = None) -> Path:
    sh("git", "clone", "-q", str(origin), str(dest), cwd=dest.parent)
    if rev:
        git(dest, "checkout", "-q", rev)
    sh("dvc", "config", "--local", "cache.dir", str(dest.with_name(dest.name + "-cache")), cwd=dest)
    sh("dvc", "remote", "add", "-d", "--local", "tmp", str(remote), cwd=dest)
    return dest


def test_pulls_what_the_remote_holds_and_runs_only_the_rest(origin, tmp_path, capsys, monkeypatch):
    repo, _ = origin
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    remote = push(repo, tmp_path / "remote", "a", run_cache=True)  # a's output and every run-cache entry
    c = clone(repo, tmp_path / "c", remote)
    assert not (c / "a.txt").exists() and not (c / "b.txt").exists()

    account = repro.repro(c)
    assert (account.pulled, account.restored, account.ran) == (["a"], [], ["b"])
    out = capsys.readouterr().out
    assert "gece repro: pulled 1, ran 1\n" in out
    assert f"2 stages: 1 pulled from DVC remote 'tmp' ({remote})" in out
    assert "the remote lacked 1 cache files" in out and "md5:" not in out  # b.txt: counted, not listed
    assert (c / "b.txt").read_text() == (repo / "b.txt").read_text() == "GECE\nGECE\n"
    assert (c / "dvc.lock").read_text() == (repo / "dvc.lock").read_text()

    again = repro.repro(c)  # idempotent: everything is in place
    assert (again.pulled, again.ran) == ([], [])
    assert "gece repro: pulled 0, ran 0\n" in capsys.readouterr().out


def test_a_remote_with_everything_runs_nothing(origin, tmp_path, monkeypatch):
    repo, _ = origin
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    c = clone(repo, tmp_path / "c", push(repo, tmp_path / "remote"))
    account = repro.repro(c, quiet=True)
    assert (sorted(account.pulled), account.ran, account.line()) == (["a", "b"], [], "pulled 2, ran 0")
    assert (c / "b.txt").read_text() == "GECE\nGECE\n"


def test_without_a_lock_the_run_cache_restores_the_stages(origin, tmp_path, capsys, monkeypatch):
    repo, no_lock = origin
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    c = clone(repo, tmp_path / "c", push(repo, tmp_path / "remote", run_cache=True), rev=no_lock)
    assert not (c / "dvc.lock").exists()
    account = repro.repro(c)
    assert (account.pulled, sorted(account.restored), account.ran) == ([], ["a", "b"], [])
    assert "gece repro: pulled 2, ran 0\n" in capsys.readouterr().out
    assert (c / "b.txt").read_text() == "GECE\nGECE\n"
    assert (c / "dvc.lock").read_text() == (repo / "dvc.lock").read_text()


def test_an_unreachable_remote_is_named_and_the_run_goes_on(origin, tmp_path, capsys, monkeypatch):
    repo, _ = origin
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    gone = push(repo, tmp_path / "gone", run_cache=True)
    c = clone(repo, tmp_path / "c", gone)
    shutil.rmtree(gone)
    account = repro.repro(c)
    captured = capsys.readouterr()
    assert f"DVC remote 'tmp' ({gone}) is not reachable" in captured.err and "going on without it" in captured.err
    assert (account.pulled, account.ran, account.remote) == ([], ["a", "b"], None)
    assert "gece repro: pulled 0, ran 2\n" in captured.out and "nothing pulled (no usable remote)" in captured.out
    assert (c / "b.txt").read_text() == "GECE\nGECE\n"


def test_a_failing_stage_is_an_error_after_the_account(origin, tmp_path, capsys, monkeypatch):
    repo, _ = origin
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    c = clone(repo, tmp_path / "c", push(repo, tmp_path / "remote", "a"))
    (c / "dvc.yaml").write_text(DVC_YAML.replace(".upper()", ".no_such_method()"))
    with pytest.raises(GeceError, match=r"dvc repro failed \(exit \d+\)") as e:
        repro.repro(c)
    assert e.value.problems == ["the last stage started: b"]
    assert "gece repro: pulled 1, ran 1\n" in capsys.readouterr().out
