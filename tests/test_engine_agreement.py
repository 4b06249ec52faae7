"""Engine agreement (checked_against): hand cases, the compare stage's numbers against an independent computation
from the two score files, and the registry's refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from gece.cli import main
from gece.stats import engine_agreement
from gece.stats.ablation import Run

from .test_lmeval import good_samples, workdir, write_samples  # noqa: F401 (workdir: the fixture)


def _run(p, y, ids=None) -> Run:
    n = len(p)
    ids = np.array(ids if ids is not None else [f"x{i}" for i in range(n)], dtype=object)
    return Run(
        ids, np.asarray(p, float), np.asarray(y, float), np.full(n, "male", object), np.full(n, "female", object)
    )


def test_flips_and_the_largest_score_change_by_hand():
    """A verdict is p > 0.5: 0.6 -> 0.4 flips, 0.5 -> 0.51 flips (0.5 prefers neither), 0.4 -> 0.4 does not."""
    a = _run([0.6, 0.4, 0.5, 0.51, 0.9], [1, 0, 1, 0, 1])
    b = _run([0.4, 0.4, 0.51, 0.49, 0.9], [1, 0, 1, 0, 1])
    res = engine_agreement.agreement(
        a, b, np.array([0.4, -0.4, 0.0, 0.04, 2.2]), np.array([-0.4, -0.4, 0.04, -0.04, 2.2]), 2000, 0
    )
    assert (res["n"], res["flips"], res["metric"]) == (5, 3, "ece")
    assert res["max_abs_lld_diff"] == pytest.approx(0.8)
    same = engine_agreement.agreement(a, a, np.zeros(5), np.zeros(5), 2000, 0)
    assert (same["flips"], same["max_abs_lld_diff"], same["diff"]) == (0, 0.0, 0.0)


def test_a_constant_label_compares_the_stereotype_share():
    a = _run([0.6, 0.7, 0.4, 0.8], [1, 1, 1, 1])
    b = _run([0.4, 0.7, 0.4, 0.8], [1, 1, 1, 1])
    res = engine_agreement.agreement(a, b, np.zeros(4), np.zeros(4), 2000, 0)
    assert (res["metric"], res["flips"], res["diff"]) == ("stereotype_share", 1, pytest.approx(0.25))


def _samples(n: int, shift: dict[int, float]) -> list[dict]:
    """lm-eval samples of the first n pairs of winobias: log-likelihoods -1 - 0.3 (i mod 7) for sent_more and
    -1 - 0.35 (i mod 5) for sent_less, sent_more's moved by shift[i]."""
    rows = good_samples(n)
    for i, row in enumerate(rows):
        resps = [[str(-1 - 0.3 * (i % 7) + shift.get(i, 0.0)), "False"], [str(-1 - 0.35 * (i % 5)), "False"]]
        row["filtered_resps"], row["resps"] = resps, [[r] for r in resps]
    return rows


def _ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """The paper's ECE, written here: equal-width bins over p, Σ |B|/n |mean y − mean p|."""
    which = np.minimum((p * bins).astype(int), bins - 1)
    frame = pd.DataFrame({"b": which, "p": p, "y": y}).groupby("b")
    return float((frame.size() / len(p) * (frame["y"].mean() - frame["p"].mean()).abs()).sum())


