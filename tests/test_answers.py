"""The answers that open the page (gece.report.answers): model differences after Holm, the pairs that do not differ,
the gender gaps that are findings and the largest change by post-hoc calibration, on hand-made reports with known
values and on the full test tree (tests/report_data.py) against its compare JSON."""

from __future__ import annotations

import html
import json

import pytest

from gece.io.settings.params import load_params
from gece.pipeline import report_data as loader
from gece.report import answers
from gece.report.cells import ReportData
from gece.report.gaps import GAP_MAX_WIDTH
from gece.stats.intervals import holm, holm_alpha

from .report_data import report_pages
from .test_report import parse_page


def _cell(diff, lo, hi, p, p_holm, holm_ci=None):
    """A compared metric; its interval at Holm's level is ``holm_ci`` (the 95% one when not given)."""
    lo_holm, hi_holm = holm_ci or (lo, hi)
    return {
        "diff": diff,
        "ci_low": lo,
        "ci_high": hi,
        "p_value": p,
        "p_holm": p_holm,
        "significant_holm": p_holm < 0.05,
        "level_holm": 1 - holm_alpha(p, p_holm, 0.05),
        "ci_low_holm": lo_holm,
        "ci_high_holm": hi_holm,
    }


def _data() -> ReportData:
    """Five runs of one benchmark: a (scored, lowest ECE), b and c (scored), r and r2 (released)."""
    data = ReportData(benchmarks=["wb"], runs={"wb": ["a", "b", "c", "r", "r2"]}, references={"r", "r2"})
    for m, ece in (("a", 0.05), ("b", 0.10), ("c", 0.12), ("r", 0.20), ("r2", 0.21)):
        data.metrics[("wb", m)] = {"n": 500, "ece": ece, "ece_ci_low": ece - 0.02, "ece_ci_high": ece + 0.02}
    data.compare["wb"] = {
        "pairs": [
            {"a": "b", "b": "a", "metrics": {"ece": _cell(0.05, 0.02, 0.08, 0.01, 0.03)}},  # a lower: oriented
            {"a": "a", "b": "r", "metrics": {"ece": _cell(-0.15, -0.2, -0.1, 0.001, 0.006)}},
            {"a": "a", "b": "r2", "metrics": {"ece": _cell(-0.16, -0.21, -0.11, 0.001, 0.006)}},
            {"a": "b", "b": "r", "metrics": {"ece": _cell(-0.10, -0.15, -0.05, 0.002, 0.008)}},  # not asked
            {"a": "r", "b": "r2", "metrics": {"ece": _cell(-0.01, -0.05, 0.03, 0.6, 0.6)}},  # not asked
            {"a": "b", "b": "r2", "metrics": {"ece": _cell(-0.11, -0.2, 0.01, 0.07, 0.2)}},  # not asked
            # significant alone: the 95% interval excludes 0, the one at Holm's level (98.3%) holds it
            {"a": "b", "b": "c", "metrics": {"ece": _cell(-0.02, -0.04, -0.001, 0.03, 0.09, (-0.05, 0.004))}},
        ]
    }
    return data


def test_differences_are_oriented_lower_first_and_split_by_holm():
    (c,) = answers.comparisons(_data())
    assert (c.benchmark, c.pairs, c.significant, c.best) == ("wb", 7, 4, "a")
    # asked: the pairs of a (lowest ECE) and of two scored runs; b–r, r–r2 and b–r2 are counted
    assert [(d.lower, d.higher) for d in c.differ] == [("a", "r2"), ("a", "r"), ("a", "b")]
    ab = next(d for d in c.differ if d.higher == "b")
    assert (ab.by, ab.low, ab.high) == (0.05, 0.02, 0.08)  # a − b = −0.05: b is higher by 0.05 [0.02, 0.08]
    flipped = next(d for d in c.differ if d.higher == "r")
    assert flipped.by == 0.15 and (flipped.low, flipped.high) == (0.1, 0.2)
    assert [(d.lower, d.higher) for d in c.same] == [("b", "c")] and (c.other_differ, c.other_same) == (1, 2)
    assert all(d.by >= 0 and d.low <= d.by <= d.high for d in c.differ + c.same)
    # each interval at the level Holm's correction tests the pair at, 1 − 0.05 p / p_holm
    assert answers.differ_line(c) == (
        "4 of 7 pairs differ. a (lowest ECE) is below r2 +0.160 [0.110, 0.210] (99.2%), r +0.150 [0.100, 0.200] "
        "(99.2%), b +0.050 [0.020, 0.080] (98.3%); 1 more among the other runs"
    )
    # significant before Holm's correction only: its p-values say so, and its interval holds 0
    assert answers.same_line(c) == (
        "b ≈ c +0.020 [-0.004, 0.050] (98.3%) (p = 0.030, Holm p = 0.090); 2 more among the other runs"
    )


