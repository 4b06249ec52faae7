"""Intervals, the gender-gap tests, power, and the claims docs/statistics.md makes about the
pipeline's reports (issue 19): the reference runs' reports built afresh (the reference_reports fixture), and the
workspace's reports when `make repro` has put them there."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import norm

from gece.catalog import metric_defs
from gece.io.settings.params import load_params
from gece.pipeline.runs import reference_ids
from gece.report.cells import ReportData
from gece.report.stat_tables import gap_agreement, mean_rmse
from gece.stats import gap, intervals
from gece.stats import metrics as M

draws_strategy = arrays(np.float64, st.integers(1, 300), elements=st.floats(-1, 1))


# ------------------------------------------------------------------------------ intervals
@settings(max_examples=200, deadline=None)
@given(draws=draws_strategy, estimate=st.floats(-1, 1), level=st.floats(0.5, 0.99))
def test_bias_corrected_interval_contains_its_estimate(draws, estimate, level):
    lo, hi = intervals.bias_corrected_interval(draws, estimate, level)
    assert lo <= estimate <= hi
    q = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    assert hi - lo == pytest.approx(q[1] - q[0], abs=1e-9)  # the percentile interval's width, moved


def bc_interval(draws: np.ndarray, estimate: float, level: float) -> tuple[float, float]:
    """Efron's bias-corrected (BC) percentile interval."""
    share = np.clip((draws < estimate).mean() + 0.5 * (draws == estimate).mean(), 1e-12, 1 - 1e-12)
    z0, z = norm.ppf(share), norm.ppf((1 + level) / 2)
    lo, hi = np.quantile(draws, norm.cdf([2 * z0 - z, 2 * z0 + z]))
    return float(lo), float(hi)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.floats(-3, 3))
def test_bc_interval_misses_its_estimate_exactly_when_the_percentile_interval_does(seed, shift):
    """Why docs/statistics.md does not use BC/BCa: they fix none of the misses."""
    draws = np.random.default_rng(seed).normal(size=999)
    estimate = float(np.quantile(draws, norm.cdf(shift)))
    if abs(abs(shift) - norm.ppf(0.975)) < 0.05:
        return  # on the boundary the two quantile interpolations may disagree
    lo, hi = np.quantile(draws, [0.025, 0.975])
    blo, bhi = bc_interval(draws, estimate, 0.95)
    assert (lo <= estimate <= hi) == (blo <= estimate <= bhi)


def test_bias_corrected_interval_of_an_upward_biased_error():
    draws = np.linspace(0.05, 0.10, 1001)  # every draw above the estimate, as binned ECE near 0
    assert intervals.bias_corrected_interval(draws, 0.02, 0.95) == pytest.approx((0.02 - 0.02375, 0.02 + 0.02375))
    assert intervals.bias_corrected_interval(draws, 0.02, 0.95, (0.0, 1.0)) == pytest.approx((0.0, 0.04375))
    assert intervals.bias_corrected_interval(np.array([np.nan]), 0.1) == (None, None)
    assert intervals.bias_corrected_interval(draws, None) == (None, None)
    assert intervals.bias_corrected_p(np.zeros(99), 0.0) == 1.0


def test_holm():
    assert intervals.holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert intervals.holm([0.2, 0.001]) == pytest.approx([0.2, 0.002])


@settings(max_examples=300, deadline=None)
@given(draws=draws_strategy, estimate=st.floats(-1, 1), alpha=st.floats(0.001, 0.5))
def test_the_rejection_interval_excludes_0_exactly_when_the_test_rejects(draws, estimate, alpha):
    """Issue 53: the interval beside a verdict agrees with it, at the edge too (a percentile interval need not)."""
    lo, hi = intervals.rejection_interval(draws, estimate, alpha)
    p = intervals.bias_corrected_p(draws, estimate)
    if lo is None:  # too few draws for that level: the test cannot reject
        assert hi is None and p >= alpha
        return
    assert lo <= estimate <= hi
    assert (lo > 0 or hi < 0) == (p < alpha)


