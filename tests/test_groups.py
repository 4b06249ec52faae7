"""Calibration by group (gece.stats.by_group, the groups stage): real values, cross-checks and properties."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gece.base.errors import GeceError
from gece.io.files.json_reader import read_json
from gece.io.files.readers import read_table
from gece.io.files.writer import write_table
from gece.io.schemas.groups_report import GroupsReport
from gece.io.schemas.pair_rows import SCORE_PAIR_COLUMNS, AnnotatedPair, PreparedPair, ScoreRow
from gece.io.settings.params import Params, load_params
from gece.pipeline import groups as stage
from gece.pipeline import runs
from gece.report.group_tables import groups_doc
from gece.report.markdown import doc_markdown
from gece.stats import by_group, metrics
from gece.stats.calibration_tests import spiegelhalter

from .conftest import PAPER_MODELS, ROOT


# ------------------------------------------------------------------ real values
@pytest.fixture(scope="module")
def winobias_runs(prepared_dir, data_dir) -> dict[str, pd.DataFrame]:
    """The authors' six runs of WinoBias as score tables."""
    return {
        m: runs.reference_scores(
            prepared_dir / "winobias.parquet", data_dir / "reference" / "winobias" / f"{m}.csv", f"paper-{m}"
        )[0]
        for m in PAPER_MODELS
    }


def _by(scores: pd.DataFrame, kind: str, clusters: np.ndarray | None = None) -> by_group.GroupResult:
    p, y = scores["p"].to_numpy(np.float64), scores["y"].to_numpy(np.float64)
    labels, why = by_group.gender_grouping(
        kind, p, y, scores["gender_more"].to_numpy(object), scores["gender_less"].to_numpy(object)
    )
    return by_group.calibration_by_group(p, y, labels, left_out=why, clusters=clusters)


@pytest.mark.parametrize("model", PAPER_MODELS)
def test_gender_groupings_are_the_metrics_reports_parts(winobias_runs, prepared_dir, reference_reports, model):
    """By predicted gender: ece_male, ece_female and bias_gap of the metrics stage's report, intervals included
    (same seed, draws and clusters: the same resamples); by human gender: ece_true_male and ece_true_female."""
    report = read_json(reference_reports / "reports" / "metrics" / "winobias" / f"paper-{model}.json")
    scores = winobias_runs[model]
    pairs = pd.read_parquet(prepared_dir / "winobias.parquet").set_index("pair_id")
    pred = _by(scores, "pred_gender", pairs.loc[scores["pair_id"], "cluster"].to_numpy(object))
    cells = {g.group: g for g in pred.groups}
    for gender in ("male", "female"):
        assert cells[gender].ece == report[f"ece_{gender}"]
        assert (cells[gender].ci_low, cells[gender].ci_high) == (
            report[f"ece_{gender}_ci_low"],
            report[f"ece_{gender}_ci_high"],
        )
    assert pred.gap.gap == pytest.approx(report["bias_gap"], abs=1e-15)
    assert pred.gap.ci_low == pytest.approx(report["bias_gap_ci_low"], abs=1e-15)
    assert pred.gap.ci_high == pytest.approx(report["bias_gap_ci_high"], abs=1e-15)
    assert pred.n + pred.n_left_out == report["n"] and pred.n_left_out == report["n_ties"]
    true = {g.group: g for g in _by(winobias_runs[model], "true_gender").groups}
    assert true["male"].ece == report["ece_true_male"] and true["female"].ece == report["ece_true_female"]


def test_golden_gpt_j(winobias_runs):
    """GPT-J on WinoBias by human gender: female pairs are far worse calibrated (the numbers of its metrics report)."""
    r = _by(winobias_runs["gpt-j-6b"], "true_gender")
    cells = {g.group: g for g in r.groups}
    assert cells["female"].ece == pytest.approx(0.5074359163304606, abs=1e-12)
    assert cells["male"].ece == pytest.approx(0.20420065186461192, abs=1e-12)
    assert (cells["female"].n, cells["male"].n) == (386, 385)
    assert (r.gap.high, r.gap.low) == ("female", "male")
    assert r.gap.gap == pytest.approx(0.3032352644658487, abs=1e-12)
    assert r.gap.ci_low <= r.gap.gap <= r.gap.ci_high and r.gap.ci_low > 0.25


