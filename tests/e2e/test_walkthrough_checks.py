"""docs/lmeval.md's one-entry walkthrough against the committed params.yaml: its entry (``limit: 12``,
``checked_against: smollm2-135m``) added to a copy of the repository whose params.yaml keeps every benchmark and the
committed calibrate, groups, metrics and protocol settings, then the page's ``dvc repro`` and ``dvc metrics diff``.
A stand-in answers for lm-eval (tests/lmeval_standin.py: the stage's command, export and import are those of the
real run; tests/e2e/test_lmeval_roundtrip.py runs lm-eval itself on a slice of four benchmarks).

The entry is a check (docs/lmeval.md "Checks"): the first 12 pairs of winogender hold 2 with y = 0 and those of
the GenderLex benchmarks 3, fewer than calibrate.folds (5), so the calibrate stage skips it there with a warning,
where it stopped ``dvc repro`` before; and it is in none of the answers, letters, findings or counts.

To keep it short, the copy scores one model (smollm2-135m, the run the entry is checked against) on the first 20
pairs of each benchmark (``extract.limit``: the first 20 pairs of winogender hold 6 with y = 0), reads no authors'
runs and drops the special-token ablation, whose second model it does not score. It runs 113 stages: 406 s of wall
time and 422 s of CPU (2026-12-07, 2 cores, beside a ``dvc repro`` at ``nice 10``); the per-stage cost of ``dvc
repro`` (about 3.6 s of CPU a stage) is most of it, so it sits in the slow suite."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import yaml

from ..conftest import ROOT
from .conftest import BIN, DVC_ENV, copy_repo, git, ran, run
from .test_lmeval_roundtrip import MODEL, RUN, walkthrough

pytestmark = pytest.mark.slow

LIMIT = 20  # extract.limit of the copy: smollm2-135m's slice (no check: every scored run alike)


def test_the_walkthrough_runs_on_the_committed_params_and_its_entry_stays_a_check(tmp_path, data_dir):
    import resource
    import time

    t0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    entry, commands = walkthrough()
    repo = copy_repo(tmp_path / "repo", data_dir)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    committed = {k: params[k] for k in ("benchmarks", "calibrate", "groups", "metrics")}
    params["models"], params["references"] = [MODEL], []
    params["ablate"]["special_tokens"] = {}
    params["ablate"]["prompts"] = {}
    params["extract"]["limit"] = LIMIT
    added = yaml.safe_load(entry[1])
    params["registry"] |= added["registry"]
    params["lmeval_runs"] = added["lmeval_runs"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert {k: params[k] for k in committed} == committed and added["registry"][RUN]["limit"] == 12
    bin_dir = repo / "bin"  # the stand-in lm_eval, first on PATH
    bin_dir.mkdir()
    (bin_dir / "lm_eval").write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import lmeval_standin\nsys.exit(lmeval_standin.main(sys.argv[1:]))\n"
    )
    (bin_dir / "lm_eval").chmod(0o755)
    with (repo / ".gitignore").open("a") as f:
        f.write("/bin\n")
    git(repo, "rm", "-q", "dvc.lock")
    git(repo, "commit", "-qam", "the walkthrough's entry")

    env = DVC_ENV | {"PATH": f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"}
    env |= {"STANDIN_LOG": str(tmp_path / "standin.log")}
    res = run(["bash", "-euo", "pipefail", "-c", commands[1]], repo, env=env)
    out, said = res.stdout, res.stdout + res.stderr  # dvc passes the stages' warnings through
    stages = ran(out)
    benchmarks = list(committed["benchmarks"])
    assert {f"lmeval@{b}-{RUN}" for b in benchmarks} | {f"calibrate@{b}" for b in benchmarks} <= set(stages)
    # calibrate skipped the check where its slice is too small, with the counts, and calibrated the rest
    for b, zeros in (("winogender", 2), ("genderlex", 3), ("genderlex_person", 3), ("genderlex_someone", 3)):
        assert f"{b}/{RUN}: a check (params.yaml registry.{RUN}), not calibrated" in said, b
        assert f"got {12 - zeros} with y=1 and {zeros} with y=0" in said, b
        assert not (repo / f"reports/calibration/{b}/{RUN}.json").exists()
        assert (repo / f"reports/calibration/{b}/{MODEL}.json").is_file()
    assert (repo / f"reports/calibration/winobias/{RUN}.json").is_file()  # 6 of each label: calibrated

    summary = json.loads((repo / "reports/summary.json").read_text())
    for b in benchmarks:  # its own rows, new in dvc metrics diff: the pairs (n), or on a protocol's benchmark the
        # keys its protocol declares whatever the labels of its first rows (the referent protocol's sentence pairs
        # with both rows scored: none among SynthBias's first 20 rows)
        mine, checked = summary["runs"][b][MODEL], summary["runs"][b][RUN]
        if "n" in mine:
            assert checked["n"] <= 12 and mine["n"] == LIMIT, b
        size = "n" if "n" in mine else "n_pairs"
        assert checked[size] <= mine[size] <= LIMIT, b
        assert re.search(rf"^reports/summary\.json\s+runs\.{b}\.{re.escape(RUN)}\.{size}\s+-\s+\d", out, re.M), b
    assert set(summary["agreement"]) == set(benchmarks)
    # no count holds it: one run that is no check has no pair to compare
    assert "compare" not in summary
    page = (repo / "reports/index.html").read_text(encoding="utf-8")
    checks = page[page.index('<section id="checks">') :]
    checks = checks[: checks.index("</section>")]
    assert f"<strong>{RUN}</strong> (limit: 12, checked_against: {MODEL})" in checks
    assert "not calibrated on winogender, genderlex, genderlex_person, genderlex_someone" in checks
    answers = page[page.index('<section id="answers-figures">') : page.index('<section id="checks">')]
    assert MODEL in answers and RUN not in answers  # the first screen draws the runs, not the check
    for b in benchmarks:  # the figures' CSVs, their letters included
        for f in (repo / "reports/figures").glob(f"*_{b}.csv"):
            assert RUN not in f.read_text(), f
    assert "up to date" in run(["dvc", "status"], repo, env=env).stdout
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"\n[timing] the walkthrough on the committed params.yaml: {time.perf_counter() - t0:.0f} s wall, "
        f"{cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime:.0f} s of CPU, {len(stages)} stages"
    )
