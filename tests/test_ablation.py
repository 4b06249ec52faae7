"""Ablations and paired comparison: the statistical machinery pinned on known cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gece.cli import main
from gece.io.files.writer import write_table
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.sections import AblateParams, CompareParams, MetricsParams
from gece.pipeline import ablate as ablate_stage
from gece.pipeline import compare as compare_stage
from gece.pipeline import metrics as metrics_stage
from gece.pipeline import neutral as neutral_stage
from gece.pipeline import runs
from gece.pipeline import special_tokens as special_tokens_stage
from gece.stats import ablation, metrics
from gece.stats.ablation import Run
from gece.stats.bootstrap import subsample, two_sided_p
from gece.stats.intervals import holm


def synthetic_run(n, seed, sharpen=1.0, name="r"):
    """y ~ Bernoulli(q); the model reports p = sigmoid(sharpen * logit(q))."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < q).astype(float)
    z = sharpen * np.log(q / (1 - q))
    p = 1 / (1 + np.exp(-z))
    ids = np.array([f"{name}-{i}" for i in range(n)], dtype=object)
    return Run(ids, p, y, np.repeat(np.array(["male"], object), n), np.repeat(np.array(["female"], object), n)), q


def same_pairs(run: Run, p: np.ndarray) -> Run:
    return Run(run.pair_id, p, run.y, run.gender_more, run.gender_less)


# -------------------------------------------------------------------------- compare
def test_model_against_itself_differs_by_exactly_zero_with_p_one():
    run, _ = synthetic_run(400, 0, sharpen=2.0)
    res = ablation.compare({"a": run, "b": same_pairs(run, run.p.copy())}, draws=2000, seed=1)
    for cell in res["pairs"][0]["metrics"].values():
        assert cell["diff"] == 0.0 and cell["ci_low"] == 0.0 and cell["ci_high"] == 0.0
        assert cell["p_value"] == 1.0 and not cell["significant"]


def test_clearly_different_models_are_significant():
    calibrated, q = synthetic_run(800, 2, sharpen=1.0)
    overconfident = same_pairs(calibrated, 1 / (1 + np.exp(-4 * np.log(q / (1 - q)))))
    res = ablation.compare({"calibrated": calibrated, "overconfident": overconfident}, draws=2000, seed=3)
    cells = res["pairs"][0]["metrics"]
    for k in ("ece", "brier"):
        assert cells[k]["p_value"] < 0.01 and cells[k]["significant_holm"]
        assert cells[k]["diff"] < 0 and cells[k]["ci_high"] < 0  # calibrated is better
    assert cells["ece"]["p_value"] == pytest.approx(2 / 2001)  # no draw crosses 0
    # the difference of the point estimates is the difference of the metrics
    assert cells["ece"]["diff"] == pytest.approx(
        metrics.ece(calibrated.p, calibrated.y) - metrics.ece(overconfident.p, overconfident.y)
    )


def test_pairs_are_resampled_together():
    """The paired interval is much narrower than an unpaired one for nearly equal models."""
    run, _q = synthetic_run(600, 4)
    shifted = same_pairs(run, np.clip(run.p + 0.01, 0, 1))
    res = ablation.compare({"a": run, "b": shifted}, draws=2000, seed=5)
    brier = res["pairs"][0]["metrics"]["brier"]
    assert brier["ci_high"] - brier["ci_low"] < 0.005  # unpaired would be ~0.05


def test_compare_refuses_runs_that_share_no_pair():
    a, _ = synthetic_run(50, 6, name="x")
    b, _ = synthetic_run(50, 6, name="y")
    with pytest.raises(ValueError, match="a and b share no pair"):
        ablation.compare({"a": a, "b": b}, draws=2000, seed=0)


def _subset(run: Run, idx) -> Run:
    return Run(run.pair_id[idx], run.p[idx], run.y[idx], run.gender_more[idx], run.gender_less[idx])


def test_each_two_runs_are_compared_on_the_pairs_both_score():
    """A partial run (an lm-eval import that leaves pairs out, in its own order) changes only its own
    comparisons: the full runs' comparison is the one they get alone, bit for bit, and the partial run's is the
    one it gets alone with each full run restricted by hand to its pairs; n beside each."""
    a, q = synthetic_run(300, 21)
    b = same_pairs(a, 1 / (1 + np.exp(-2 * np.log(q / (1 - q)))))
    keep = np.random.default_rng(3).permutation(300)[:170]  # 170 pairs, shuffled
    partial = _subset(same_pairs(a, np.clip(a.p + 0.05, 0, 1)), keep)
    res = ablation.compare({"a": a, "b": b, "partial": partial}, draws=2000, seed=4)
    assert res["n"] == 300 and [(e["a"], e["b"], e["n"]) for e in res["pairs"]] == [
        ("a", "b", 300),
        ("a", "partial", 170),
        ("b", "partial", 170),
    ]
    assert res["pairs"][0]["metrics"] == ablation.compare({"a": a, "b": b}, draws=2000, seed=4)["pairs"][0]["metrics"]
    in_a_order = np.sort(keep)  # the pairs both score, in the first run's order
    alone = ablation.compare(
        {"b": _subset(b, in_a_order), "partial": _subset(partial, np.argsort(keep))}, draws=2000, seed=4
    )
    assert res["pairs"][2]["metrics"] == alone["pairs"][0]["metrics"]