def test_calibration_tests_of_gpt_j_by_group(winobias_runs, prepared_dir):
    """WinoBias (y varies): each predicted-gender group's z is MAPIE's statistic on its pairs (every pair its own
    cluster), Holm-corrected over the two groups; true_gender, a function of y, gets no test; overall, MAPIE's z."""
    from mapie.metrics.calibration import spiegelhalter_statistic

    scores = winobias_runs["gpt-j-6b"]
    pairs = pd.read_parquet(prepared_dir / "winobias.parquet").set_index("pair_id", drop=False)
    pairs["cluster"] = pairs["pair_id"]
    metric = Params.model_validate(_params()).metrics
    settings = Params.model_validate(_params(by=["pred_gender", "true_gender"], protocols=["identity"])).groups
    out = {r["grouping"]: r for r in stage.run_groups(scores, pairs, None, None, settings, metric, "gpt-j")}
    p, y = scores["p"].to_numpy(np.float64), scores["y"].to_numpy(np.float64)
    labels, _ = by_group.gender_grouping(
        "pred_gender", p, y, scores["gender_more"].to_numpy(object), scores["gender_less"].to_numpy(object)
    )
    cells = {c["group"]: c for c in out["pred_gender"]["groups"]}
    for gender in ("male", "female"):
        keep = labels == gender
        assert cells[gender]["z"] == pytest.approx(spiegelhalter_statistic(y[keep], p[keep]), rel=1e-12)
    low, high = sorted(c["p_z"] for c in cells.values())
    assert sorted(c["p_z_holm"] for c in cells.values()) == pytest.approx([min(1, 2 * low), max(2 * low, high)])
    assert out["pred_gender"]["variance"] == "expected" and out["true_gender"]["variance"] is None
    assert out["true_gender"]["tests_reason"].startswith("true_gender is a function of y")
    assert "z" not in out["true_gender"]["groups"][0]
    overall = stage.overall_tests(p, y, scores["pair_id"].to_numpy(object), metric, "expected")
    assert overall["z"] == pytest.approx(spiegelhalter_statistic(y, p), rel=1e-12) and overall["variance"] == "expected"
    assert 0 < overall["p_consistency"] <= 1 and overall["reason"] is None


def test_winobias_repeated_pair_keeps_the_expected_variance(winobias_runs, prepared_dir):
    """WinoBias's prepared clusters merge its one repeated pair (770 clusters, 770 distinct pairs): the unit is the
    pair, so z keeps the variance expected under calibration, with the repeat one draw (its two rows' terms summed
    before squaring), not the cluster sums' variance, which the one repeat used to switch on."""
    pairs = pd.read_parquet(prepared_dir / "winobias.parquet").set_index("pair_id", drop=False)
    scores = winobias_runs["gpt-j-6b"]
    rows = pairs.loc[scores["pair_id"].to_numpy(object)]
    assert (rows["cluster"].nunique(), len(rows)) == (770, 771) and stage.unit_variance(rows) == "expected"
    p, y = scores["p"].to_numpy(np.float64), scores["y"].to_numpy(np.float64)
    clusters = rows["cluster"].to_numpy(object)
    metric = Params.model_validate(_params()).metrics
    overall = stage.overall_tests(p, y, clusters, metric, stage.unit_variance(rows))
    a, v = (1 - 2 * p), p * (1 - p)
    repeat = np.flatnonzero(pd.Series(clusters).duplicated(keep=False).to_numpy())
    merged = (a**2 * v).sum() + 2 * a[repeat[0]] * a[repeat[1]] * np.sqrt(v[repeat[0]] * v[repeat[1]])
    assert overall["z"] == pytest.approx(((y - p) * a).sum() / np.sqrt(merged), rel=1e-12)
    assert overall["variance"] == "expected"
    # the numbers docs/statistics.md quotes: merged 4.587; the repeat as two independent pairs 4.595; the cluster
    # sums' variance (the estimator before the rule) 3.974
    assert round(overall["z"], 3) == 4.587 and round(spiegelhalter(p, y)[0], 3) == 4.595
    assert round(spiegelhalter(p, y, clusters=clusters, variance="clusters")[0], 3) == 3.974


