"""A code change marks exactly the stages that run it, and an edit that changes no code marks none (issues 15, 48).

In a throw-away copy of the repository (the working tree's files as they are on disk, committed
dvc.lock; no data, no artifacts, no DVC remote), one module is edited, ``gece stage-code`` writes the
manifests as the stage ``code`` would, and ``dvc status --json`` must report a changed manifest
(stage-code/<command>.txt, or the folder) for exactly:

- no stage, when the edit is a comment (or anything else that leaves the syntax tree as it was);
- the stages whose command's import closure (gece.code.closure) contains the module, plus the stages that
  depend on every manifest on purpose (test_stage_deps.WHOLE_PACKAGE), when the edit adds a statement.

The stage ``code`` itself (its dep is src/gece as a whole) is marked by any edit and left out. The copy
lacks data and artifacts, so dvc status also reports those deps deleted and the outputs missing; only
the manifests are read.

dvc status compares the deps with dvc.lock, so the test needs a dvc.lock that matches the code on disk
(after `dvc repro`, before further code edits): when dvc status marks a stage before the edit, the test
fails early and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from gece.code.closure import Tree, command_names, commands
from gece.code.manifests import FOLDER

from ..conftest import ROOT
from ..test_stage_deps import WHOLE_PACKAGE, dvc_stages, expected_code
from .conftest import git, run

pytestmark = pytest.mark.slow


def _stage_module() -> str:
    """The file of the module that runs ``gece metrics``."""
    return Tree().rel(Tree().file(commands()["metrics"]))  # type: ignore[arg-type]


EDITED = [
    "src/gece/stats/gap.py",  # a leaf pure module
    "src/gece/io/schemas/pair_rows.py",  # the pair files' contracts
    _stage_module(),  # the module of a stage family
    "src/gece/scoring/engine.py",  # extract only
]


@pytest.fixture(scope="module")
def code_copy(tmp_path_factory) -> Path:
    """The working tree's tracked and unignored files (not data/ or artifacts), committed in a fresh git repo."""
    dest = tmp_path_factory.mktemp("status") / "repo"
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    git(dest, "init", "-q")
    run(["dvc", "config", "--local", "cache.dir", str(dest.with_name("dvc-cache"))], dest)
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "copy")
    return dest


def _dvc(repo: Path, *args: str) -> str:
    return run(["dvc", *args], repo, timeout=300, env={"DVC_NO_ANALYTICS": "1"}).stdout


def marked_stages(repo: Path) -> set[str]:
    """The stages (as DVC expands them; not ``code``) whose changed deps include a manifest, after ``gece
    stage-code`` has written the manifests of the code on disk."""
    run([sys.executable, "-m", "gece.cli", "-q", "stage-code"], repo)
    status = json.loads(_dvc(repo, "status", "--json") or "{}")
    marked = set()
    for stage, entries in status.items():
        for entry in entries:
            changed = entry.get("changed deps", {}) if isinstance(entry, dict) else {}
            if stage != "code" and any(Path(dep).parts[:1] == FOLDER.parts for dep in changed):
                marked.add(stage)
    return marked


def _require_current_lock(repo: Path) -> None:
    before = marked_stages(repo)
    if before:
        pytest.fail(
            f"before any edit, dvc status already reports a changed manifest for {_grouped(before)}: dvc.lock "
            "does not match the code on disk (uncommitted code changes, or dvc.yaml deps changed without "
            "`dvc repro`), so this test cannot tell which stages an edit marks; bring dvc.lock up to date first",
            pytrace=False,
        )


def _marked_after(repo: Path, edited: str, text: bytes) -> set[str]:
    """The stages marked with ``edited`` holding ``text``; the file and the manifests restored after."""
    path = repo / edited
    original = path.read_bytes()
    try:
        path.write_bytes(text)
        return marked_stages(repo)
    finally:
        path.write_bytes(original)
        os.utime(path)
        run([sys.executable, "-m", "gece.cli", "-q", "stage-code"], repo)


