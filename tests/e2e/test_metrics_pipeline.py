"""dvc repro of the reference runs, idempotence, and `dvc metrics diff` after a parameter change."""

from __future__ import annotations

import json

import pytest

from .conftest import git, run

pytestmark = pytest.mark.slow


def test_repro_is_idempotent_and_metrics_diff_shows_param_changes(repo_copy):
    repo = repo_copy
    run(["dvc", "repro", "metrics-paper"], repo)
    status = run(["dvc", "status", "metrics-paper"], repo)
    assert "up to date" in status.stdout
    again = run(["dvc", "repro", "metrics-paper"], repo)
    assert "Running stage" not in again.stdout

    # the per-run files are plain outputs (only reports/summary.json is declared as metrics): name them
    detail = ["--targets", "reports/metrics", "-R"]
    shown = json.loads(run(["dvc", "metrics", "show", "reports/metrics", "-R", "--json"], repo).stdout)
    paths = [p for rev in shown.values() for p in rev["data"]]
    assert len([p for p in paths if p.startswith("reports/metrics/") and "/paper-" in p]) == 18
    ece = json.loads((repo / "reports/metrics/winobias/paper-gpt-j-6b.json").read_text())["ece"]
    assert ece == pytest.approx(0.15764973445164981, abs=1e-12)

    # the committed reports are reproduced byte for byte
    assert git(repo, "status", "--porcelain", "--", "reports").stdout == ""
    run(["dvc", "exp", "run", "-S", "metrics.n_bins=15", "metrics-paper"], repo)
    diff = json.loads(run(["dvc", "metrics", "diff", *detail, "--json"], repo).stdout)
    moved = diff["reports/metrics/winobias/paper-gpt-j-6b.json"]
    assert moved["n_bins"] == {"old": 10, "new": 15, "diff": 5}
    assert moved["ece"]["old"] == pytest.approx(ece) and moved["ece"]["new"] != moved["ece"]["old"]
    assert "accuracy" not in moved  # unchanged values are not listed
    assert len(diff) == 18

    # the declared metrics: the summary moves by the ECE and Gender-ECE of the 18 runs, nothing else
    run(["dvc", "repro", "--single-item", "summary"], repo)
    summary = json.loads(run(["dvc", "metrics", "diff", "--json"], repo).stdout)["reports/summary.json"]
    assert summary["runs.winobias.paper-gpt-j-6b.ece"]["new"] == moved["ece"]["new"]
    assert {k.rsplit(".", 1)[1] for k in summary} == {"ece", "gender_ece"} and len(summary) <= 36
