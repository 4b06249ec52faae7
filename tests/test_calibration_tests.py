"""Calibration tests (gece.stats.calibration_tests): Spiegelhalter's z against MAPIE and hand cases, its variance by
the unit sampled (exact repeats merged: against an enumeration of every outcome and against MAPIE on the distinct
pairs; the cluster sums: against a loop), consistency resampling against a loop over the same draws, Holm by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from mapie.metrics.calibration import spiegelhalter_p_value, spiegelhalter_statistic

from gece.stats.calibration_tests import (
    CLUSTERS,
    EXPECTED,
    calibration_tests,
    consistency_p,
    normal_two_sided,
    spiegelhalter,
    variance_for,
)
from gece.stats.intervals import holm
from gece.stats.metrics import ece


def test_hand_case():
    # T = (0 − 0.2)(0.6) + (1 − 0.8)(−0.6) = −0.24; V = 2 · 0.36 · 0.16 = 0.1152; z = −0.24 / √0.1152 = −1/√2
    z = spiegelhalter([0.2, 0.8], [0, 1])
    assert z[0] == pytest.approx(-1 / math.sqrt(2), abs=1e-12)
    assert normal_two_sided(z)[0] == pytest.approx(math.erfc(0.5), abs=1e-12)


def test_mapie_docstring_example():
    z = spiegelhalter([0.1, 0.9, 0.21, 0.9, 0.5], [0, 1, 0, 1, 0])
    assert round(float(z[0]), 3) == -0.757


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_overall_statistic_and_p_equal_mapie(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 1, 500)
    y = (rng.uniform(0, 1, 500) < p**1.3).astype(float)
    (test,) = calibration_tests(p, y, draws=0)
    assert test.z == pytest.approx(spiegelhalter_statistic(y, p), rel=1e-12)
    upper = spiegelhalter_p_value(y, p)  # MAPIE's p-value is one-sided, 1 − Φ(z); gece's is two-sided
    assert test.p_z == pytest.approx(2 * min(upper, 1 - upper), rel=1e-9)


def test_normal_p_value():
    assert normal_two_sided(np.array([1.959963984540054]))[0] == pytest.approx(0.05, abs=1e-12)
    assert np.isnan(normal_two_sided(np.array([np.nan]))[0])


def test_zero_variance_is_undefined():
    (test,) = calibration_tests([0.5, 0.5, 1.0], [0, 1, 1], draws=0)
    assert test.z is None and test.p_z is None


def test_cluster_variance_equals_a_loop():
    rng = np.random.default_rng(3)
    n = 300
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(0, 1, n) < p).astype(float)
    clusters = rng.integers(0, 60, n)
    seg = rng.integers(0, 2, n)
    z = spiegelhalter(p, y, seg, 2, clusters, CLUSTERS)
    for g in range(2):
        t, v = 0.0, 0.0
        for c in set(clusters[seg == g].tolist()):
            rows = (seg == g) & (clusters == c)
            u = sum((y[i] - p[i]) * (1 - 2 * p[i]) for i in np.flatnonzero(rows))
            t += u
            v += u * u
        assert z[g] == pytest.approx(t / math.sqrt(v), rel=1e-12)


def test_the_variance_follows_the_unit_sampled():
    # as many clusters as distinct pairs: each cluster is one pair's repeats; fewer: clusters group distinct pairs
    assert variance_for(771, 770) == CLUSTERS and variance_for(770, 770) == EXPECTED == variance_for(178, 178)
    p, y = np.array([0.1, 0.7, 0.3, 0.9]), np.array([0.0, 1.0, 1.0, 1.0])
    # every cluster one row: the expected variance is the independent rows' (MAPIE's z)
    assert spiegelhalter(p, y, clusters=["a", "b", "c", "d"])[0] == spiegelhalter(p, y)[0]
    assert spiegelhalter(p, y)[0] == pytest.approx(spiegelhalter_statistic(y, p), rel=1e-12)
    with pytest.raises(ValueError, match="variance"):
        spiegelhalter(p, y, variance="rows")


def test_one_duplicated_pair_barely_moves_z():
    """1,000 pairs at p = 0.2 (a = 1 − 2p = 0.6, p(1 − p) = 0.16), 250 with y = 1: T = 250 · 0.8 · 0.6 − 750 · 0.2 ·
    0.6 = 30, V = 1000 · 0.36 · 0.16 = 57.6, z = 30 / √57.6 = 3.953. One y = 0 pair repeated: T = 30 − 0.12 = 29.88 and,
    its two rows one draw, V = (999 + 2²) · 0.0576 = 57.7728, z = 3.931. The cluster sums' variance would read the
    observed spread instead, V_cl = 250 · 0.48² + 749 · 0.12² + 0.24² = 68.4432, z = 3.612: the switch, not the
    repeat, moves z."""
    p = np.full(1000, 0.2)
    y = (np.arange(1000) < 250).astype(float)
    assert spiegelhalter(p, y)[0] == pytest.approx(30 / math.sqrt(57.6), abs=1e-12)
    p2, y2 = np.append(p, 0.2), np.append(y, 0.0)
    clusters = np.append(np.arange(1000), 999)  # row 1000 repeats pair 999 (y = 0)
    merged = spiegelhalter(p2, y2, clusters=clusters, variance=EXPECTED)[0]
    assert merged == pytest.approx(29.88 / math.sqrt(1003 * 0.0576), abs=1e-12)
    assert round(float(merged), 3) == 3.931 and abs(merged - spiegelhalter(p, y)[0]) < 0.025
    switched = spiegelhalter(p2, y2, clusters=clusters, variance=CLUSTERS)[0]
    assert switched == pytest.approx(29.88 / math.sqrt(68.4432), abs=1e-12) and round(float(switched), 3) == 3.612


def test_merged_variance_is_the_exact_variance_of_t_under_calibration():
    """Five distinct pairs, two of them repeated (3 and 2 rows): enumerating all 2^5 outcomes of the distinct pairs
    (each y_c ~ Bernoulli(p_c), its repeats the same draw) gives E[T] = 0 and E[T²] = V, the merged variance."""
    p_pair = np.array([0.15, 0.35, 0.6, 0.8, 0.45])
    cluster = np.array([0, 0, 0, 1, 2, 3, 3, 4])  # rows of each distinct pair
    p = p_pair[cluster]
    mean = second = 0.0
    for outcome in itertools.product((0.0, 1.0), repeat=p_pair.size):
        y_pair = np.array(outcome)
        weight = float(np.prod(np.where(y_pair == 1, p_pair, 1 - p_pair)))
        t = float(np.sum((y_pair[cluster] - p) * (1 - 2 * p)))
        mean += weight * t
        second += weight * t * t
    y = np.array([1.0, 1, 1, 0, 1, 0, 0, 1])  # one outcome, with its repeats
    t_obs = float(np.sum((y - p) * (1 - 2 * p)))
    assert mean == pytest.approx(0.0, abs=1e-15)
    assert spiegelhalter(p, y, clusters=cluster)[0] == pytest.approx(t_obs / math.sqrt(second), rel=1e-12)


@pytest.mark.parametrize("copies", [2, 3])
def test_every_pair_repeated_alike_gives_mapie_z_of_the_distinct_pairs(copies):
    """Repeating every pair m times multiplies T by m and the merged variance by m²: z is that of the distinct pairs,
    MAPIE's statistic on them."""
    rng = np.random.default_rng(9)
    p = rng.uniform(0.05, 0.95, 200)
    y = (rng.uniform(0, 1, 200) < p**1.2).astype(float)
    z = spiegelhalter(np.repeat(p, copies), np.repeat(y, copies), clusters=np.repeat(np.arange(200), copies))[0]
    assert z == pytest.approx(spiegelhalter_statistic(y, p), rel=1e-12)
    keys = np.tile(np.arange(200), copies)  # the copies in another order
    (test,) = calibration_tests(np.tile(p, copies), np.tile(y, copies), draws=0, clusters=keys)
    assert test.z == pytest.approx(spiegelhalter_statistic(y, p), rel=1e-12)


