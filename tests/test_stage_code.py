"""The manifests of stage-code/ (issue 48, item 1): what each command runs, by what its code does.

Each DVC stage depends on its command's manifest (tests/test_stage_deps.py); here: the committed manifests are the
ones the code gives, each lists its command's import closure, an edit that cannot change what the code does (a
comment, a blank line, a reflow, a docstring) leaves every manifest as it is and a statement changes exactly the
manifests of the commands that run it, and no gece module reads a docstring (so leaving them out is safe).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gece.cli import main
from gece.code.closure import Tree, command_closure, command_names
from gece.code.manifests import FOLDER, file_digest, fingerprint, manifest_path, manifests

from .refusals import refusal

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gece"


def test_the_committed_manifests_are_the_code_on_disk():
    wanted = manifests()
    on_disk = {p.relative_to(ROOT): p.read_text(encoding="utf-8") for p in sorted((ROOT / FOLDER).glob("*.txt"))}
    stale = sorted(str(p) for p in wanted if on_disk.get(p) != wanted[p])
    extra = sorted(str(p) for p in set(on_disk) - set(wanted))
    assert not stale and not extra, f"out of date: {stale}, no such command: {extra}; run `make deps` and commit"


def test_a_manifest_lists_its_commands_closure_with_each_files_digest():
    text = manifests()[manifest_path("extract")]
    rows = [line.split() for line in text.splitlines() if not line.startswith("#")]
    assert [path for path, _ in rows] == sorted(command_closure("extract"))
    assert all(digest == file_digest(ROOT / path) and len(digest) == 64 for path, digest in rows)
    assert "src/gece/cli.py" in dict(rows) and "src/gece/scoring/engine.py" in dict(rows)
    assert "src/gece/report/html.py" not in dict(rows)  # the page's code is not extract's
    assert text.startswith("# The code `gece extract` runs")


@pytest.fixture
def copy(tmp_path) -> Tree:
    """A copy of the package to edit."""
    shutil.copytree(PACKAGE, tmp_path / "src" / "gece", ignore=shutil.ignore_patterns("__pycache__"))
    return Tree(root=tmp_path, src=tmp_path / "src")


def _edit(tree: Tree, rel: str, change) -> dict[Path, str]:
    path = tree.root / rel
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")
    return manifests(tree)


def _changed(before: dict[Path, str], after: dict[Path, str]) -> set[str]:
    return {p.stem for p in before if before[p] != after.get(p)}


def test_an_edit_that_changes_no_code_changes_no_manifest(copy):
    before = manifests(copy)

    def comment_and_docstring(text: str) -> str:
        text = text.replace('"""The ``gece`` command', '"""The gece command, edited', 1)
        return text.replace("\nimport argparse\n", "\n# a comment\n\nimport argparse  # why\n\n", 1)

    after = _edit(copy, "src/gece/cli.py", comment_and_docstring)
    assert (copy.root / "src/gece/cli.py").read_text() != (PACKAGE / "cli.py").read_text()
    assert after == before
    assert fingerprint(copy) == fingerprint(Tree(root=copy.root, src=copy.src))


def test_a_statement_changes_the_manifests_of_the_commands_that_run_it(copy):
    before = manifests(copy)
    edited = "src/gece/scoring/engine.py"
    after = _edit(copy, edited, lambda text: text + "\nEDITED = 1\n")
    runs_it = {name for name in command_names(copy) if edited in command_closure(name, copy)}
    assert "extract" in runs_it and "metrics" not in runs_it
    assert _changed(before, after) == runs_it
    after_cli = _edit(copy, "src/gece/cli.py", lambda text: text + "\nEDITED = 1\n")
    assert _changed(after, after_cli) == set(command_names(copy))  # every command runs cli.py


def test_a_new_module_in_a_closure_is_listed(copy):
    before = manifests(copy)
    (copy.src / "gece" / "stats" / "added.py").write_text("X = 1\n", encoding="utf-8")
    after = _edit(copy, "src/gece/stats/gap.py", lambda text: text + "\nfrom gece.stats import added  # noqa\n")
    changed = _changed(before, after)
    assert "metrics" in changed and "src/gece/stats/added.py" in after[manifest_path("metrics")]


def test_no_module_reads_a_docstring():
    """The manifests leave docstrings out: sound only while no code reads one (``__doc__``, inspect.getdoc)."""
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
            if name in ("__doc__", "getdoc"):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not readers, f"code that reads a docstring: {readers}; docstrings would then count (gece.code.manifests)"


@refusal("E-OUT-NODE", readers=["stage-code"])
def test_gece_stage_code_check_exits_2_on_a_stale_manifest_and_writes_it_otherwise(tmp_path, monkeypatch, capsys):
    """A stale manifest (one of bytes that are no UTF-8 too) and the manifest of a command that is gone: --check
    names them, a run rewrites the one and removes the other, and leaves a file of --out that is no manifest alone.
    --out inside the package, or around it, is refused before anything is written."""
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / FOLDER, tmp_path / FOLDER)
    stale, latin = tmp_path / manifest_path("metrics"), tmp_path / manifest_path("summary")
    good, good_latin = stale.read_text(encoding="utf-8"), latin.read_text(encoding="utf-8")
    stale.write_text(good.replace("src/gece/cli.py", "src/gece/cli2.py"), encoding="utf-8")
    latin.write_bytes(b"# caf\xe9\n")
    (tmp_path / FOLDER / "gone.txt").write_text(good.replace("gece metrics", "gece gone"), encoding="utf-8")
    (tmp_path / FOLDER / "notes.txt").write_text("mine, not a manifest\n", encoding="utf-8")
    gece = [sys.executable, "-m", "gece.cli", "stage-code"]
    res = subprocess.run([*gece, "--check"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert res.returncode == 2 and "3 manifests out of date" in res.stderr and "metrics.txt" in res.stderr, res.stderr
    assert "summary.txt" in res.stderr and "gone.txt: no such command" in res.stderr and "notes" not in res.stderr
    res = subprocess.run(gece, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert stale.read_text(encoding="utf-8") == good and latin.read_text(encoding="utf-8") == good_latin
    assert not (tmp_path / FOLDER / "gone.txt").exists() and (tmp_path / FOLDER / "notes.txt").is_file()
    monkeypatch.chdir(tmp_path)
    for out, how in (("src/gece/manifests", "is inside the input src/gece"), ("src", "contains the input src/gece")):
        assert main(["stage-code", "--out", out]) == 2
        assert f"--out {out} {how}" in capsys.readouterr().err
    assert main(["stage-code", "--out", "."]) == 2 and "--out . contains the input" in capsys.readouterr().err
    assert not (tmp_path / "src/gece/manifests").exists()