# ------------------------------------------------------------------ cross-checks
def _random(seed: int, n: int = 600, k: int = 4):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    y = (rng.random(n) < p**1.5).astype(float)
    g = np.array([f"g{i}" for i in rng.integers(0, k, n)], dtype=object)
    return p, y, g


@pytest.mark.parametrize("binning", ["equal_width", "equal_mass"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_identity_equals_metrics_group_ece(seed, binning):
    p, y, g = _random(seed)
    g[::37] = None  # pairs without a group are left out of both
    r = by_group.calibration_by_group(p, y, g, min_size=1, binning=binning, draws=10)
    assert {c.group: c.ece for c in r.groups} == metrics.group_ece(p, y, g, binning=binning)
    assert r.n_left_out == int(sum(v is None for v in g)) and r.left_out


def _brute_soft_ece(p, t, n_bins=10):
    """Σ_m n_m/n |mean_m(p) − mean_m(t)|, one pair at a time, bins (m/M, (m+1)/M] with 0 in the first."""
    sums = {}
    for pi, ti in zip(p, t, strict=True):
        m = max(0, math.ceil(pi * n_bins) - 1)
        c, sp, st = sums.get(m, (0, 0.0, 0.0))
        sums[m] = (c + 1, sp + pi, st + ti)
    n = sum(c for c, _, _ in sums.values())
    return sum(c / n * abs(sp / c - st / c) for c, sp, st in sums.values())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_soft_ece_equals_a_loop(seed):
    rng = np.random.default_rng(seed)
    n = 400
    p = rng.random(n)
    y_soft = rng.integers(0, 6, n) / 5  # shares of 5 annotators
    y = np.ones(n)
    y[: n // 4] = 0  # y = 0: the share supporting sent_more is 1 − y_soft
    y_soft[::11] = np.nan  # no annotations: left out
    g = np.array(["a", "b", "c"], dtype=object)[rng.integers(0, 3, n)]
    t = by_group.soft_target(y, y_soft)
    r = by_group.calibration_by_group(p, t, g, min_size=1, draws=10)
    for cell in r.groups:
        keep = (g == cell.group) & ~np.isnan(y_soft)
        want_t = np.where(y[keep] == 1, y_soft[keep], 1 - y_soft[keep])
        assert cell.ece == pytest.approx(_brute_soft_ece(p[keep], want_t), abs=1e-12)
        assert cell.n == keep.sum()
    assert r.n_left_out == int(np.isnan(y_soft).sum()) and "no soft label" in r.left_out


# --------------------------------------------------------------------- properties
def test_permuting_within_a_group_changes_nothing():
    p, y, g = _random(3)
    r1 = by_group.calibration_by_group(p, y, g, draws=200)
    rng = np.random.default_rng(9)
    order = np.arange(len(p))
    for name in set(g):  # shuffle the pairs of each group among that group's positions
        where = np.flatnonzero(g == name)
        order[where] = rng.permutation(where)
    r2 = by_group.calibration_by_group(p[order], y[order], g[order], draws=200)
    for a, b in zip(r1.groups, r2.groups, strict=True):
        assert a.group == b.group and a.n == b.n and a.ece == pytest.approx(b.ece, abs=1e-12)
    assert r1.gap.gap == pytest.approx(r2.gap.gap, abs=1e-12)


def test_renaming_groups_changes_nothing_but_names():
    p, y, g = _random(4)
    renamed = np.array([{"g0": "z", "g1": "y", "g2": "x", "g3": "w"}[v] for v in g], dtype=object)
    a, b = by_group.calibration_by_group(p, y, g, draws=100), by_group.calibration_by_group(p, y, renamed, draws=100)
    assert sorted(c.ece for c in a.groups) == sorted(c.ece for c in b.groups)
    assert a.gap.gap == b.gap.gap


def test_one_group_gap_is_zero():
    p, y, _ = _random(5)
    r = by_group.calibration_by_group(p, y, np.full(len(p), "all", dtype=object), draws=100)
    assert r.gap.gap == 0.0 and (r.gap.ci_low, r.gap.ci_high) == (0.0, 0.0)
    assert r.gap.high == r.gap.low == "all" and r.gap.n_groups == 1
    assert r.groups[0].ece == metrics.ece(p, y)


def test_gap_is_max_minus_min_of_the_large_groups():
    p, y, g = _random(6, n=800, k=5)
    g[:15] = "tiny"  # 15 pairs < min_size 20
    r = by_group.calibration_by_group(p, y, g, min_size=20, draws=300)
    cells = {c.group: c for c in r.groups}
    assert cells["tiny"].n == 15 and cells["tiny"].ece is None and cells["tiny"].ci_low is None
    assert "fewer than min_size = 20" in cells["tiny"].reason
    large = {k: c.ece for k, c in cells.items() if k != "tiny"}
    assert r.gap.gap == pytest.approx(max(large.values()) - min(large.values()), abs=1e-15)
    assert r.gap.high == max(large, key=large.get) and r.gap.low == min(large, key=large.get)
    assert r.gap.n_groups == 5 and r.gap.ci_low <= r.gap.gap <= r.gap.ci_high
    for c in large:
        assert cells[c].ci_low <= cells[c].ece <= cells[c].ci_high
    # the tiny group counts once min_size lets it in
    assert by_group.calibration_by_group(p, y, g, min_size=15, draws=10).gap.n_groups == 6


def test_no_group_large_enough():
    p, y, g = _random(7, n=30)
    r = by_group.calibration_by_group(p, y, g, min_size=100, draws=10)
    assert r.gap.gap is None and "min_size = 100" in r.gap.reason
    assert all(c.ece is None for c in r.groups)


def test_identity_with_y_one_is_one_minus_mean_p():
    """CrowS-format benchmarks: y = 1 everywhere, so every bin's gap is 1 − mean p and ECE = 1 − mean p."""
    p, _, g = _random(8)
    r = by_group.calibration_by_group(p, np.ones(len(p)), g, draws=10)
    for c in r.groups:
        assert c.ece == pytest.approx(1 - p[g == c.group].mean(), abs=1e-12)


def test_group_shares_of_a_hand_case():
    """Per row and group the share of p > 0.5 (an exact 0.5 is no preference); a pair in no group counts nowhere,
    an empty group is NaN."""
    p = np.array([[0.6, 0.4, 0.7, 0.5, 0.9], [0.6, 0.6, 0.2, 0.1, 0.9]])
    seg = np.array([[0, 0, 1, 1, -1], [0, 0, 0, 0, -1]])
    got = by_group.group_shares(p, seg, 3)
    assert np.array_equal(got[:, :2], [[0.5, 0.5], [0.5, np.nan]], equal_nan=True)
    assert np.isnan(got[:, 2]).all()


def test_a_single_groups_share_interval_is_the_metrics_reports():
    """One group holding every pair: the same cluster resamples as the metrics report's, so the same stereotype
    share and interval (gece.stats.metrics.summarize, the all-pairs interval the page draws beside it)."""
    rng = np.random.default_rng(11)
    n = 500
    p, clusters = rng.random(n), rng.integers(0, 60, n)
    r = by_group.calibration_by_group(
        p, np.ones(n), np.full(n, "all", dtype=object), draws=300, seed=3, clusters=clusters
    )
    s = metrics.summarize(p, np.ones(n), np.full(n, "male"), np.full(n, "female"), draws=300, seed=3, clusters=clusters)
    (g,) = r.groups
    assert (g.share, g.share_low, g.share_high) == (
        s["pct_stereotype"],
        s["pct_stereotype_ci_low"],
        s["pct_stereotype_ci_high"],
    )
    assert g.share_low < g.share < g.share_high


def test_bad_input():
    with pytest.raises(ValueError, match="differ in length"):
        by_group.calibration_by_group([0.5], [1, 0], ["a"])
    with pytest.raises(ValueError, match="min_size"):
        by_group.calibration_by_group([0.5], [1], ["a"], min_size=0)
    with pytest.raises(ValueError, match="target"):
        by_group.calibration_by_group([0.5], [1.5], ["a"])


# ---------------------------------------------------------------------- params
def test_params_unknown_grouping_names_the_file_and_the_choices(tmp_path):
    text = (ROOT / "params.yaml").read_text(encoding="utf-8").replace("  - true_gender", "  - identity_group")
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GeceError) as e:
        load_params(path)
    shown = str(e.value) + " ".join(e.value.problems)
    assert str(path) in shown and "groups.by[2]" in shown
    for choice in ("pred_gender", "true_gender", "bias_type", "position", "n_targets"):
        assert choice in shown


def test_params_defaults_and_repeats():
    shipped = load_params(ROOT / "params.yaml").groups.by
    synth = ["pronoun_gender", "referent", "stereotype"]  # SynthBias's columns: left out where a benchmark lacks them
    assert shipped == ["bias_type", "pred_gender", "true_gender", "first_diff", *synth]
    with pytest.raises(ValueError, match="twice"):
        Params.model_validate({**_params(), "groups": {"by": ["position", "position"]}})
    with pytest.raises(ValueError):
        Params.model_validate({**_params(), "groups": {"min_size": 0}})


# ----------------------------------------------------------------------- stage
def _params(**groups_settings) -> dict:
    return {
        "benchmarks": {"crowslike": {}},
        "models": ["m1", "m2"],
        "registry": {"m1": {"source": "x"}, "m2": {"source": "y"}},
        "ablate": {"special_tokens": {}},
        "groups": {"by": ["bias_type", "pred_gender", "position"], "min_size": 20, **groups_settings},
    }


@pytest.fixture
def crowslike(tmp_path, prepared_dir) -> Path:
    """A CrowS-Pairs-like benchmark from WinoBias's prepared pairs: y = 1, fabricated bias types (one with 12
    pairs), two runs with random scores, soft labels for all pairs but every 7th."""
    pairs, _ = read_table(prepared_dir / "winobias.parquet", PreparedPair)
    pairs = pairs.iloc[:300].copy()
    pairs["pair_id"] = [f"crowslike-{r}" for r in pairs["row"]]
    pairs["y"] = 1
    kinds = np.array(["race-color", "gender", "religion"], dtype=object)[np.arange(300) % 3]
    kinds[:12] = "disability"
    pairs["bias_type"] = kinds
    write_table(
        tmp_path / "artifacts" / "prepared" / "crowslike.parquet", pairs, PreparedPair, meta={"benchmark": "crowslike"}
    )
    rng = np.random.default_rng(0)
    for i, m in enumerate(("m1", "m2")):
        p = np.clip(rng.beta(2 + i, 2, 300), 1e-6, 1 - 1e-6)
        s = pairs[SCORE_PAIR_COLUMNS].copy()
        s["n_tokens_more"], s["n_tokens_less"] = 1, 1
        s["logprob_more"], s["logprob_less"] = np.log(p), np.log1p(-p)
        s["logit_more"], s["logit_less"] = None, None
        s["p"] = p
        write_table(
            tmp_path / "artifacts" / "scores" / "crowslike" / f"{m}.parquet",
            s,
            ScoreRow,
            meta={"benchmark": "crowslike", "model": m},
        )
    support = rng.integers(0, 6, 300)
    ann = pd.DataFrame(
        {
            "pair_id": pairs["pair_id"],
            "n_annotators": 5,
            "n_support": support,
            "y_soft": support / 5,
            "y_hard": (support >= 3).astype(int),
        }
    )
    ann["y_soft"] = ann["y_soft"].astype(object)
    ann["y_hard"] = ann["y_hard"].astype(object)
    ann.loc[::7, ["y_soft", "y_hard"]] = None
    ann.loc[::7, "n_annotators"] = 0
    ann.loc[::7, "n_support"] = 0
    write_table(tmp_path / "artifacts" / "annotated" / "crowslike.parquet", ann, AnnotatedPair)
    return tmp_path


def test_stage_writes_the_report_and_table(crowslike):
    params = Params.model_validate(_params())
    report = stage.groups_benchmark(params, "crowslike", reports=crowslike / "reports", root=crowslike)
    on_disk = json.loads((crowslike / "reports" / "groups" / "crowslike.json").read_text(encoding="utf-8"))
    assert on_disk == json.loads(json.dumps(report)) and GroupsReport.model_validate(on_disk)
    m1 = {(r["grouping"], r["protocol"]): r for r in report["runs"]["m1"]}
    assert set(m1) == {(g, p) for g in ("bias_type", "pred_gender", "position") for p in ("identity", "soft")}
    cells = {c["group"]: c for c in m1["bias_type", "identity"]["groups"]}
    assert cells["disability"]["n"] == 12 and cells["disability"]["ece"] is None
    scores, _ = read_table(crowslike / "artifacts" / "scores" / "crowslike" / "m1.parquet", ScoreRow)
    for kind in ("race-color", "gender", "religion"):  # identity protocol, y = 1: ECE = 1 − mean p
        p = scores["p"][scores["bias_type"] == kind].to_numpy()
        assert cells[kind]["ece"] == pytest.approx(1 - p.mean(), abs=1e-12)
    # soft: against the share of annotators, pairs without annotations left out (a loop computes the same)
    ann, _ = read_table(crowslike / "artifacts" / "annotated" / "crowslike.parquet", AnnotatedPair)
    soft = {c["group"]: c for c in m1["bias_type", "soft"]["groups"]}
    for kind in ("race-color", "gender", "religion"):
        keep = (scores["bias_type"] == kind).to_numpy() & ann["y_soft"].notna().to_numpy()
        want = _brute_soft_ece(scores["p"].to_numpy()[keep], ann["y_soft"].to_numpy(float)[keep])
        assert soft[kind]["ece"] == pytest.approx(want, abs=1e-12) and soft[kind]["n"] == keep.sum()
    assert m1["bias_type", "soft"]["n_left_out"] == 300 // 7 + 1
    # the stereotype share and its interval: identity protocol only, an interval from min_size pairs on
    for kind in ("race-color", "gender", "religion"):
        c = cells[kind]
        p = scores["p"][scores["bias_type"] == kind].to_numpy()
        assert c["pct_stereotype"] == (p > 0.5).mean()
        assert 0 <= c["pct_stereotype_ci_low"] < c["pct_stereotype"] < c["pct_stereotype_ci_high"] <= 1
    assert cells["disability"]["pct_stereotype"] is not None and cells["disability"]["pct_stereotype_ci_low"] is None
    assert not any(k.startswith("pct_stereotype") for c in soft.values() for k in c)
    # y = 1 for every pair: no calibration test, and the report says why
    assert report["tests"]["m1"]["reason"].startswith("y is 1 for every pair") and report["tests"]["m1"]["z"] is None
    assert m1["bias_type", "identity"]["tests_reason"].startswith("y is 1") and "z" not in cells["gender"]
    report = json.loads((crowslike / "reports" / "groups" / "crowslike.json").read_text())
    md = doc_markdown(groups_doc({"crowslike": report}))
    assert "## crowslike: identity protocol, by bias_type" in md
    assert "| disability | – n = 12 < 20 | – n = 12 < 20 |" in md
    assert md.count("| largest gap |") == 2 * 3  # two protocols, three groupings that split the pairs
    assert md.index("by bias_type") < md.index("by pred_gender") < md.index("by position")
    assert "calibration tests, all pairs" not in md
    # byte-reproducible
    stage.groups_benchmark(params, "crowslike", reports=crowslike / "again", root=crowslike)
    assert (crowslike / "again" / "groups" / "crowslike.json").read_bytes() == (
        crowslike / "reports" / "groups" / "crowslike.json"
    ).read_bytes()


def _loop_share_interval(p, labels, clusters, group, draws, seed, level):
    """A group's stereotype share and its bias-corrected interval, one resample at a time: K clusters drawn with
    replacement (numbered in order of first appearance, drawn from the seed's stream in chunks of
    :func:`gece.stats.bootstrap.chunk_size` draws, as the bootstrap draws them), the group's pairs among their rows."""
    from gece.stats.bootstrap import chunk_size

    order = list(dict.fromkeys(clusters))
    rows_of = {c: [i for i, x in enumerate(clusters) if x == c] for c in order}
    rng = np.random.default_rng(seed)
    shares = []
    for start in range(0, draws, chunk_size(len(p))):
        for chosen in rng.integers(0, len(order), size=(min(chunk_size(len(p)), draws - start), len(order))):
            mine = [p[i] > 0.5 for c in chosen for i in rows_of[order[c]] if labels[i] == group]
            shares.append(sum(mine) / len(mine) if mine else math.nan)
    est = float(np.mean(p[labels == group] > 0.5))
    d = np.array([x for x in shares if not math.isnan(x)])
    lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2]) - (np.median(d) - est)
    return est, min(max(lo, 0.0), est), max(min(hi, 1.0), est)


