"""Calibration tests (gece.stats.calibration_tests): Spiegelhalter's z against MAPIE and hand cases, its
cluster-level variance against a loop, consistency resampling against a loop over the same draws, Holm by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mapie.metrics.calibration import spiegelhalter_p_value, spiegelhalter_statistic

from gece.stats.calibration_tests import calibration_tests, consistency_p, normal_two_sided, spiegelhalter
from gece.stats.intervals import holm
from gece.stats.metrics import ece


def test_hand_case():
    # T = (0 − 0.2)(0.6) + (1 − 0.8)(−0.6) = −0.24; V = 2 · 0.36 · 0.16 = 0.1152; z = −0.24 / √0.1152 = −1/√2
    z, kind = spiegelhalter([0.2, 0.8], [0, 1])
    assert kind == "rows"
    assert z[0] == pytest.approx(-1 / math.sqrt(2), abs=1e-12)
    assert normal_two_sided(z)[0] == pytest.approx(math.erfc(0.5), abs=1e-12)


def test_mapie_docstring_example():
    z, _ = spiegelhalter([0.1, 0.9, 0.21, 0.9, 0.5], [0, 1, 0, 1, 0])
    assert round(float(z[0]), 3) == -0.757


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_overall_statistic_and_p_equal_mapie(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 1, 500)
    y = (rng.uniform(0, 1, 500) < p**1.3).astype(float)
    (test,), kind = calibration_tests(p, y, draws=0)
    assert kind == "rows"
    assert test.z == pytest.approx(spiegelhalter_statistic(y, p), rel=1e-12)
    upper = spiegelhalter_p_value(y, p)  # MAPIE's p-value is one-sided, 1 − Φ(z); gece's is two-sided
    assert test.p_z == pytest.approx(2 * min(upper, 1 - upper), rel=1e-9)


def test_normal_p_value():
    assert normal_two_sided(np.array([1.959963984540054]))[0] == pytest.approx(0.05, abs=1e-12)
    assert np.isnan(normal_two_sided(np.array([np.nan]))[0])


def test_zero_variance_is_undefined():
    (test,), _ = calibration_tests([0.5, 0.5, 1.0], [0, 1, 1], draws=0)
    assert test.z is None and test.p_z is None


def test_cluster_variance_equals_a_loop():
    rng = np.random.default_rng(3)
    n = 300
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(0, 1, n) < p).astype(float)
    clusters = rng.integers(0, 60, n)
    seg = rng.integers(0, 2, n)
    z, kind = spiegelhalter(p, y, seg, 2, clusters)
    assert kind == "clusters"
    for g in range(2):
        t, v = 0.0, 0.0
        for c in set(clusters[seg == g].tolist()):
            rows = (seg == g) & (clusters == c)
            u = sum((y[i] - p[i]) * (1 - 2 * p[i]) for i in np.flatnonzero(rows))
            t += u
            v += u * u
        assert z[g] == pytest.approx(t / math.sqrt(v), rel=1e-12)


def test_single_row_clusters_use_the_row_variance():
    p, y = np.array([0.1, 0.7, 0.3, 0.9]), np.array([0.0, 1.0, 1.0, 1.0])
    assert spiegelhalter(p, y, clusters=["a", "b", "c", "d"])[1] == "rows"
    assert spiegelhalter(p, y, clusters=["a", "a", "c", "d"])[1] == "clusters"
    assert spiegelhalter(p, y, clusters=["a", "b", "c", "d"])[0][0] == spiegelhalter(p, y)[0][0]


def test_groups_are_the_subsets():
    rng = np.random.default_rng(4)
    p = rng.uniform(0, 1, 400)
    y = (rng.uniform(0, 1, 400) < p).astype(float)
    seg = rng.integers(-1, 3, 400)
    tests, _ = calibration_tests(p, y, seg, 3, draws=0)
    for g in range(3):
        assert tests[g].z == pytest.approx(spiegelhalter_statistic(y[seg == g], p[seg == g]), rel=1e-12)
        assert tests[g].n == int((seg == g).sum())
        assert tests[g].ece == pytest.approx(ece(p[seg == g], y[seg == g]), abs=1e-12)
    assert [t.p_z_holm for t in tests] == pytest.approx(holm([t.p_z for t in tests]))


def test_consistency_p_equals_a_loop_over_the_same_draws():
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 1, 120)
    y = (rng.uniform(0, 1, 120) < p).astype(float)
    draws = 40
    observed, p_value = consistency_p(p, y, draws=draws, seed=7)
    stream = np.random.default_rng(7)
    null = [ece(p, (u < p).astype(float)) for u in stream.random((draws, p.size))]
    assert observed[0] == pytest.approx(ece(p, y), abs=1e-12)
    assert p_value[0] == pytest.approx((1 + sum(e >= observed[0] - 1e-12 for e in null)) / (draws + 1))


def test_consistency_rejects_a_miscalibrated_model_and_not_a_calibrated_one():
    rng = np.random.default_rng(6)
    p = rng.uniform(0, 1, 1000)
    calibrated = (rng.uniform(0, 1, 1000) < p).astype(float)
    (good,), _ = calibration_tests(p, calibrated, draws=200, seed=0)
    (bad,), _ = calibration_tests(p, (p > 0.5).astype(float), draws=200, seed=0)
    assert good.p_consistency > 0.05 and good.p_z > 0.05
    assert bad.p_consistency == pytest.approx(1 / 201) and bad.p_z < 1e-6
    assert bad.z < 0  # the labels are more extreme than p: under-confident, a better Brier score than calibration's


def test_holm_over_the_groups_by_hand():
    # three groups, p_z sorted ascending q1 <= q2 <= q3: Holm gives 3 q1, max(3 q1, 2 q2), max(.., q3), capped at 1
    rng = np.random.default_rng(8)
    p = rng.uniform(0.1, 0.9, 600)
    y = (rng.uniform(0, 1, 600) < p + 0.05 * (np.arange(600) % 3)).astype(float)
    tests, _ = calibration_tests(p, y, np.arange(600) % 3, 3, draws=0)
    q = sorted(t.p_z for t in tests)
    want = np.minimum(1, np.maximum.accumulate([3 * q[0], 2 * q[1], q[2]]))
    assert sorted(t.p_z_holm for t in tests) == pytest.approx(list(want), rel=1e-12)


def test_untested_groups_are_none_and_out_of_the_correction():
    p, y = np.array([0.2, 0.8, 0.3, 0.6, 0.5]), np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    tests, _ = calibration_tests(p, y, np.array([0, 0, 0, 0, 1]), 2, np.array([True, False]), draws=0)
    assert tests[1] is None
    assert tests[0].p_z_holm == pytest.approx(tests[0].p_z)


def test_bad_input():
    with pytest.raises(ValueError, match="0 or 1"):
        calibration_tests([0.5], [0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        calibration_tests([1.5], [1])