def test_groups_are_the_subsets():
    rng = np.random.default_rng(4)
    p = rng.uniform(0, 1, 400)
    y = (rng.uniform(0, 1, 400) < p).astype(float)
    seg = rng.integers(-1, 3, 400)
    tests = calibration_tests(p, y, seg, 3, draws=0)
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


def test_consistency_draws_the_repeats_of_a_pair_once():
    """Exact repeats are one draw under the null: one uniform per cluster, y*_i = 1{U_c < p_i}; without repeats the
    draws are the rows' own, bit for bit."""
    rng = np.random.default_rng(10)
    p = np.repeat(rng.uniform(0, 1, 60), 2)[:100]  # 50 pairs, each twice
    y = (np.repeat(rng.uniform(0, 1, 60), 2)[:100] < p).astype(float)
    clusters = np.arange(100) // 2
    draws = 30
    _, p_value = consistency_p(p, y, draws=draws, seed=3, repeats=clusters)
    stream = np.random.default_rng(3)
    null = [ece(p, (u[clusters] < p).astype(float)) for u in stream.random((draws, 50))]
    assert p_value[0] == pytest.approx((1 + sum(e >= ece(p, y) - 1e-12 for e in null)) / (draws + 1))
    alone = consistency_p(p, y, draws=draws, seed=3)[1]
    assert consistency_p(p, y, draws=draws, seed=3, repeats=np.arange(100))[1] == alone