def test_a_groups_share_interval_equals_a_loop_over_the_clusters(crowslike):
    """One group's interval recomputed from the prepared pairs (their clusters) and the scores, without the stage.
    Clusters of 7 consecutive pairs, each holding pairs of every bias type."""
    prepared = crowslike / "artifacts" / "prepared" / "crowslike.parquet"
    pairs, _ = read_table(prepared, PreparedPair)
    pairs["cluster"] = [f"c{i // 7}" for i in range(len(pairs))]
    write_table(prepared, pairs, PreparedPair, meta={"benchmark": "crowslike"})
    params = Params.model_validate(_params())
    report = stage.groups_benchmark(params, "crowslike", reports=crowslike / "reports", root=crowslike)
    (result,) = [r for r in report["runs"]["m2"] if (r["grouping"], r["protocol"]) == ("bias_type", "identity")]
    cell = next(c for c in result["groups"] if c["group"] == "gender")
    scores, _ = read_table(crowslike / "artifacts" / "scores" / "crowslike" / "m2.parquet", ScoreRow)
    clusters = pairs.set_index("pair_id").loc[scores["pair_id"], "cluster"].to_numpy(object)
    assert cell["n_clusters"] == len(set(clusters[scores["bias_type"] == "gender"])) < cell["n"]  # real clusters
    m = params.metrics
    want = _loop_share_interval(
        scores["p"].to_numpy(), scores["bias_type"].to_numpy(object), clusters, "gender", m.bootstrap, m.seed, m.ci
    )
    got = (cell["pct_stereotype"], cell["pct_stereotype_ci_low"], cell["pct_stereotype_ci_high"])
    assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("how", ["no file", "no labels"])