def test_compare_reports_the_agreement_of_two_lm_eval_runs(workdir, capsys):  # noqa: F811
    """Two imports of one model (another batch size, say): the second covers 30 of the first's 40 pairs and moves
    three scores, two across p = 0.5. The compare stage's agreement is the one computed here from the two score
    files, and its interval is the paired comparison's of the same two runs."""
    write_samples(workdir, _samples(40, {}))
    rows = _samples(40, {5: 1.6, 13: 1.5, 15: -0.3})[5:35]
    out = workdir / "lm2" / "model"
    out.mkdir(parents=True)
    for f in (workdir / "lm" / "model").iterdir():
        if f.name.startswith("results"):
            (out / f.name).write_text(f.read_text())
    (out / next(f.name for f in (workdir / "lm" / "model").iterdir() if f.name.startswith("samples"))).write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["registry"]["smol-lm-b"] = {"source": "lmeval:lm2", "checked_against": "smol-lm"}
    params["models"], params["references"], params["ablate"]["special_tokens"] = [], [], {}  # the two runs alone
    params["ablate"]["prompts"] = {}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for m in ("smol-lm", "smol-lm-b"):
        assert main(["-q", "lmeval-import", "--model", m, "--benchmark", "winobias"]) == 0
    assert main(["-q", "compare", "--benchmark", "winobias", "--out", "c.json", "--draws", "2000"]) == 0
    rep = json.loads((workdir / "c.json").read_text())
    (found,) = rep["agreement"]

    a = pd.read_parquet("artifacts/scores/winobias/smol-lm-b.parquet").set_index("pair_id")
    b = pd.read_parquet("artifacts/scores/winobias/smol-lm.parquet").set_index("pair_id").loc[a.index]
    lld = (a["logprob_more"] - a["logprob_less"]) - (b["logprob_more"] - b["logprob_less"])
    flips = int(((a["p"] > 0.5) != (b["p"] > 0.5)).sum())
    assert (found["run"], found["against"], found["n"], found["metric"]) == ("smol-lm-b", "smol-lm", 30, "ece")
    assert found["flips"] == flips == 2
    assert found["max_abs_lld_diff"] == pytest.approx(lld.abs().max()) and lld.abs().max() == pytest.approx(1.6)
    expected = _ece(a["p"].to_numpy(), a["y"].to_numpy(float)) - _ece(b["p"].to_numpy(), b["y"].to_numpy(float))
    assert found["diff"] == pytest.approx(expected, abs=1e-12) and expected != 0
    (cell,) = [e for e in rep["pairs"] if {e["a"], e["b"]} == {"smol-lm", "smol-lm-b"}]
    assert cell["n"] == 30 and cell["metrics"]["ece"]["diff"] == pytest.approx(-found["diff"])
    assert (found["ci_low"], found["ci_high"]) == pytest.approx(
        (-cell["metrics"]["ece"]["ci_high"], -cell["metrics"]["ece"]["ci_low"])
    )
    assert found["ci_low"] <= found["diff"] <= found["ci_high"]
    capsys.readouterr()
    assert main(["compare", "--benchmark", "winobias", "--draws", "2000"]) == 0
    assert (
        "engine agreement: smol-lm-b against smol-lm on 30 pairs: largest |Δ log-likelihood difference| 1.6, 2 "
        "verdicts flipped" in capsys.readouterr().out.replace("\n", " ")
    )


@pytest.mark.parametrize(
    ("against", "says"),
    [("nobody", "registry.smol-lm.checked_against names 'nobody', which is not a run"), ("smol-lm", "itself")],
)
def test_checked_against_names_another_run(workdir, capsys, against, says):  # noqa: F811
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["registry"]["smol-lm"]["checked_against"] = against
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["compare", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err
    assert "checked_against" in err and says in err and "Traceback" not in err


def test_summary_and_page_show_the_agreement_only_where_a_run_has_one():
    from gece.report import findings
    from gece.report.cells import ReportData
    from gece.report.compare_tables import agreement_table

    entry = {"run": "lm", "against": "exact", "n": 30, "max_abs_lld_diff": 2e-5, "flips": 1, "metric": "ece"}
    entry |= {"diff": 0.004, "ci_low": -0.001, "ci_high": 0.009, "p_value": 0.2}
    plain = ReportData(benchmarks=["wb"], runs={"wb": []}, compare={"wb": {"pairs": []}})
    assert "agreement" not in findings.summary(plain) and agreement_table(plain) is None
    checked = ReportData(benchmarks=["wb"], runs={"wb": []}, compare={"wb": {"pairs": [], "agreement": [entry]}})
    row = findings.summary(checked)["agreement"]["wb"]["lm"]
    assert row == {
        "n": 30,
        "max_abs_lld_diff": 2e-5,
        "flips": 1,
        "ece_change": 0.004,
        "ece_change_low": -0.001,
        "ece_change_high": 0.009,
    }
    (table,) = agreement_table(checked).tables
    assert table.rows[0].label == ["lm", "exact"] and [c.value for c in table.rows[0].cells] == [30, 2e-5, 1, 0.004]
