"""gece.stats.annotations: published worked examples, the krippendorff package as an independent implementation,
and properties of the labels and agreement statistics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gece.stats import annotations as A

krippendorff = pytest.importorskip("krippendorff")

# Fleiss' kappa, Wikipedia's worked example ("Fleiss' kappa", Worked example): 10 subjects, 14 raters,
# 5 categories; published kappa = 0.210 (P-bar = 0.378, P_e = 0.213).
WIKIPEDIA_FLEISS = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers, 12 units,
# nominal data with missing values; published alpha = 0.743.
NAN = np.nan
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)


def long_form(reliability: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """coders x units (NaN = missing) -> (item, coder, category) of every value."""
    coder, unit = np.nonzero(~np.isnan(reliability))
    return unit, coder, reliability[coder, unit].astype(np.int64)


def test_fleiss_wikipedia_example():
    assert A.fleiss_kappa(WIKIPEDIA_FLEISS) == pytest.approx(0.20993, abs=5e-6)
    assert round(A.fleiss_kappa(WIKIPEDIA_FLEISS), 3) == 0.210


def test_krippendorff_2011_example():
    unit, _, cat = long_form(KRIPPENDORFF_2011)
    counts = A.count_matrix(unit, cat, 12, 6)
    assert round(A.krippendorff_alpha(counts), 3) == 0.743
    assert A.krippendorff_alpha(counts) == pytest.approx(
        krippendorff.alpha(reliability_data=KRIPPENDORFF_2011, level_of_measurement="nominal"), abs=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(2, 30), st.integers(2, 4), st.floats(0.0, 0.5), st.integers(0, 2**32 - 1))
def test_alpha_equals_the_krippendorff_package(coders, units, categories, missing, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, categories, size=(coders, units)).astype(float)
    data[rng.random(data.shape) < missing] = np.nan
    unit, _, cat = long_form(data)
    counts = A.count_matrix(unit, cat, units, categories)
    ours = A.krippendorff_alpha(counts)
    m = counts.sum(axis=1)
    pairable = counts[m >= 2].sum(axis=0)
    if ours is None:  # undefined: at most one category among the pairable values
        assert (pairable > 0).sum() <= 1
        return
    theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert ours == pytest.approx(theirs, abs=1e-10)


def test_perfect_and_chance_agreement():
    perfect = np.array([[5, 0], [0, 5], [5, 0]])
    assert A.krippendorff_alpha(perfect) == pytest.approx(1.0)
    assert A.fleiss_kappa(perfect) == pytest.approx(1.0)
    one_category = np.array([[5, 0], [5, 0]])
    assert A.krippendorff_alpha(one_category) is None
    assert A.fleiss_kappa(one_category) is None
    assert A.krippendorff_alpha(np.array([[1, 0], [0, 1]])) is None  # no item with two labels


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_alpha_and_kappa_differ_by_the_small_sample_factor(raters, items, seed):
    # with the same number of raters per item: 1 - alpha = (1 - kappa) (n - 1) / n, n = all values
    # (both from the same observed agreement; Krippendorff's expected agreement samples without replacement)
    counts = np.random.default_rng(seed).multinomial(raters, [0.6, 0.3, 0.1], size=items)
    a, k = A.krippendorff_alpha(counts), A.fleiss_kappa(counts)
    if a is None or k is None:
        assert a is None and k is None
        return
    n = counts.sum()
    assert 1 - a == pytest.approx((1 - k) * (n - 1) / n, abs=1e-12)


def test_labels_rule_and_soft_label():
    k = np.array([0, 1, 2, 3, 5, 2, 0])
    n = np.array([5, 5, 4, 5, 5, 5, 0])
    writer = np.ones(7, dtype=int)
    soft = A.soft_labels(k, n)
    np.testing.assert_allclose(soft[:6], [0, 0.2, 0.5, 0.6, 1.0, 0.4])
    assert np.isnan(soft[6])
    hard = A.hard_labels(k, n, writer, "writer")
    np.testing.assert_array_equal(hard[:6], [0, 0, 1, 1, 1, 0])  # 2 of 4 is a tie -> the writer's 1
    assert np.isnan(hard[6])
    dropped = A.hard_labels(k, n, writer, "drop")
    assert np.isnan(dropped[2]) and np.isnan(dropped[6])
    np.testing.assert_array_equal(A.ties(k, n), [False, False, True, False, False, False, False])
    assert A.hard_labels(np.array([1]), np.array([2]), np.array([0]), "writer")[0] == 0  # the writer's 0


def test_recognises_and_nominal_category():
    labels = [["gender"], [], ["race-color", "gender"], ["age"]]
    types = ["gender", "gender", "gender", "gender"]
    np.testing.assert_array_equal(A.recognises(labels, types), [True, False, True, False])
    assert A.nominal_category(labels) == ["gender", "none", "gender+race-color", "age"]


def test_vote_shares_cover_every_count():
    k = np.array([0, 5, 5, 3, 1])
    n = np.array([5, 5, 5, 5, 3])
    shares = A.vote_shares(k, n)
    assert shares == {
        "0/3": 0,
        "1/3": 1,
        "2/3": 0,
        "3/3": 0,
        "0/5": 1,
        "1/5": 0,
        "2/5": 0,
        "3/5": 1,
        "4/5": 0,
        "5/5": 2,
    }
    assert sum(shares.values()) == len(k)


def _example():
    pairs = ["p1", "p2", "p3"]
    types = ["gender", "age", "religion"]
    rows = [
        ("p1", "a", ["gender"]),
        ("p1", "b", ["gender"]),
        ("p1", "c", []),
        ("p2", "a", []),
        ("p2", "b", ["gender"]),
        ("p2", "d", ["age"]),
        ("p3", "c", ["religion"]),
        ("p3", "d", ["religion", "age"]),
    ]
    return pairs, types, rows


def test_derive_small_example():
    pairs, types, rows = _example()
    cols, rep = A.derive(
        pairs, types, np.ones(3, int), [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], "writer"
    )
    np.testing.assert_array_equal(cols["n_annotators"], [3, 3, 2])
    np.testing.assert_array_equal(cols["n_support"], [2, 1, 2])
    np.testing.assert_array_equal(cols["y_hard"], [1, 0, 1])
    assert rep["n_annotators"] == 4 and rep["n_labels"] == 8 and rep["support_rate"] == pytest.approx(5 / 8)
    # a: p1 1 (=1), p2 0 (=0) -> 1.0; b: p1 1 (=1), p2 0 (=0) -> 1.0;
    # c: p1 0 (!=1), p3 1 -> 0.5; d: p2 1 (!=0), p3 1 -> 0.5
    assert rep["annotator_agreement"] == {
        "n": 4,
        "min": 0.5,
        "q25": 0.5,
        "median": 0.75,
        "q75": 1.0,
        "max": 1.0,
        "mean": 0.75,
    }
    assert rep["vote_shares"] == {"0/2": 0, "1/2": 0, "2/2": 1, "0/3": 0, "1/3": 1, "2/3": 1, "3/3": 0}
    assert rep["n_hard"] == {"1": 2, "0": 1, "tie": 0, "none": 0}


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_derive_does_not_depend_on_row_order(seed):
    rng = np.random.default_rng(seed)
    n_pairs, n_labels = 12, 60
    types = ["gender", "age", "race-color"]
    pair_type = list(rng.choice(types, n_pairs))
    pairs = [f"p{i}" for i in range(n_pairs)]
    item = rng.integers(0, n_pairs, n_labels)
    who = [f"a{j}" for j in rng.integers(0, 8, n_labels)]
    labels = [list(rng.choice(types, rng.integers(0, 3), replace=False)) for _ in range(n_labels)]
    args = (pairs, pair_type, np.ones(n_pairs, int))
    cols, rep = A.derive(*args, [pairs[i] for i in item], who, labels)
    perm = rng.permutation(n_labels)
    cols2, rep2 = A.derive(*args, [pairs[item[i]] for i in perm], [who[i] for i in perm], [labels[i] for i in perm])
    assert _same(rep, rep2)
    for key in cols:
        np.testing.assert_array_equal(cols[key], cols2[key])
    assert sum(rep["vote_shares"].values()) == rep["n_annotated"]
    soft = cols["y_soft"][~np.isnan(cols["y_soft"])]
    assert ((soft >= 0) & (soft <= 1)).all()


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, abs=1e-12)
    return a == b


def test_derive_without_annotations():
    cols, rep = A.derive(["p1", "p2"], ["gender", "age"], np.ones(2, int), [], [], [])
    assert rep["n_annotated"] == 0 and rep["alpha"]["binary"] is None and rep["reason"]
    assert np.isnan(cols["y_soft"]).all() and np.isnan(cols["y_hard"]).all()
    assert rep["vote_shares"] == {} and rep["annotator_agreement"] is None