def test_stage_without_annotations_says_so(crowslike, how):
    path = crowslike / "artifacts" / "annotated" / "crowslike.parquet"
    if how == "no file":
        path.unlink()
    else:  # WinoQueer: the annotate stage writes every pair, none with a soft label
        ann, _ = read_table(path, AnnotatedPair)
        ann["y_soft"], ann["y_hard"], ann["n_annotators"], ann["n_support"] = None, None, 0, 0
        write_table(path, ann, AnnotatedPair)
    report = stage.groups_benchmark(
        Params.model_validate(_params()), "crowslike", reports=crowslike / "r", root=crowslike
    )
    soft = [r for r in report["runs"]["m2"] if r["protocol"] == "soft"]
    assert soft and all(
        r["groups"] == [] and r["gap"] is None and r["reason"].startswith("no annotations") for r in soft
    )
    md = doc_markdown(groups_doc({"crowslike": report}))
    assert "## crowslike: soft protocol\n" in md and "| – | no annotations" in md


def test_stage_refuses_stale_annotations_and_writes_nothing(crowslike):
    path = crowslike / "artifacts" / "annotated" / "crowslike.parquet"
    ann, _ = read_table(path, AnnotatedPair)
    ann.loc[0, "pair_id"] = "crowslike-99999"
    write_table(path, ann, AnnotatedPair)
    with pytest.raises(GeceError, match="names 1 pair") as e:
        stage.groups_benchmark(Params.model_validate(_params()), "crowslike", reports=crowslike / "r", root=crowslike)
    assert "crowslike-99999" in " ".join(e.value.problems) and "gece annotate" in e.value.hint
    assert not (crowslike / "r").exists()


