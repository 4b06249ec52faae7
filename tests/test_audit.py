"""The audit of what commands read and write (tests/audit.py) fails on what a command does undeclared: a command
made to write outside its declared outputs, by every kind of call the audit watches and through a subprocess, is
named; the writes gece's own writers make for a declared output pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gece.cli import main
from gece.io.files.outputs import write_text

from . import audit


@pytest.fixture
def summary_tree(tmp_path, monkeypatch):
    """A folder where ``gece summary --out out.json`` declares one output, out.json; its ``run`` is replaced."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("benchmarks: {}\n")
    return tmp_path


def run_as_summary(monkeypatch, body) -> int:
    """``gece summary --out out.json`` whose run is ``body()``: the command's declarations, another command's work."""
    from gece.pipeline import summary

    def run(args):
        body()
        return 0

    monkeypatch.setattr(summary, "run", run)
    return main(["-q", "summary", "--out", "out.json"])


def test_declared_writes_pass(summary_tree, monkeypatch):
    """An atomic write of the declared file (a temporary file beside it, renamed over it) is no finding."""
    assert run_as_summary(monkeypatch, lambda: write_text("out.json", "{}\n")) == 0
    assert audit.undeclared() == []


@pytest.mark.parametrize(
    "how",
    ["open", "replace", "remove", "rmtree", "symlink", "mkdir", "through a link", "subprocess", "native"],
)
def test_an_undeclared_write_fails_the_audit(summary_tree, monkeypatch, how):
    """The deliberately undeclared write of each kind: the audit names the command, the kind and the real path."""
    root = summary_tree
    (root / "kept.txt").write_text("the user's\n")
    (root / "folder").mkdir()
    (root / "elsewhere").mkdir()
    (root / "link").symlink_to(root / "elsewhere")
    stray = {
        "open": root / "stray.txt",
        "replace": root / "kept.txt",
        "remove": root / "kept.txt",
        "rmtree": root / "folder",
        "symlink": root / "stray-link",
        "mkdir": root / "new-folder",
        "through a link": root / "elsewhere" / "x.txt",
        "subprocess": root / "by-a-child.txt",
        "native": root / "stray.parquet",
    }[how]

    def native():
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"x": [1]}), str(stray))  # Arrow's C++ opens it: no audit event, the listing sees it

    body = {
        "open": lambda: stray.write_text("x"),
        "replace": lambda: (write_text(root / "tmp.txt", "x"), os.replace(root / "tmp.txt", stray)),
        "remove": lambda: os.remove(stray),
        "rmtree": lambda: shutil.rmtree(stray),
        "symlink": lambda: os.symlink("kept.txt", stray),
        "mkdir": lambda: stray.mkdir(),
        "through a link": lambda: (root / "link" / "x.txt").write_text("x"),
        "subprocess": lambda: subprocess.run([sys.executable, "-c", f"open({str(stray)!r}, 'w')"], check=True),
        "native": native,
    }[how]
    assert run_as_summary(monkeypatch, body) == 0
    found = audit.undeclared()
    assert f"gece summary wrote {stray}" in found, found
    assert all(Path(line.split(" wrote ")[1]) != root / "out.json" for line in found if " wrote " in line)
