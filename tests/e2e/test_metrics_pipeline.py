"""dvc repro of the reference runs, idempotence, and `dvc metrics diff` after a parameter change."""

from __future__ import annotations

import json

import pytest
import yaml

from .conftest import git, run

pytestmark = pytest.mark.slow


PAPER_STAGES = ["metrics@winobias", "metrics@winogender", "metrics@genderlex"]  # every benchmark with released scores
# the other reports of those benchmarks that the summary reads
SUMMARY_INPUTS = [
    f"{s}@{b}" for s in ("calibrate", "ablate", "compare", "groups") for b in ("winobias", "winogender", "genderlex")
]


def test_repro_is_idempotent_and_metrics_diff_shows_param_changes(repo_copy):
    repo = repo_copy
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["models"], params["ablate"]["special_tokens"] = ["smollm2-135m"], {}
    params["ablate"]["prompts"] = {}
    params["extract"]["limit"] = 40  # the scored model on a slice; the reference runs are read whole
    # the benchmarks with released scores only: the model's extract stage scores every benchmark of the list
    params["benchmarks"] = {b: {} for b in ("winobias", "winogender", "genderlex")}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git(repo, "commit", "-qam", "slice")
    run(["dvc", "repro", *PAPER_STAGES], repo)
    status = run(["dvc", "status", *PAPER_STAGES], repo)
    assert "up to date" in status.stdout
    again = run(["dvc", "repro", *PAPER_STAGES], repo)
    assert "Running stage" not in again.stdout

    # the per-run files are plain outputs (only reports/summary.json is declared as metrics): name them
    detail = ["--targets", "reports/metrics", "-R"]
    shown = json.loads(run(["dvc", "metrics", "show", "reports/metrics", "-R", "--json"], repo).stdout)
    paths = [p for rev in shown.values() for p in rev["data"]]
    assert len([p for p in paths if p.startswith("reports/metrics/") and "/paper-" in p]) == 18
    ece = json.loads((repo / "reports/metrics/winobias/paper-gpt-j-6b.json").read_text())["ece"]
    assert ece == pytest.approx(0.15764973445164981, abs=1e-12)

    # the reference runs' headline metrics are those of the committed reports/summary.json (the per-run reports
    # are DVC-cached outputs, not in git: docs/dvc.md, "What git holds and what DVC holds")
    committed = json.loads((repo / "reports/summary.json").read_text())["runs"]
    for path in sorted((repo / "reports/metrics").glob("*/paper-*.json")):
        report, line = json.loads(path.read_text()), committed[path.parent.name][path.stem]
        assert {k: report[k] for k in line} == line, path
    # the baseline: the other reports the summary reads (in git before they became DVC outputs), then its
    # dvc.lock, which names the reports DVC cached (dvc metrics diff reads HEAD's from there)
    run(["dvc", "repro", *SUMMARY_INPUTS], repo)
    git(repo, "add", "dvc.lock")
    git(repo, "commit", "-qm", "the reference runs' reports")
    run(["dvc", "exp", "run", "-S", "metrics.n_bins=15", *PAPER_STAGES], repo)
    diff = json.loads(run(["dvc", "metrics", "diff", *detail, "--json"], repo).stdout)
    moved = diff["reports/metrics/winobias/paper-gpt-j-6b.json"]
    assert moved["n_bins"] == {"old": 10, "new": 15, "diff": 5}
    assert moved["ece"]["old"] == pytest.approx(ece) and moved["ece"]["new"] != moved["ece"]["old"]
    assert "accuracy" not in moved  # unchanged values are not listed
    assert len([p for p in diff if "/paper-" in p]) == 18

    # the declared metrics: the summary moves by the ECE and Gender-ECE of the 18 runs, nothing else
    run(["dvc", "repro", "--single-item", "summary"], repo)
    summary = json.loads(run(["dvc", "metrics", "diff", "--json"], repo).stdout)["reports/summary.json"]
    assert summary["runs.winobias.paper-gpt-j-6b.ece"]["new"] == moved["ece"]["new"]
    paper = {k: v for k, v in summary.items() if ".paper-" in k}
    assert {k.rsplit(".", 1)[1] for k in paper} == {"ece", "gender_ece"} and len(paper) <= 36