def test_compare_stage_uses_the_pairs_both_runs_score(reference_scores, tmp_path, capsys):
    """A smoke run (extract.limit) is compared with full runs on the pairs it has; runs that
    share no pair are a clear error (exit 2), not a traceback."""
    from gece.io.files.readers import read_table

    full = reference_scores[("winobias", "gpt-j-6b")]
    df, meta = read_table(full, ScoreRow)
    head = tmp_path / "head.parquet"
    write_table(head, df.head(40), ScoreRow, {**meta, "model": "smoke"})
    res = compare_stage.compare_files([head, full], None, None, MetricsParams(), CompareParams())
    assert res["n"] == len(df) and res["pairs"][0]["n"] == 40  # compared on the 40 pairs both score
    assert res["pairs"][0]["metrics"]["ece"]["diff"] == 0.0

    other = tmp_path / "other.parquet"
    write_table(other, df.iloc[40:80], ScoreRow, {**meta, "model": "other"})
    assert main(["compare", str(head), str(other)]) == 2
    err = capsys.readouterr().err
    assert "share no pair" in err and str(head) in err and "Traceback" not in err


def test_two_sided_p_and_holm():
    assert two_sided_p(np.zeros(100)) == 1.0
    assert two_sided_p(np.ones(999)) == pytest.approx(2 / 1000)
    assert two_sided_p(np.r_[-np.ones(30), np.ones(70)]) == pytest.approx(2 * 31 / 101)
    assert two_sided_p(np.array([np.nan])) is None
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])


def test_compare_all_pairs_of_a_benchmark(reference_scores, tmp_path):
    paths = [reference_scores[("winogender", m)] for m in ("gpt-j-6b", "llama-3.1-8b", "gemma-2-9b")]
    res = compare_stage.compare_files(paths, tmp_path / "c.json", tmp_path / "c.md", MetricsParams(), CompareParams())
    assert res["benchmark"] == "winogender" and len(res["pairs"]) == 3 and res["draws"] == 2000
    md = (tmp_path / "c.md").read_text()
    assert "| paper-gpt-j-6b | paper-llama-3.1-8b |" in md and "significant at α = 0.05" in md
    on_disk = json.loads((tmp_path / "c.json").read_text())
    run, _ = runs.load_run_file(paths[0])
    assert on_disk["pairs"][0]["metrics"]["ece"]["a"] == metrics.ece(run.p, run.y)


