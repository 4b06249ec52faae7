"""Statistics that resample clusters, not rows (docs/metrics.md "Repeated pairs and clusters"): known answers."""

from __future__ import annotations

import math

import numpy as np

from gece.stats import metrics
from gece.stats.bootstrap import bootstrap, cluster_codes
from gece.stats.gap import null_statistics, permutation_p, shuffled_clusters
from gece.stats.intervals import clustered_se


def _mean(x):
    return {"mean": x.mean(axis=1)}


def _run(n, seed=3):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    y = (rng.random(n) < p).astype(np.float64)
    g = rng.integers(0, 2, n)
    return p, y, g


def test_singleton_clusters_are_the_row_bootstrap_bit_for_bit():
    p, y, g = _run(300)
    arrays = {"p": p, "y": y, "pred_group": g, "true_group": 1 - g}
    rows = bootstrap(metrics.batch_metrics, arrays, 600, 7)
    singles = bootstrap(metrics.batch_metrics, arrays, 600, 7, clusters=np.arange(300).astype(str))
    assert rows.keys() == singles.keys()
    for k in rows:
        np.testing.assert_array_equal(rows[k], singles[k])
    assert cluster_codes(np.array(["a", "b", "c"]), 3) is None


def test_the_cluster_bootstrap_of_repeats_is_the_row_bootstrap_of_the_distinct_values():
    """Each of K distinct values repeated 4 times, the repeats one cluster: a draw picks clusters exactly as the
    row bootstrap of the K values picks rows (one stream, K picks per draw), so the means agree."""
    values = np.random.default_rng(0).random(40)
    repeated = np.repeat(values, 4)
    by_cluster = bootstrap(_mean, {"x": repeated}, 200, 11, clusters=np.repeat(np.arange(40), 4))["mean"]
    distinct = bootstrap(_mean, {"x": values}, 200, 11)["mean"]
    np.testing.assert_allclose(by_cluster, distinct, rtol=0, atol=1e-15)
    # the row bootstrap of the repeated rows pretends to 4x the evidence: its spread is about half
    rows = bootstrap(_mean, {"x": repeated}, 2000, 11)["mean"]
    wide = bootstrap(_mean, {"x": repeated}, 2000, 11, clusters=np.repeat(np.arange(40), 4))["mean"]
    assert 1.7 < wide.std() / rows.std() < 2.3


def test_clusters_keep_their_order_of_first_appearance():
    codes, k = cluster_codes(np.array(["b", "a", "b", "c", "a"]), 5)
    assert k == 3 and list(codes) == [0, 1, 0, 2, 1]


def test_miller_clustered_se_by_hand():
    s = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    clusters = np.array(["a", "a", "b", "b", "c", "c"])
    dev = s - 0.5  # s̄ = 0.5; cluster sums of the deviations: 1.0, 0.0, -1.0
    assert clustered_se(s, clusters) == math.sqrt(1.0 + 0.0 + 1.0) / 6
    assert clustered_se(s) == math.sqrt(np.sum(dev**2)) / 6  # singletons: the usual SE
    # k-fold repeats counted once: the SE of the distinct values
    values = np.random.default_rng(2).random(50)
    assert math.isclose(
        clustered_se(np.repeat(values, 3), np.repeat(np.arange(50), 3)), clustered_se(values), rel_tol=1e-12
    )
    assert clustered_se([]) is None


def test_miller_se_agrees_with_the_cluster_bootstrap():
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 9, 150)
    effect = rng.normal(0, 0.3, 150)
    x = np.concatenate([np.clip(0.5 + e + rng.normal(0, 0.1, k), 0, 1) for e, k in zip(effect, sizes, strict=True)])
    clusters = np.repeat(np.arange(150), sizes)
    draws = bootstrap(_mean, {"x": x}, 4000, 1, clusters=clusters)["mean"]
    assert abs(draws.std() / clustered_se(x, clusters) - 1) < 0.07  # 4000 draws: Monte-Carlo error about 2%


