"""What the last recorded run of a stage wrote, found in dvc.lock and the DVC cache (gece.pipeline.reuse): offered
whatever changed since (the token files' fingerprints decide), and only the files the cache holds."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gece.pipeline import reuse

DVC = str(Path(sys.executable).parent / "dvc")
OUT = "artifacts/tokens/m"


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _put(cache: Path, data: bytes, name: str | None = None) -> str:
    """Store ``data`` as a DVC 3 cache object; returns its hash (``name`` for a .dir manifest)."""
    md5 = name or _md5(data)
    obj = cache / "files" / "md5" / md5[:2] / md5[2:]
    obj.parent.mkdir(parents=True, exist_ok=True)
    obj.write_bytes(data)
    return md5


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A DVC repository whose dvc.lock records a run of stage extract@m: one code dep, the prepared folder, and the
    folder it wrote (two files, both in the cache), as `dvc repro` leaves them."""
    monkeypatch.chdir(tmp_path)
    subprocess.run([DVC, "init", "--no-scm", "-q"], check=True)
    code = Path("src/x.py")
    code.parent.mkdir()
    code.write_text("print('the stage')\n")
    cache = Path(".dvc/cache")
    files = {"a.parquet": b"tokens of a", "a.meta.json": b"{}"}
    manifest = json.dumps([{"md5": _put(cache, data), "relpath": name} for name, data in sorted(files.items())])
    folder = _put(cache, manifest.encode(), _md5(manifest.encode()) + ".dir")
    lock = {
        "schema": "2.0",
        "stages": {
            "extract@m": {
                "cmd": "gece extract --model m",
                "deps": [
                    {"path": "artifacts/prepared", "hash": "md5", "md5": "0" * 32 + ".dir"},
                    {"path": str(code), "hash": "md5", "md5": _md5(code.read_bytes())},
                ],
                "outs": [{"path": OUT, "hash": "md5", "md5": folder}],
            }
        },
    }
    Path("dvc.lock").write_text(yaml.safe_dump(lock))
    return tmp_path


def test_the_recorded_files_are_offered_from_the_cache(repo):
    found = reuse.previous_outputs(OUT)
    assert sorted(found) == ["a.meta.json", "a.parquet"]
    assert found["a.parquet"].read_bytes() == b"tokens of a"
    assert reuse.previous_outputs("artifacts/tokens/other") == {}  # no stage wrote it


def test_a_code_change_still_offers_the_files(repo):
    # whether a file still fits is its fingerprint's call (it holds the scoring code's hash), not the lock's deps
    before = reuse.previous_outputs(OUT)
    with Path("src/x.py").open("a") as f:
        f.write("x = 1\n")
    assert reuse.previous_outputs(OUT) == before != {}


def test_only_what_the_cache_holds_is_offered(repo):
    obj = next(p for p in Path(".dvc/cache/files/md5").rglob("*") if p.is_file() and p.read_bytes() == b"{}")
    obj.unlink()  # e.g. a clone that pulled part of the remote
    assert sorted(reuse.previous_outputs(OUT)) == ["a.parquet"]


def test_no_lock_or_no_dvc_offers_nothing(repo, tmp_path, monkeypatch):
    Path("dvc.lock").unlink()
    assert reuse.previous_outputs(OUT) == {}
    bare = tmp_path / "bare"
    bare.mkdir()
    monkeypatch.chdir(bare)
    Path("dvc.lock").write_text((repo / "src/x.py").read_text())  # not a lock at all
    assert reuse.previous_outputs(OUT) == {}