def test_the_rejection_interval_by_hand():
    # 19 draws −0.75, −0.65, …, 1.05, median 0.15 = the estimate (no shift); 8 draws below 0: p = 2 · 9 / 20
    draws = np.linspace(-0.75, 1.05, 19)
    assert intervals.bias_corrected_p(draws, 0.15) == pytest.approx(0.9)
    # alpha 0.5: k = ceil(0.5 · 20 / 2 − 1) − 1 = 3, the 4th and 16th draws; it holds 0, as p > 0.5
    assert intervals.rejection_interval(draws, 0.15, 0.5) == pytest.approx((-0.45, 0.75))
    # alpha 0.95: k = ceil(8.5) − 1 = 8, the 9th draw 0.05 > 0, as p < 0.95
    assert intervals.rejection_interval(draws, 0.15, 0.95) == pytest.approx((0.05, 0.25))
    assert intervals.rejection_interval(draws, 0.15, 0.01) == (None, None)  # p >= 2 / 20 always
    # Holm's multiplier read back from the adjusted p-value: p = 0.01 adjusted to 0.03 is held to 0.05 / 3
    assert intervals.holm_alpha(0.01, 0.03, 0.05) == pytest.approx(0.05 / 3)
    assert intervals.holm_alpha(None, 0.03, 0.05) is None


def test_holm_over_runs_gives_each_gap_the_interval_of_its_holm_verdict():
    """Five runs' gap draws (normal around 0, 0.02, 0.05, 0.08, 0.2; sd 0.025): each run's <gap>_p_holm is Holm's over
    the five bootstrap p-values, its level 1 − 0.05 p / p_holm, its interval the rejection interval at that level,
    and that interval excludes 0 exactly when p_holm < 0.05; an undefined gap stays undefined."""
    rng = np.random.default_rng(11)
    centres = [0.0, 0.02, 0.05, 0.08, 0.2]
    draws = [{g: rng.normal(c, 0.025, 1000) for g in metric_defs.GAPS} for c in centres]
    reports = [
        {k: v for g in metric_defs.GAPS for k, v in ((g, c), (f"{g}_p", intervals.bias_corrected_p(d[g], c)))}
        for c, d in zip(centres, draws, strict=True)
    ]
    reports.append({g: None for g in metric_defs.GAPS} | {f"{g}_p": None for g in metric_defs.GAPS})
    draws.append({})
    gap.holm_over_runs(reports, draws)
    adjusted = intervals.holm([r["gap_pred_p"] for r in reports])
    assert [r["gap_pred_p_holm"] for r in reports] == adjusted
    for r, d in zip(reports[:-1], draws, strict=False):
        held_to = 0.05 * r["gap_pred_p"] / r["gap_pred_p_holm"]
        assert r["gap_pred_level_holm"] == pytest.approx(1 - held_to)
        lo, hi = r["gap_pred_ci_low_holm"], r["gap_pred_ci_high_holm"]
        assert (lo, hi) == intervals.rejection_interval(d["gap_pred"], r["gap_pred"], held_to)
        assert (lo > 0 or hi < 0) == (r["gap_pred_p_holm"] < 0.05)
    assert sum(r["gap_pred_p_holm"] < 0.05 for r in reports[:-1]) >= 2  # not vacuous: some survive, some do not
    assert sum(r["gap_pred_p_holm"] >= 0.05 for r in reports[:-1]) >= 2
    assert all(reports[-1][f"gap_pred_{k}"] is None for k in metric_defs.GAP_HOLM)


def test_detectable_difference_of_normal_draws_is_2_8_standard_errors():
    d = np.random.default_rng(0).normal(0.1, 0.02, 200_000)
    expected = (norm.ppf(0.975) + norm.ppf(0.8)) * 0.02
    assert intervals.detectable_difference(d, 0.05, 0.8) == pytest.approx(expected, rel=0.02)


def test_detectable_difference_has_the_power_it_claims():
    """Simulate: samples whose true difference is the MDE are detected in about 80% of cases."""
    rng = np.random.default_rng(1)
    sd, n_sim = 1.0, 4000
    mde = intervals.detectable_difference(rng.normal(0, sd, 100_000))
    estimates = mde + rng.normal(0, sd, n_sim)  # the estimate's sampling distribution at the true MDE
    # each test: the bootstrap draws around the estimate; 0 outside the interval <=> |estimate| > 1.96 sd
    rejected = np.abs(estimates) > norm.ppf(0.975) * sd
    assert rejected.mean() == pytest.approx(0.8, abs=0.02)