def test_singleton_clusters_give_todays_permutation_p():
    p, y, g = _run(200)
    stat = lambda pp, yy, gg: metrics.binned_stats(pp, yy, 10, "equal_width", seg=gg, n_seg=2).ece()  # noqa: E731
    a = permutation_p(p, y, g, 0.05, 500, 4, stat)
    b = permutation_p(p, y, g, 0.05, 500, 4, stat, clusters=np.arange(200))
    assert a == b
    np.testing.assert_array_equal(
        null_statistics(p, y, g, 300, 4, lambda pp, yy, gg: gg.mean(axis=1)),
        null_statistics(p, y, g, 300, 4, lambda pp, yy, gg: gg.mean(axis=1), np.arange(200)),
    )


def test_a_restricted_permutation_moves_whole_clusters():
    codes = np.array([0, 0, 1, 2, 2, 3, 4, 4, 5])  # sizes 2, 1, 2, 1, 2, 1
    groups = np.array([1, 0, 1, 0, 0, 1, 1, 1, 0])
    out = shuffled_clusters(groups, codes, 200, np.random.default_rng(0))
    pairs_of = {c: np.flatnonzero(codes == c) for c in range(6)}
    blocks = {c: tuple(groups[i]) for c, i in pairs_of.items()}
    blocks = {c: tuple(sorted(b)) for c, b in blocks.items()}
    for row in out:
        got = [tuple(sorted(row[i])) for c, i in pairs_of.items()]
        for c, labels in zip(pairs_of, got, strict=True):  # each cluster got the labels of one of its size
            assert labels in {blocks[d] for d in pairs_of if len(pairs_of[d]) == len(pairs_of[c])}
        assert sorted(got) == sorted(blocks.values())  # a permutation of the clusters' label multisets
    assert {tuple(r[pairs_of[0]]) for r in out} == {(0, 1), (1, 0), (0, 0), (1, 1)}  # moved within clusters too
    assert len({tuple(r) for r in out}) > 5


def test_the_metrics_report_counts_distinct_pairs_clusters_and_punctuation_only_pairs():
    """run_metrics on 6 rows: 4 distinct pairs in 2 clusters, 2 pairs scored on punctuation only; the target rule's
    null flag gives no count."""
    import pandas as pd

    from gece.io.settings.sections import MetricsParams
    from gece.pipeline.metrics import run_metrics

    ids = [f"p{i}" for i in range(6)]
    scores = pd.DataFrame(
        {
            "pair_id": ids,
            "p": [0.9, 0.2, 0.7, 0.6, 0.9, 0.4],
            "y": 1,
            "gender_more": "male",
            "gender_less": "female",
            "scored_punct_only": [True, False, True, False, False, False],
        }
    )
    pairs = pd.DataFrame(
        {
            "sent_more": ["a", "b", "c", "d", "a", "b"],
            "sent_less": ["A", "B", "C", "D", "A", "B"],
            "cluster": ["t1", "t1", "t2", "t2", "t1", "t1"],
        },
        index=pd.Index(ids, name="pair_id"),
    )
    report, _ = run_metrics(scores, MetricsParams(bootstrap=1000), pairs)
    assert (report["n"], report["n_distinct"], report["n_clusters"], report["n_punct_only"]) == (6, 4, 2, 2)
    report, _ = run_metrics(scores.assign(scored_punct_only=None), MetricsParams(bootstrap=1000), pairs)
    assert report["n_punct_only"] is None


def test_the_pipeline_metrics_count_the_pairs_scored_on_punctuation_only(workspace_reports):
    """The metrics stage reads the flag through the run reader (runs.RUN_COLUMNS): WinoQueer's 2,583 pairs that
    start alike end in their differing word, so under shared only the final "." is scored; none under sentence;
    null under the target rule. Every run's reports are DVC outputs (after `make repro`); on a clean clone the e2e
    slice checks the flag (tests/e2e/test_pipeline_determinism.py: 0 under sentence, null under target)."""
    import json

    def counts(b: str) -> set:
        return {json.loads(f.read_text())["n_punct_only"] for f in (workspace_reports / "metrics" / b).glob("*.json")}

    assert counts("winoqueer_shared") == {2583}
    assert counts("winoqueer") == {0}
    assert counts("winobias") == {None}