def test_consistency_rejects_a_miscalibrated_model_and_not_a_calibrated_one():
    rng = np.random.default_rng(6)
    p = rng.uniform(0, 1, 1000)
    calibrated = (rng.uniform(0, 1, 1000) < p).astype(float)
    (good,) = calibration_tests(p, calibrated, draws=200, seed=0)
    (bad,) = calibration_tests(p, (p > 0.5).astype(float), draws=200, seed=0)
    assert good.p_consistency > 0.05 and good.p_z > 0.05
    assert bad.p_consistency == pytest.approx(1 / 201) and bad.p_z < 1e-6
    assert bad.z < 0  # the labels are more extreme than p: under-confident, a better Brier score than calibration's


def test_holm_over_the_groups_by_hand():
    # three groups, p_z sorted ascending q1 <= q2 <= q3: Holm gives 3 q1, max(3 q1, 2 q2), max(.., q3), capped at 1
    rng = np.random.default_rng(8)
    p = rng.uniform(0.1, 0.9, 600)
    y = (rng.uniform(0, 1, 600) < p + 0.05 * (np.arange(600) % 3)).astype(float)
    tests = calibration_tests(p, y, np.arange(600) % 3, 3, draws=0)
    q = sorted(t.p_z for t in tests)
    want = np.minimum(1, np.maximum.accumulate([3 * q[0], 2 * q[1], q[2]]))
    assert sorted(t.p_z_holm for t in tests) == pytest.approx(list(want), rel=1e-12)


def test_untested_groups_are_none_and_out_of_the_correction():
    p, y = np.array([0.2, 0.8, 0.3, 0.6, 0.5]), np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    tests = calibration_tests(p, y, np.array([0, 0, 0, 0, 1]), 2, np.array([True, False]), draws=0)
    assert tests[1] is None
    assert tests[0].p_z_holm == pytest.approx(tests[0].p_z)


def test_bad_input():
    with pytest.raises(ValueError, match="0 or 1"):
        calibration_tests([0.5], [0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        calibration_tests([1.5], [1])