# -------------------------------------------------------------- permutation test
def test_permutation_p_equals_a_loop_over_the_same_shuffles():
    from gece.stats.bootstrap import chunk_size
    from gece.stats.gap import shuffled_groups

    p, y, g = _random(10, n=300, k=3)
    r = by_group.calibration_by_group(p, y, g, min_size=1, draws=60, seed=5)
    names, seg = by_group.encode(g)
    rng = np.random.default_rng(5)
    null = []
    for start in range(0, 60, chunk_size(300)):
        for row in shuffled_groups(seg, min(chunk_size(300), 60 - start), rng):
            e = metrics.group_ece(p, y, np.array(names, dtype=object)[row])
            null.append(max(e.values()) - min(e.values()))
    want = (1 + sum(d >= r.gap.gap - 1e-12 for d in null)) / 61
    assert r.gap.p_perm == pytest.approx(want, abs=1e-15)


def test_permutation_p_sees_a_real_difference_and_not_a_random_split():
    rng = np.random.default_rng(11)
    n = 1000
    p = rng.random(n)
    g = np.array(["a", "b"], dtype=object)[rng.integers(0, 2, n)]
    y = (rng.random(n) < p).astype(float)  # calibrated everywhere: labels say nothing
    assert by_group.calibration_by_group(p, y, g, draws=200).gap.p_perm > 0.05
    y_bad = np.where(g == "a", y, (rng.random(n) < 0.5).astype(float))  # group b: y ignores p
    assert by_group.calibration_by_group(p, y_bad, g, draws=200).gap.p_perm == pytest.approx(1 / 201)
    one = by_group.calibration_by_group(p, y, np.full(n, "a", dtype=object), draws=200)
    assert one.gap.p_perm is None