def test_compare_cli_two_files(reference_scores, capsys):
    a, b = reference_scores[("winobias", "gpt-j-6b")], reference_scores[("winobias", "qwen2.5-7b")]
    assert main(["compare", str(a), str(b), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [res["pairs"][0]["a"], res["pairs"][0]["b"]] == ["paper-gpt-j-6b", "paper-qwen2.5-7b"]
    assert main(["compare", str(a)]) == 2


# ---------------------------------------------------------------------- sample size
def test_subsets_are_without_replacement():
    out = subsample(lambda x: {"unique": np.array([len(set(r)) for r in x])}, {"x": np.arange(80)}, 50, 20, 0)
    assert (out["unique"] == 50).all()


def test_sample_size_means_converge_to_full_data_ece(reference_scores):
    run, _ = runs.load_run_file(reference_scores[("winobias", "gpt-j-6b")])
    res = ablation.sample_size(run, [50, 100, 150, 250, 500, 771, 1000], draws=100, seed=0)
    full = res["full"]["ece"]
    assert full == pytest.approx(0.15764973445164981, abs=1e-12)
    sizes = [r["n"] for r in res["sizes"]]
    assert sizes == [50, 100, 150, 250, 500, 771]  # larger than n is skipped
    gaps = [abs(r["ece_mean"] - full) for r in res["sizes"]]
    stds = [r["ece_std"] for r in res["sizes"]]
    assert gaps[0] > gaps[2] > gaps[4] and stds[0] > stds[2] > stds[4]
    assert gaps[-1] < 1e-12 and stds[-1] < 1e-12  # every subset of size n is the whole benchmark
    assert res["sizes"][0]["ece_mean"] > full  # small samples overstate ECE


def test_sample_size_is_seeded(reference_scores):
    run, _ = runs.load_run_file(reference_scores[("winogender", "qwen2.5-7b")])
    a = ablation.sample_size(run, [50, 100, 150, 250, 500], 100, 7)
    assert a == ablation.sample_size(run, [50, 100, 150, 250, 500], 100, 7)
    assert [r["n"] for r in a["sizes"]] == [50, 100, 150]
    assert a != ablation.sample_size(run, [50, 100, 150], 100, 8)


# -------------------------------------------------------------------------- binning
def test_binning_grid_matches_metrics(reference_scores):
    run, _ = runs.load_run_file(reference_scores[("genderlex", "llama-3.1-8b")])
    grid = ablation.binning_grid(run, [5, 10, 15, 20])
    assert set(grid) == {"equal_width", "equal_mass"} and list(grid["equal_mass"]) == ["5", "10", "15", "20"]
    ref = metrics.summarize(run.p, run.y, run.gender_more, run.gender_less)
    assert (
        grid["equal_width"]["10"]["ece"] == ref["ece"] and grid["equal_width"]["10"]["gender_ece"] == ref["gender_ece"]
    )
    assert grid["equal_mass"]["15"]["ece"] == pytest.approx(metrics.ece(run.p, run.y, 15, "equal_mass"))


def test_ablate_stage_writes_reports_and_figure(reference_scores, tmp_path):
    _sizes, _grid = ablate_stage.ablate(
        reference_scores[("winogender", "gpt-j-6b")],
        tmp_path / "s.json",
        tmp_path / "b.json",
        tmp_path / "s.png",
        MetricsParams(),
        AblateParams(),
    )
    data = json.loads((tmp_path / "s.json").read_text())
    assert list(data) == ["full", "sizes"] and data["sizes"][0]["draws"] == 100
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------- wording and special tokens
def _score_file(path, run: Run, benchmark, model):
    n = len(run.p)
    lp_less = np.full(n, np.log(0.01))
    lp_more = lp_less + np.log(run.p / (1 - run.p))
    import pandas as pd

    df = pd.DataFrame(
        {
            "pair_id": run.pair_id,
            "row": np.arange(1, n + 1),
            "sent_more": "He x.",
            "sent_less": "She x.",
            "y": run.y.astype(int),
            "bias_type": None,
            "targets_more": [["He"]] * n,
            "targets_less": [["She"]] * n,
            "gender_more": run.gender_more,
            "gender_less": run.gender_less,
            "n_tokens_more": 1,
            "n_tokens_less": 1,
            "logprob_more": lp_more,
            "logprob_less": lp_less,
            "logit_more": 1.0,
            "logit_less": 1.0,
            "p": run.p,
        }
    )
    write_table(path, df, ScoreRow, meta={"benchmark": benchmark, "model": model})
    return path


def test_special_tokens_and_neutral_reports(tmp_path):
    runs = {}
    for b, seed in (("genderlex", 1), ("genderlex_person", 2)):
        calibrated, q = synthetic_run(300, seed)
        overconfident = same_pairs(calibrated, 1 / (1 + np.exp(-6 * np.log(q / (1 - q)))))
        paths = []
        for model, run in (("m", calibrated), ("m-nobos", overconfident)):
            s = _score_file(tmp_path / "scores" / b / f"{model}.parquet", run, b, model)
            mpath = tmp_path / "metrics" / b / f"{model}.json"
            metrics_stage.metrics_stage(s, mpath, None, MetricsParams())
            paths += [mpath, s]
        runs[b] = tuple(paths)
    res = special_tokens_stage.special_tokens(runs, tmp_path / "st.json")
    with_, without = res["genderlex"]["with"], res["genderlex"]["without"]
    assert without["mean_confidence"] > with_["mean_confidence"]
    assert without["share_confidence_over_0_9"] > 0.5 > with_["share_confidence_over_0_9"]
    assert without["ece"] > 2 * with_["ece"]
    assert set(json.loads((tmp_path / "st.json").read_text())["genderlex_person"]) == {"with", "without"}
    neutral = neutral_stage.neutral("m", {b: runs[b][0] for b in runs}, tmp_path / "n.json")
    assert list(neutral) == ["genderlex", "genderlex_person"] and neutral["genderlex"]["n"] == 300
    assert set(neutral["genderlex"]) == {
        "ece",
        "gender_ece",
        "ece_male",
        "ece_female",
        "macro_ce",
        "ice",
        "brier",
        "accuracy",
        "n",
    }


def test_holm_family_is_one_pair_of_models():
    calibrated, q = synthetic_run(500, 9)
    sharp = same_pairs(calibrated, 1 / (1 + np.exp(-4 * np.log(q / (1 - q)))))
    runs = {"a": calibrated, "b": sharp, "c": same_pairs(calibrated, calibrated.p.copy())}
    res = ablation.compare(runs, draws=2000, seed=0)
    for pair in res["pairs"]:
        cells = list(pair["metrics"].values())
        expected = holm([c["p_value"] for c in cells])
        assert [c["p_holm"] for c in cells] == expected
    a_b = res["pairs"][0]["metrics"]["ece"]
    assert a_b["p_holm"] == pytest.approx(4 * 2 / 2001) and a_b["significant_holm"]