def closure_stages(repo: Path, edited: str) -> set[str]:
    """The stages (as DVC expands them) whose template's code contains ``edited``."""
    tree = Tree(root=repo, src=repo / "src")
    known = set(command_names(tree))
    templates = {
        name
        for name, spec in dvc_stages(repo / "dvc.yaml").items()
        if name in WHOLE_PACKAGE or edited in expected_code(spec, known, tree)[0]
    }
    names = _dvc(repo, "stage", "list", "dvc.yaml", "--name-only").split()
    return {n for n in names if n.split("@")[0] in templates}


def _grouped(stages: set[str]) -> str:
    by_template = defaultdict(list)
    for s in sorted(stages):
        by_template[s.split("@")[0]].append(s)
    return (
        "; ".join(
            f"{t} ({len(v)}: {', '.join(v[:3])}{', ...' if len(v) > 3 else ''})" for t, v in sorted(by_template.items())
        )
        or "none"
    )


@pytest.mark.parametrize("edited", EDITED)
def test_a_comment_marks_no_stage(code_copy, edited):
    assert (code_copy / edited).is_file(), f"{edited} does not exist: update EDITED"
    _require_current_lock(code_copy)
    original = (code_copy / edited).read_bytes()
    comment = b"\n# an edit that changes no behaviour (tests/e2e/test_stage_status.py)\n"
    marked = _marked_after(code_copy, edited, original.replace(b"\n", b"  # a comment\n", 1) + comment)
    assert not marked, f"a comment in {edited} marks {_grouped(marked)}: the manifests must not change"


@pytest.mark.parametrize("edited", EDITED)
def test_a_statement_marks_the_stages_that_run_the_module(code_copy, edited):
    assert (code_copy / edited).is_file(), f"{edited} does not exist: update EDITED"
    _require_current_lock(code_copy)
    original = (code_copy / edited).read_bytes()
    marked = _marked_after(code_copy, edited, original + b"\n_STATUS_TEST = 1  # tests/e2e/test_stage_status.py\n")
    expected = closure_stages(code_copy, edited)
    missed, spurious = expected - marked, marked - expected
    if missed or spurious:
        pytest.fail(
            f"after editing {edited}, dvc status marks stages that differ from the closures "
            f"(`python -m gece.code.closure`):\n"
            f"  not marked, though their code contains {edited}: {_grouped(missed)}\n"
            f"  marked, though their code does not contain it: {_grouped(spurious)}",
            pytrace=False,
        )


# a command's help, edited where it lives (its module's HELP): (the module, the stages that may re-run)
HELP_EDITS = [
    ("src/gece/tools/diff.py", set()),  # a tool's help: no stage runs it, not even the report (issue 62)
    ("src/gece/pipeline/compare.py", {"compare"}),  # a stage's help: only that stage's own stages
]


@pytest.mark.parametrize(("edited", "allowed"), HELP_EDITS)
def test_editing_a_commands_help_leaves_the_computing_stages_up_to_date(code_copy, edited, allowed):
    """Issue 39, item 3: a help string lives in its command's module, so editing it marks at most that
    command's own stages (and the report, which depends on every stage's code); every metrics stage (and every
    other computing stage) stays up to date. A tool's help marks no stage at all (issue 62)."""
    path = code_copy / edited
    original = path.read_text(encoding="utf-8")
    start = original.index("\nHELP = ") + len("\nHELP = ")
    assert original[start] in '"(', f"{edited}: HELP is not a string literal"
    # the same help with one word added inside the first string literal
    quote = original.index('"', start)
    edited_text = original[: quote + 1] + "edited: " + original[quote + 1 :]
    _require_current_lock(code_copy)
    marked = _marked_after(code_copy, edited, edited_text.encode())
    marked_templates = {s.split("@")[0] for s in marked}
    whole = set(WHOLE_PACKAGE) if allowed else set()  # the report depends on the stages' manifests alone
    assert marked_templates <= allowed | whole, (
        f"editing the help in {edited} marks {_grouped(marked)}: help must live in the command's own module"
    )
    assert not {s for s in marked if s.startswith("metrics@")}
