"""What git holds and what DVC holds (docs/dvc.md): git keeps what a reviewer reads, DVC caches the rest.

On a clean clone (CI: no `make repro`, a remote without main's outputs) these checks read only git and
dvc.yaml: the reports git keeps are the stated few, every other report is a cached output that git ignores,
the README's figure and every file the committed page links are in git or come with `make repro`, and a
one-parameter change touches a review-sized set of committed files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import networkx as nx
import pytest

from gece.io.paths import report_layout
from gece.tools import diff as diff_module

from .conftest import ROOT
from .test_report import parse_page

# the reports git keeps (cache: false outputs): the DVC metrics file, the page, its markdown tables, the README's
# figure. reports/bench/ is git's too, written by `make bench`, no stage
GIT_KEEPS = {"reports/summary.json", "reports/tables", "reports/index.html", f"reports/{report_layout.README_FIGURE}"}
MAX_TOUCHED = 40  # committed files a one-parameter change (metrics.n_bins) may touch, params.yaml and dvc.lock included


def _git(*args: str) -> list[str]:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def pipeline():
    """(every stage of dvc.yaml, DVC's graph of them), as DVC reads them."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        return list(repo.index.stages), repo.index.graph


def _rel(out) -> str:
    return Path(out.fs_path).relative_to(ROOT).as_posix()


def _under(path: str, outs: set[str]) -> bool:
    return any(path == o or path.startswith(o + "/") for o in outs)


def test_git_keeps_only_what_a_reviewer_reads(pipeline):
    stages, _ = pipeline
    outs = [o for s in stages for o in s.outs if _rel(o).startswith("reports/")]
    kept = {_rel(o) for o in outs if not o.use_cache}
    cached = {_rel(o) for o in outs if o.use_cache}
    assert kept == GIT_KEEPS
    assert {"reports/metrics/winobias", "reports/figures", "reports/compare/winobias.json"} <= cached
    tracked = _git("ls-files", "--", "reports")
    assert tracked, "git holds no report"
    stray = [p for p in tracked if not (_under(p, kept) or p.startswith("reports/bench/"))]
    assert not stray, f"tracked by git but not a report git keeps: {stray[:5]}"
    # DVC refuses to cache an output that git tracks; `git add -A` must not pick one up either
    assert not [p for p in tracked if _under(p, cached)]
    ignored = set(_git("check-ignore", "--no-index", *sorted(cached)))
    assert ignored == cached, f"cached outputs git does not ignore: {sorted(cached - ignored)}"


def test_readme_figure_and_page_links_come_with_a_clone_or_make_repro(pipeline):
    """The README's images are in git; every local file the committed page shows or links is in git or is (under)
    an output of a stage, which `make repro` pulls or builds."""
    stages, _ = pipeline
    tracked = set(_git("ls-files"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert images and all(src in tracked for src in images), images
    assert f"reports/{report_layout.README_FIGURE}" in images
    outs = {_rel(o) for s in stages for o in s.outs}
    page = parse_page(ROOT / "reports" / "index.html")
    local = [unquote(h.partition("#")[0]) for h in page.images + page.links if not h.startswith("#")]
    assert page.images and page.links
    paths = {(PurePosixPath("reports") / h).as_posix() for h in local if h and not re.match(r"^[a-z]+:", h)}
    missing = sorted(p for p in paths if p not in tracked and not _under(p, outs))
    assert not missing, f"the page links files neither in git nor made by a stage: {missing[:5]}"


def test_a_params_change_touches_a_review_sized_set_of_committed_files(pipeline):
    """`metrics.n_bins: 15` then `make repro`: the committed files that can change are dvc.lock and the git-kept
    outputs of the stages that read metrics.n_bins and of every stage downstream of them."""
    from dvc.dependency.param import ParamsDependency

    stages, graph = pipeline

    def reads_n_bins(stage) -> bool:
        return any(
            isinstance(d, ParamsDependency)
            and (not d.params or any(p in ("metrics", "metrics.n_bins") for p in d.params))
            for d in stage.deps
        )

    touched = set()
    for s in filter(reads_n_bins, stages):
        touched |= {s} | nx.ancestors(graph, s)  # DVC's edges point from a stage to the stages it reads
    kept = {_rel(o) for s in touched for o in s.outs if not o.use_cache}
    files = [p for p in _git("ls-files", "--", "reports") if _under(p, kept)]
    assert {"reports/summary.json", "reports/index.html"} <= set(files)
    assert len(files) + 2 <= MAX_TOUCHED, f"{len(files)} committed reports, params.yaml and dvc.lock"


def test_gece_diff_reads_the_reports_dvc_holds_at_a_revision(tmp_path, monkeypatch, capsys):
    """`gece diff reports/metrics` against HEAD: the detail is no longer in git, so the old side comes from the
    DVC output that HEAD's .dvc file names (DVC's cache); a file the cache lacks is an error naming the fetch."""
    from gece.cli import main

    monkeypatch.chdir(tmp_path)

    def sh(*a):
        return subprocess.run(a, check=True, capture_output=True)

    def commit(msg):
        sh("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg)

    sh("git", "init", "-q")
    sh("dvc", "init", "-q")
    metrics = tmp_path / "reports" / "metrics" / "winobias"
    metrics.mkdir(parents=True)
    (metrics / "m.json").write_text('{"ece": 0.1, "brier": 0.2}')
    sh("dvc", "add", "-q", "reports/metrics")
    sh("git", "add", "-A")
    commit("one")
    (metrics / "m.json").write_text('{"ece": 0.1, "brier": 0.25}')
    assert main(["diff", "reports/metrics", "--all", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(c["file"], c["key"], c["old"], c["new"]) for c in got["changes"]] == [
        ("reports/metrics/winobias/m.json", "brier", 0.2, 0.25)
    ]
    shutil.rmtree(tmp_path / ".dvc" / "cache")
    diff_module._DVC_FS.clear()
    assert main(["diff", "reports/metrics"]) == 2
    err = capsys.readouterr().err
    assert "reports/metrics/winobias/m.json at HEAD" in err and "dvc fetch --rev HEAD" in err