# -------------------------------------------------------------------------------- the gap
def _group_ece(p, y, g):
    return M.binned_stats(p, y, 10, seg=np.where(g >= 0, g, -1), n_seg=2).ece()


def test_shuffled_groups_keep_sizes_and_ungrouped_pairs():
    g = np.array([0, 1, 1, -2, 0, 0, -1])
    s = gap.shuffled_groups(g, 50, np.random.default_rng(0))
    assert (s[:, [3, 6]] == g[[3, 6]]).all()
    assert ((s == 0).sum(axis=1) == 3).all() and ((s == 1).sum(axis=1) == 2).all()


def test_permutation_test_finds_a_planted_gap_and_not_a_null_one():
    rng = np.random.default_rng(2)
    n = 600
    p = rng.random(n)
    g = rng.integers(0, 2, n)
    y_null = (rng.random(n) < p).astype(float)
    y_gap = np.where(g == 1, (rng.random(n) < 0.5).astype(float), y_null)  # group 1 ignores p
    for y, small in ((y_gap, True), (y_null, False)):
        e = _group_ece(p[None], y[None], g[None])[0]
        pv = gap.permutation_p(p, y, g, float(e[1] - e[0]), 999, 0, _group_ece)
        assert (pv < 0.01) if small else (pv > 0.05)


def test_summary_gap_values_and_p_values():
    rng = np.random.default_rng(5)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(float)
    gm = np.where(rng.random(300) < 0.5, "male", "female").astype(object)
    gl = np.where(gm == "male", "female", "male").astype(object)
    r = M.summarize(p, y, gm, gl, draws=1000, seed=0)
    assert r["gap_pred"] == pytest.approx(r["ece_female"] - r["ece_male"], abs=1e-15)
    assert r["bias_gap"] == pytest.approx(abs(r["gap_pred"]), abs=1e-15)
    assert r["gap_true"] == pytest.approx(r["ece_true_female"] - r["ece_true_male"], abs=1e-15)
    for k in metric_defs.GAPS:
        assert 0 < r[f"{k}_p"] <= 1 and 0 < r[f"{k}_p_perm"] <= 1
        # the p-value agrees with the interval: significant exactly when 0 is (about) outside it
        outside = not r[f"{k}_ci_low"] <= 0 <= r[f"{k}_ci_high"]
        assert outside == (r[f"{k}_p"] < 0.05) or abs(r[f"{k}_p"] - 0.05) < 0.01


# --------------------------------------------------------------- the pipeline's reports
def _intervals(obj, where=""):
    """Every (estimate, low, high, location) in a JSON document."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            for suffix in ("_ci_low", "_ci_low_holm"):  # the 95% interval, and the one at Holm's level
                if k.endswith(suffix):
                    key = k[: -len(suffix)]
                    high = obj.get(f"{key}_ci_high{suffix.removeprefix('_ci_low')}")
                    yield obj.get(key), v, high, f"{where}/{k}"
        if "ci_low" in obj and "diff" in obj:
            yield obj["diff"], obj["ci_low"], obj["ci_high"], where
        if "ci_low_holm" in obj and "diff" in obj:
            yield obj["diff"], obj["ci_low_holm"], obj["ci_high_holm"], f"{where}/holm"
        for k, v in obj.items():
            yield from _intervals(v, f"{where}/{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _intervals(v, f"{where}/{i}")


def reports_of(reports: Path, *dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (reports / d).rglob("*.json"))


@pytest.fixture(params=["reference", "workspace"])
def reports_dir(request) -> tuple[Path, int]:
    """(a reports directory, the least number of intervals it holds): the reference runs' reports built afresh
    (every run), and the workspace's reports/ when `make repro` has put the DVC-cached detail there."""
    if request.param == "reference":
        return request.getfixturevalue("reference_reports") / "reports", 3_000
    return request.getfixturevalue("workspace_reports"), 9_000


