"""Metrics: cross-checks against independent libraries, properties, degenerate inputs, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from netcal.metrics import ECE as NetcalECE
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss
from torchmetrics.classification import BinaryCalibrationError

from gece.cli import main
from gece.stats import metrics as M
from gece.stats.bootstrap import bootstrap, percentile_interval


def synthetic(n, seed, power=1.0):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    y = (rng.random(n) < p**power).astype(np.int64)
    return p, y


MALE = np.array(["male"], dtype=object)
FEMALE = np.array(["female"], dtype=object)


def genders(n):
    return np.repeat(MALE, n), np.repeat(FEMALE, n)


# ------------------------------------------------------------- independent libraries
@pytest.mark.parametrize("n, seed, bins", [(50, 0, 10), (771, 1, 10), (837, 2, 15), (178, 3, 5)])
def test_paper_ece_equals_torchmetrics_and_netcal(n, seed, bins):
    p, y = synthetic(n, seed, power=1.7)
    ours = M.ece(p, y, bins)
    tm = BinaryCalibrationError(n_bins=bins, norm="l1")(torch.tensor(p), torch.tensor(y)).item()
    nc = NetcalECE(bins=bins).measure(p, y)
    assert ours == pytest.approx(tm, abs=1e-12) and ours == pytest.approx(nc, abs=1e-12)


@pytest.mark.parametrize("n, seed", [(200, 4), (771, 5)])
def test_toplabel_ece_equals_netcal_on_confidence_and_correct(n, seed):
    p, y = synthetic(n, seed, power=0.6)
    conf, correct = np.maximum(p, 1 - p), ((p > 0.5) == y).astype(int)
    assert M.ece_toplabel(p, y) == pytest.approx(NetcalECE(bins=10).measure(conf, correct), abs=1e-12)


@pytest.mark.parametrize("binning, strategy", [("equal_width", "uniform"), ("equal_mass", "quantile")])
def test_bins_equal_sklearn_calibration_curve(binning, strategy):
    p, y = synthetic(500, 6)
    table = M.reliability_table(p, y, 10, binning)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy=strategy)
    filled = table.count > 0
    np.testing.assert_allclose(table.accuracy[filled], prob_true, atol=1e-12)
    np.testing.assert_allclose(table.confidence[filled], prob_pred, atol=1e-12)
    edges = np.r_[table.lower, table.upper[-1]]
    expected = np.linspace(0, 1, 11) if binning == "equal_width" else np.percentile(p, np.linspace(0, 100, 11))
    np.testing.assert_allclose(edges, expected, atol=1e-15)
    if binning == "equal_mass":
        assert (table.count == 50).all()


def test_brier_equals_sklearn():
    p, y = synthetic(300, 7)
    assert M.brier(p, y) == pytest.approx(brier_score_loss(y, p), abs=1e-15)
    assert M.brier_paper(p, y) == pytest.approx(brier_score_loss(y, 1 - p), abs=1e-15)


# ----------------------------------------------------------------- exact conventions
def test_bin_boundaries_follow_the_paper():
    # (m/M, (m+1)/M]: 0.3 belongs to the bin (0.2, 0.3], 0 to the first bin
    p = np.array([0.0, 0.3, 0.30000000000000004, 1.0])
    table = M.reliability_table(p, np.array([0, 1, 1, 1]), 10)
    assert table.count.tolist() == [1, 0, 1, 1, 0, 0, 0, 0, 0, 1]


def test_hand_computed_example():
    p = np.array([0.9, 0.8, 0.3, 0.6, 0.5])
    y = np.array([1, 0, 0, 1, 1])
    # paper bins: 0.9 -> (0.8,0.9], 0.8 -> (0.7,0.8], 0.3 -> (0.2,0.3], 0.6 -> (0.5,0.6], 0.5 -> (0.4,0.5]
    assert M.ece(p, y) == pytest.approx((0.1 + 0.8 + 0.3 + 0.4 + 0.5) / 5)
    # pred = [1,1,0,1,0] (0.5 is not > 0.5); correct = [1,0,1,1,0]; conf = [.9,.8,.7,.6,.5]
    assert M.accuracy(p, y) == pytest.approx(0.6)
    assert M.ice(p, y) == pytest.approx((0.1 + 0.8 + 0.3 + 0.4 + 0.5) / 5)
    assert M.macro_ce(p, y) == pytest.approx(0.5 * ((0.1 + 0.3 + 0.4) / 3 + (0.8 + 0.5) / 2))
    assert M.mce(p, y) == pytest.approx(0.8)
    g = M.gender_ece(p, y, *genders(5))
    # predicted male: p in {.9,.8,.6}; female: {.3}; tie: 0.5
    assert (g.n_male, g.n_female, g.n_ties) == (3, 1, 1)
    assert g.ece_male == pytest.approx((0.1 + 0.8 + 0.4) / 3) and g.ece_female == pytest.approx(0.3)
    assert g.gender_ece == pytest.approx(0.5 * ((0.1 + 0.8 + 0.4) / 3 + 0.3))
    cc = M.cc_ece(p, y, *genders(5))
    # true male (y=1): p .9,.6,.5 -> |1-.9|,|1-.6|,|1-.5| in separate bins; true female: .8,.3
    assert cc["ece_true_male"] == pytest.approx((0.1 + 0.4 + 0.5) / 3)
    assert cc["ece_true_female"] == pytest.approx((0.8 + 0.3) / 2)


def test_predicted_gender_follows_the_more_probable_side():
    # a benchmark whose sent_more is female: predicted gender flips with it
    pg = M.predicted_groups(
        np.array([0.7, 0.2]), np.array(["female", "male"], object), np.array(["male", "female"], object)
    )
    assert pg.tolist() == [M.G_FEMALE, M.G_FEMALE]


def test_group_ece_by_any_attribute():
    p, y = synthetic(400, 8)
    groups = np.array(["nurse", "chef", None, "chef"] * 100, dtype=object)
    res = M.group_ece(p, y, groups)
    assert set(res) == {"chef", "nurse"}
    sel = groups == "nurse"
    assert res["nurse"] == pytest.approx(M.ece(p[sel], y[sel]), abs=1e-15)


def test_equal_mass_groups_bin_their_own_scores():
    p, y = synthetic(600, 9)
    g = np.where(p > 0.5, "male", "female").astype(object)
    res = M.gender_ece(p, y, *genders(600), binning="equal_mass")
    assert res.ece_male == pytest.approx(M.ece(p[g == "male"], y[g == "male"], binning="equal_mass"), abs=1e-15)
    assert res.ece_female == pytest.approx(M.ece(p[g == "female"], y[g == "female"], binning="equal_mass"), abs=1e-15)


# ----------------------------------------------------------------- degenerate input
def test_empty_input_gives_nulls_with_reasons():
    r = M.summarize(np.array([]), np.array([]), np.array([], object), np.array([], object))
    assert r["n"] == 0 and all(r[k] is None for k in M.SCALARS)
    assert r["ece_ci_low"] is None and "ece: no pairs" in r["null_reasons"]
    assert M.ece([], []) is None and M.brier([], []) is None


def test_empty_group_is_null_not_zero():
    p = np.array([0.9, 0.7, 0.8, 0.6])
    y = np.array([1, 0, 1, 1])
    r = M.summarize(p, y, *genders(4), draws=1000)
    assert r["ece_male"] is not None and r["ece_female"] is None and r["gender_ece"] is None
    assert "ece_female: no pair is predicted female" in r["null_reasons"]
    assert "gender_ece: no pair is predicted female" in r["null_reasons"]
    assert r["gender_ece_ci_low"] is None


def test_all_one_class_labels_work():
    p, _ = synthetic(100, 10)
    y = np.ones(100)
    r = M.summarize(p, y, *genders(100))
    assert r["ece"] == pytest.approx(np.mean(1 - p)) and r["accuracy"] == pytest.approx(np.mean(p > 0.5))
    assert r["pct_stereotype"] == r["accuracy"]  # the identity protocol (y = 1): preferring sent_more is agreeing
    assert r["ece_true_female"] is None and "no pair has a female human-preferred variant" in r["null_reasons"]
    assert r["ece_true_male"] == pytest.approx(r["ece"])


def test_macro_ce_undefined_when_all_correct():
    p = np.array([0.9, 0.2])
    y = np.array([1, 0])
    assert M.macro_ce(p, y) is None
    r = M.summarize(p, y, *genders(2))
    assert "macro_ce: every prediction is correct" in r["null_reasons"]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        M.ece([1.2], [1])
    with pytest.raises(ValueError, match="0 or 1"):
        M.ece([0.2], [2])
    with pytest.raises(ValueError, match="differ in length"):
        M.ece([0.2, 0.3], [1])


# ------------------------------------------------------------------------ properties
prob = arrays(np.float64, st.integers(1, 300), elements=st.floats(0, 1, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(p=prob, seed=st.integers(0, 2**16), bins=st.integers(1, 20), binning=st.sampled_from(M.BINNINGS))
def test_every_metric_in_unit_interval_and_permutation_invariant(p, seed, bins, binning):
    rng = np.random.default_rng(seed)
    y = (rng.random(p.size) < 0.5).astype(float)
    gm, gl = genders(p.size)
    a = M.batch_metrics(p, y, M.predicted_groups(p, gm, gl), M.true_groups(y, gm, gl), bins, binning)
    perm = rng.permutation(p.size)
    b = M.batch_metrics(
        p[perm], y[perm], M.predicted_groups(p[perm], gm, gl), M.true_groups(y[perm], gm, gl), bins, binning
    )
    for k in M.SCALARS:
        v, w = a[k][0], b[k][0]
        assert np.isnan(v) == np.isnan(w), k
        if not np.isnan(v):
            low = -1 - 1e-12 if k in M.SIGNED else -1e-12  # the signed gaps lie in [-1, 1]
            assert low <= v <= 1 + 1e-12, k
            # smooth ECE is a root found to 1e-7: summation order can move it by up to that (5e-9 was seen)
            assert v == pytest.approx(w, abs=1e-7 if "smooth" in k else 1e-12), k


@pytest.mark.parametrize("binning", M.BINNINGS)
def test_perfectly_calibrated_sample_has_ece_near_zero(binning):
    p, y = synthetic(200_000, 11)
    assert M.ece(p, y, binning=binning) < 0.006
    assert M.ece_toplabel(p, y, binning=binning) < 0.006
    g = M.gender_ece(p, y, *genders(p.size), binning=binning)
    assert g.gender_ece < 0.01


@settings(max_examples=25, deadline=None)
@given(p=arrays(np.float64, st.integers(5, 200), elements=st.floats(0.01, 0.99)), seed=st.integers(0, 999))
def test_bootstrap_ci_contains_point_estimate(p, seed):
    y = (np.random.default_rng(seed).random(p.size) < p).astype(float)
    r = M.summarize(p, y, *genders(p.size), draws=1000, seed=seed)
    for k in M.SCALARS:  # every interval contains its estimate (bias-corrected, gece.stats.intervals)
        if r[k] is not None:
            assert r[f"{k}_ci_low"] <= r[k] <= r[f"{k}_ci_high"], k


def test_bootstrap_ci_contains_ece_on_real_sized_sample():
    p, y = synthetic(771, 12, power=1.5)
    r = M.summarize(p, y, *genders(771))
    for k in M.SCALARS:
        assert r[f"{k}_ci_low"] <= r[k] <= r[f"{k}_ci_high"], k


def test_bootstrap_is_seeded_and_vectorized_resampling_matches_a_loop():
    p, y = synthetic(120, 13)
    gm, gl = genders(120)
    arrays_ = {"p": p, "y": y, "pred_group": M.predicted_groups(p, gm, gl), "true_group": M.true_groups(y, gm, gl)}
    a = bootstrap(M.batch_metrics, arrays_, 300, seed=5)
    b = bootstrap(M.batch_metrics, arrays_, 300, seed=5, chunk=7)
    np.testing.assert_array_equal(a["ece"], bootstrap(M.batch_metrics, arrays_, 300, seed=5)["ece"])
    # chunking changes nothing but memory
    assert a["ece"].shape == b["ece"].shape == (300,)
    # the batched kernel on draw k equals the 1-D function on that resample
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 120, size=(250, 120))[3]
    assert a["ece"][3] == pytest.approx(M.ece(p[idx], y[idx]), abs=1e-15)
    assert percentile_interval(np.array([np.nan, np.nan])) == (None, None)


# ------------------------------------------------------------------------------ CLI
def test_metrics_cli_table_and_json(reference_scores, capsys, tmp_path):
    path = reference_scores[("winobias", "gpt-j-6b")]
    assert main(["--params", "params.yaml", "metrics", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ece"] == pytest.approx(0.15764973445164981, abs=1e-12) and data["n"] == 771
    assert (
        main(
            [
                "metrics",
                str(path),
                "--n-bins",
                "15",
                "--out",
                str(tmp_path / "m.json"),
                "--bins-out",
                str(tmp_path / "b.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "winobias / paper-gpt-j-6b" in out and "gender_ece" in out and "15 equal-width bins" in out
    assert len(json.loads((tmp_path / "b.json").read_text())) == 15
    assert json.loads((tmp_path / "m.json").read_text())["n_bins"] == 15


def test_metrics_json_has_exactly_the_documented_keys(reference_scores, capsys):
    main(["metrics", str(reference_scores[("winogender", "qwen2.5-7b")]), "--json"])
    keys = list(json.loads(capsys.readouterr().out))
    expected = [
        "n",
        "n_distinct",
        "n_clusters",
        "pct_stereotype_se_rows",
        "pct_stereotype_se_clustered",
        "n_punct_only",
        "n_ties",
        "n_bins",
        "binning",
        "ece",
        "ece_toplabel",
        "mce",
        "ice",
        "macro_ce",
        "brier",
        "brier_paper",
        "accuracy",
        "pct_stereotype",
        "gender_ece",
        "ece_male",
        "ece_female",
        "bias_gap",
        "cc_ece",
        "ece_true_male",
        "ece_true_female",
        "ece_debiased",
        "ece_smooth",
        "gender_ece_debiased",
        "gender_ece_smooth",
        "gap_pred",
        "gap_true",
    ]
    expected += [f"{k}_{s}" for k in expected[expected.index("ece") :] for s in ("ci_low", "ci_high")]
    expected += ["gap_pred_p", "gap_pred_p_perm", "gap_true_p", "gap_true_p_perm"]
    assert keys == expected


@pytest.mark.parametrize("n_bins", [1, 2, 3, 7, 10, 15, 20, 100])
def test_fast_equal_width_index_equals_searchsorted_at_and_around_every_edge(n_bins):
    edges = M.equal_width_edges(n_bins)
    rng = np.random.default_rng(n_bins)
    v = np.clip(np.concatenate([rng.random(20_000), edges, np.nextafter(edges, 2), np.nextafter(edges, -1)]), 0, 1)
    np.testing.assert_array_equal(M._equal_width_index(v, edges), np.searchsorted(edges[1:-1], v, side="left"))


@settings(max_examples=40, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 400), elements=st.floats(0, 1)), n_bins=st.integers(1, 25))
def test_grouped_equal_mass_edges_are_bit_identical_to_numpy_quantile(v, n_bins):
    keys = np.zeros(v.size, dtype=np.int64)
    edges = M._grouped_quantile_edges(v, keys, 1, n_bins)[0]
    np.testing.assert_array_equal(edges, np.quantile(v, np.arange(n_bins + 1) / n_bins))
    # and the grouped assignment equals searchsorted on those edges
    idx = M._grouped_searchsorted(edges[None, 1:-1], v, keys)
    np.testing.assert_array_equal(idx, np.searchsorted(edges[1:-1], v, side="left"))


def test_pct_stereotype_is_the_share_preferring_sent_more_whatever_the_labels():
    p = np.array([0.9, 0.7, 0.5, 0.2, 0.6, 0.5 + 1e-12])
    y = np.array([0, 1, 1, 0, 0, 1])
    r = M.summarize(p, y, *genders(6), draws=1000)
    assert r["pct_stereotype"] == 4 / 6  # an exact tie (p = 0.5) prefers neither sentence: not counted
    assert r["accuracy"] == 3 / 6  # p > 0.5 agreeing with y (a tie predicts sent_less, y = 0)
    assert r["pct_stereotype_ci_low"] <= 4 / 6 <= r["pct_stereotype_ci_high"] <= 1.0