def test_stage_refuses_scores_of_other_pairs(crowslike):
    path = crowslike / "artifacts" / "scores" / "crowslike" / "m2.parquet"
    scores, meta = read_table(path, ScoreRow)
    scores.loc[3, "pair_id"] = "crowslike-77777"
    write_table(path, scores, ScoreRow, meta=meta)
    with pytest.raises(GeceError, match="crowslike / m2: 1 scored pair") as e:
        stage.groups_benchmark(Params.model_validate(_params()), "crowslike", reports=crowslike / "r", root=crowslike)
    assert "crowslike-77777" in e.value.problems[0]
    assert not (crowslike / "r").exists()


def test_cli_refuses_a_bad_grouping_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from gece.cli import main

    monkeypatch.chdir(tmp_path)
    text = (
        (ROOT / "params.yaml")
        .read_text(encoding="utf-8")
        .replace("  - bias_type\n  - pred_gender", "  - identity_group\n  - pred_gender")
    )
    (tmp_path / "params.yaml").write_text(text, encoding="utf-8")
    assert main(["groups", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err
    assert "params.yaml: invalid parameters" in err and "groups.by[0]" in err and "'true_gender'" in err
    assert "Traceback" not in err and sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_table_escapes_group_and_run_names():
    evil = "<script>x</script>|# *a*"
    p, y, _ = _random(12, n=100)
    g = np.where(np.arange(100) < 50, evil, "b").astype(object)
    r = by_group.calibration_by_group(p, y, g, draws=10)
    result = {
        "grouping": "bias_type",
        "protocol": "identity",
        "n": r.n,
        "n_left_out": 0,
        "left_out": None,
        "groups": [vars(c) for c in r.groups],
        "gap": vars(r.gap),
        "reason": None,
    }
    md = doc_markdown(
        groups_doc(
            {
                "b": {
                    "benchmark": "b",
                    "n_bins": 10,
                    "binning": "equal_width",
                    "draws": 10,
                    "seed": 0,
                    "level": 0.95,
                    "min_size": 20,
                    "runs": {"m|<b>": [result]},
                }
            }
        )
    )
    assert "<script>" not in md.replace("\\<script>", "") and "\\<script>x\\</script>\\|# \\*a\\*" in md
    assert "| m\\|\\<b> |" in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") == rows[0].count(" | ") for line in rows)  # no cell split by a '|' in a name