def test_no_interval_excludes_its_estimate(reports_dir):
    """Issue 19: across every metrics, calibration, ablation and comparison report, 0 intervals
    exclude their own estimate."""
    reports, least = reports_dir
    files = reports_of(reports, "metrics", "calibration", "ablation", "compare")
    assert files, f"no reports under {reports}"
    checked, missed = 0, []
    for path in files:
        for value, lo, hi, where in _intervals(json.loads(path.read_text())):
            if value is None:
                assert lo is None and hi is None, (path, where)
                continue
            checked += 1
            if not lo <= value <= hi:
                missed.append(f"{path.relative_to(reports)}{where}: {value} not in [{lo}, {hi}]")
    assert not missed, "\n".join(missed[:20])
    assert checked > least  # every metrics report, 12 calibrated per run and every compare report


def reference_data(root: Path) -> ReportData:
    """The metrics and sample-size reports of the reference runs under ``root`` (the reference_reports tree)."""
    params = load_params(root / "params.yaml")
    data = ReportData(benchmarks=list(params.benchmarks), runs={}, references=reference_ids(params))
    for path in reports_of(root / "reports", "metrics"):
        data.metrics[(path.parent.name, path.stem)] = json.loads(path.read_text())
    for path in reports_of(root / "reports", "ablation/sample_size"):
        data.sample_size[(path.parent.name, path.stem)] = json.loads(path.read_text())
    return data


def test_permutation_and_bootstrap_gap_tests_agree_as_the_docs_say(reference_reports):
    """The agreement docs/statistics.md quotes (over the reference runs), recomputed from their metrics reports."""
    data = reference_data(reference_reports)
    a = gap_agreement(data)
    assert a["tests"] == 36
    assert (a["gap_true"]["agree"], a["gap_true"]["tests"]) == (18, 18)
    assert (a["gap_pred"]["agree"], a["gap_pred"]["tests"]) == (15, 18)
    assert a["gap_true"]["median_diff"] == 0.0
    assert round(a["gap_pred"]["median_diff"], 3) == 0.030 and round(a["all"]["max_diff"], 2) == 0.57
    assert a["disagree"] == [
        ("gap_pred", "winobias", "paper-deepseek-r1-distill-llama-8b"),
        ("gap_pred", "winogender", "paper-gpt-j-6b"),
        ("gap_pred", "winogender", "paper-llama-3.1-8b"),
    ]
    # none of them survives Holm's correction over the runs of its benchmark table
    for g, b, m in a["disagree"]:
        runs = sorted(mm for bb, mm in data.metrics if bb == b)
        adjusted = intervals.holm([data.metrics[(b, r)][f"{g}_p"] for r in runs])
        assert adjusted[runs.index(m)] >= 0.05
    # the metrics stage wrote the same Holm correction, and each gap's interval at Holm's level agrees with it
    for b in {bb for bb, _ in data.metrics}:
        runs = sorted(mm for bb, mm in data.metrics if bb == b)
        for g in metric_defs.GAPS:
            reps = [data.metrics[(b, r)] for r in runs]
            assert [r.get(f"{g}_p_holm") for r in reps] == intervals.holm([r[f"{g}_p"] for r in reps]), (b, g)
            for r in (r for r in reps if r.get(f"{g}_p_holm") is not None):
                assert (r[f"{g}_ci_low_holm"] > 0 or r[f"{g}_ci_high_holm"] < 0) == (r[f"{g}_p_holm"] < 0.05)


def test_the_recommended_small_sample_estimator_has_the_lowest_rmse(reference_reports):
    """docs/statistics.md recommends smooth ECE for small benchmarks: lowest mean RMSE at N = 50
    on the paper runs, for ECE and for Gender-ECE."""
    rmse = mean_rmse(reference_data(reference_reports))
    quoted = {
        "ece": 0.066,
        "ece_debiased": 0.079,
        "ece_smooth": 0.050,
        "gender_ece": 0.086,
        "gender_ece_debiased": 0.081,
        "gender_ece_smooth": 0.069,
    }
    assert {k: round(v, 3) for k, v in rmse.items()} == quoted
    assert rmse["ece_smooth"] < min(rmse["ece"], rmse["ece_debiased"])
    assert rmse["gender_ece_smooth"] < min(rmse["gender_ece"], rmse["gender_ece_debiased"])