def test_a_gender_gap_is_a_finding_after_holm_and_with_a_narrow_interval():
    data = _data()
    # bootstrap p-values: a, b and r are below 0.05 alone, Holm's correction over the 5 runs keeps only a
    ps = {"a": 0.005, "b": 0.03, "c": 0.5, "r": 0.04, "r2": 0.5}
    for m, p in ps.items():
        data.metrics[("wb", m)] |= {"gap_true": 0.2, "gap_true_ci_low": 0.1, "gap_true_ci_high": 0.3, "gap_true_p": p}
        data.metrics[("wb", m)] |= {"gap_pred": -0.3, "gap_pred_ci_low": -0.5, "gap_pred_ci_high": -0.1}
        data.metrics[("wb", m)]["gap_pred_p"] = 0.001
    # by hand, in order of p: 5 × 0.005, 4 × 0.03, max(3 × 0.04, 0.12), then 1 (capped) twice
    assert holm(list(ps.values())) == pytest.approx([0.025, 0.12, 1.0, 0.12, 1.0])
    for gap in ("gap_true", "gap_pred"):  # as the metrics stage writes them (gece.stats.gap.holm_over_runs)
        for m, adjusted in zip(ps, holm([data.metrics[("wb", m)][f"{gap}_p"] for m in ps]), strict=True):
            data.metrics[("wb", m)][f"{gap}_p_holm"] = adjusted
    pred, true = answers.gender_gaps(data)
    assert (true.grouping, true.runs, [g.model for g in true.found], true.wide) == ("gap_true", 5, ["a"], 0)
    assert true.found[0].p_holm == pytest.approx(0.025)
    # every predicted gap survives Holm (5 × 0.001) but its interval is 0.4 wide: not a finding
    assert pred.grouping == "gap_pred" and pred.found == [] and pred.wide == 5 and GAP_MAX_WIDTH < 0.4
    assert answers.gap_line(true, {"a", "b"}) == "1 of 5 runs: a +0.200 [0.100, 0.300]"
    assert answers.gap_line(pred, {"a", "b"}) == f"0 of 5 runs; 5 more significant but wider than {GAP_MAX_WIDTH}"
    assert (pred.by, true.by) == ("predicted gender", "human gender")
    data.synthbias["wb"] = "type2"  # y is the labour-statistics majority there, not people's judgement
    assert [g.by for g in answers.gender_gaps(data)] == ["predicted gender", "labour-statistics majority gender"]


def test_released_runs_are_a_range_beside_the_scored_ones():
    gaps = answers.GenderGaps("wb", "gap_true", 3)
    gaps.found = [answers.Gap("r", 0.5, 0.45, 0.55, 0.01), answers.Gap("a", 0.3, 0.25, 0.35, 0.01)]
    gaps.found.append(answers.Gap("r2", -0.1, -0.15, -0.05, 0.02))
    assert answers.gap_line(gaps, {"a"}) == "3 of 3 runs: a +0.300 [0.250, 0.350]; 2 released runs -0.100 to +0.500"
    # no scored run among them: every run with its interval
    assert answers.gap_line(gaps, set()).startswith("3 of 3 runs: r +0.500 [0.450, 0.550], a +0.300")


def _split(before: float, methods: dict[str, tuple[str, float]]) -> dict:
    def metrics(e):
        return {"ece": e, "ece_ci_low": e - 0.01, "ece_ci_high": e + 0.01}

    return {
        "split": {
            "uncalibrated": metrics(before),
            "methods": {
                k: {"status": s, "metrics": metrics(e) if s == "ok" else None} for k, (s, e) in methods.items()
            },
        }
    }


def test_the_largest_calibration_change_is_the_headline_method_of_the_run_with_the_largest_drop():
    data = _data()
    data.calibration[("wb", "a")] = _split(0.05, {"platt": ("ok", 0.06)})  # rises
    data.calibration[("wb", "b")] = _split(0.30, {"platt": ("ok", 0.10), "isotonic": ("failed", 0.0)})
    data.calibration[("wb", "r")] = _split(0.20, {"platt": ("ok", 0.15), "beta": ("ok", 0.12)})
    (x,) = answers.calibration_changes(data)
    assert (x.model, x.method, x.before, x.after, x.lowered, x.runs) == ("b", "platt", 0.30, 0.10, 2, 3)
    assert x.text() == "b 0.300 [0.290, 0.310] → 0.100 [0.090, 0.110] with platt (Δ -0.200; lowered in 2 of 3 runs)"
    # the method params.yaml fixes (calibrate.headline), never the best on these pairs: on r beta is lower, but
    # platt is reported; with beta fixed, only r fits it
    assert data.headline_method == "platt"
    data.headline_method = "beta"
    (x,) = answers.calibration_changes(data)
    assert (x.model, x.method, x.before, x.after, x.lowered, x.runs) == ("r", "beta", 0.20, 0.12, 1, 1)


def test_answers_of_the_full_build_follow_its_compare_reports(built_report):
    """On the test tree: every compared pair of every benchmark is shown or counted once, the significant ones
    are those the compare JSON marks significant after Holm, and the page shows every line."""
    reports, _result = built_report
    data = loader.load_report_data(
        load_params(reports.parent / "params.yaml"), reports, reports.parent / "artifacts" / "scores", reports
    )
    found = answers.answers(data)
    assert found.comparisons and found.gaps and found.calibration
    for c in found.comparisons:
        pairs = json.loads((reports / "compare" / f"{c.benchmark}.json").read_text())["pairs"]
        assert c.pairs == len(pairs) == len(c.differ) + len(c.same) + c.other_differ + c.other_same
        assert c.significant == sum(p["metrics"]["ece"]["significant_holm"] for p in pairs)
        assert c.significant == len(c.differ) + c.other_differ
    index = reports / "index.html"
    text = " ".join(index.read_text(encoding="utf-8").split())
    for line in answers.answer_lines(found):
        assert html.escape(line.split(": ", 1)[1], quote=True) in text, line
    # each answer's heading links the page with its table
    links = parse_page(index).links
    assert {"pages/compare.html", "pages/gender_gap.html", "pages/calibration.html"} <= set(links)
    assert {p.name for p in report_pages(reports)[1:]} >= {"compare.html", "gender_gap.html", "calibration.html"}
