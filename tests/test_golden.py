"""Golden numbers: the paper-convention metrics of the authors' released scores equal their summaries."""

from __future__ import annotations

import re

import pytest

from gece.io.files.readers import read_table
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.sections import MetricsParams
from gece.pipeline import metrics as metrics_stage

from .conftest import PAPER_BENCHMARKS, PAPER_MODELS

# summary label -> our key; normalized section, then the gender section
NORMALIZED = {
    "Bias ECE": "ece",
    "Bias MacroCE": "macro_ce",
    "Bias ICE": "ice",
    "Brier Score": "brier_paper",
    "Accuracy of Matching Labels (Normalized)": "accuracy",
}
GENDER = {
    "Group-ECE (Gender-ECE)": "gender_ece",
    "Calibration Bias Gap": "bias_gap",
    "ECE (Male)": "ece_male",
    "ECE (Female)": "ece_female",
}


def parse_summary(text: str) -> tuple[dict[str, float], dict[str, list[float]]]:
    normalized = text.split("Normalized Probabilities:")[1].split("Gender-Aware")[0]
    gender = text.split("Gender-Aware Calibration Metrics:")[1]
    values = {}
    for section, labels in ((normalized, NORMALIZED), (gender, GENDER)):
        for label, key in labels.items():
            values[key] = float(re.search(re.escape(label) + r":\s*(\S+)", section).group(1))
    buckets = {
        name: [float(x) for x in re.search(name + r": \[(.*?)\]", normalized).group(1).split(",")]
        for name in ("Accuracies", "Confidences", "Sizes")
    }
    return values, buckets


@pytest.mark.parametrize("model", PAPER_MODELS)
@pytest.mark.parametrize("benchmark", PAPER_BENCHMARKS)
def test_reference_metrics_equal_authors_summary(benchmark, model, reference_scores, data_dir):
    expected, buckets = parse_summary((data_dir / "reference" / benchmark / f"{model}.summary.txt").read_text())
    scores, meta = read_table(reference_scores[(benchmark, model)], ScoreRow)
    assert meta["model"] == f"paper-{model}" and meta["benchmark"] == benchmark
    report, bins = metrics_stage.run_metrics(scores, MetricsParams())
    for key, value in expected.items():
        assert report[key] == pytest.approx(value, abs=1e-9), key
    assert report["n"] == len(scores) and report["n_ties"] == 0
    # the reliability bins are the authors' buckets (empty buckets: they print 0)
    assert [b["count"] for b in bins] == [int(s) for s in buckets["Sizes"]]
    for b, acc, conf in zip(bins, buckets["Accuracies"], buckets["Confidences"], strict=True):
        assert (b["accuracy"] or 0.0) == pytest.approx(acc, abs=1e-12)
        assert (b["confidence"] or 0.0) == pytest.approx(conf, abs=1e-12)


def test_brier_paper_is_not_the_brier_score(reference_scores):
    scores, _ = read_table(reference_scores[("winobias", "gpt-j-6b")], ScoreRow)
    report, _ = metrics_stage.run_metrics(scores, MetricsParams())
    assert report["brier_paper"] == pytest.approx(0.4815644046052982, abs=1e-12)
    assert report["brier"] == pytest.approx(((scores["p"] - scores["y"]) ** 2).mean(), abs=1e-15)
    assert report["brier"] < 0.2 < report["brier_paper"]
