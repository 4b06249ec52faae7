"""What a benchmark's y allows, decided once (issue 53): a benchmark whose label is the same for every pair
(CrowS-Pairs, WinoQueer under the identity protocol) appears in no calibration or human-alignment column, title,
ranking or figure; verdicts on the page agree with the intervals beside them; the post-hoc headline reports the
method fixed in advance; a run scored twice counts once."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from gece.catalog import metric_defs
from gece.io.settings.params import load_params
from gece.pipeline import report as report_stage
from gece.pipeline import report_data
from gece.report import answers, findings, identity, plots
from gece.report import html as report_html
from gece.report import tables as report_tables
from gece.report.cells import ReportData, TableDoc
from gece.stats import ablation
from gece.stats.ablation import Run

from .conftest import ROOT
from .test_identity_report import _run, _scores

N = 400
# what a constant-y table may say: the paper's names for the quantities it shows, and that they are not calibration
ALLOWED = re.compile(r"the paper's (identity ECE|Gender-ECE)|ECE here is 1 − mean p|not calibration|no calibration")
FORBIDDEN = re.compile(r"ECE|calibrat|human alignment", re.IGNORECASE)


def _genders(seed: int) -> tuple[np.ndarray, np.ndarray]:
    gm = np.where(np.random.default_rng(seed).random(N) < 0.5, "male", "female")
    return gm, np.where(gm == "male", "female", "male")


def _compare(scores: dict[str, np.ndarray], y: np.ndarray) -> dict:
    gm, gl = _genders(7)
    ids = np.arange(N)
    return ablation.compare({m: Run(ids, p, y, gm, gl) for m, p in scores.items()}, draws=300, seed=0)


def _calibration(before: dict, method: dict | None, status: str) -> dict:
    methods = {"platt": {"status": status, "metrics": method, "reason": None if method else "one label"}}
    return {"split": {"uncalibrated": before, "methods": methods, "n_fit": N // 2, "n_eval": N // 2}}


def _sample_size(rep: dict) -> dict:
    row = {"n": 50}
    for k in ("ece", "gender_ece", *metric_defs.ESTIMATORS):
        row |= {f"{k}_mean": 0.1, f"{k}_std": 0.02, f"{k}_rmse": 0.05, f"{k}_bias": 0.01}
    return {"full": rep, "sizes": [row]}


@pytest.fixture(scope="module")
def data() -> ReportData:
    """wb (labels vary) and cp (y = 1), runs m1, m2 and m1-nobos (m1 scored twice on cp, not on wb), with every
    report a calibration table, a figure or a comparison reads."""
    models = ["m1", "m2", "m1-nobos"]
    d = ReportData(benchmarks=["wb", "cp"], runs={b: list(models) for b in ("wb", "cp")}, special_pairs={})
    y = {"wb": (np.random.default_rng(5).random(N) < _scores(10, 0.0)).astype(float), "cp": np.ones(N)}
    scores = {
        ("wb", "m1"): _scores(10, 0.0),
        ("wb", "m2"): _scores(11, 0.1),
        ("wb", "m1-nobos"): _scores(12, 0.3),
        ("cp", "m1"): _scores(1, 0.15),
        ("cp", "m2"): _scores(3, -0.1),
    }
    scores[("cp", "m1-nobos")] = scores[("cp", "m1")]  # the sentence rule: the same score on every pair
    for i, ((b, m), p) in enumerate(scores.items()):
        d.metrics[(b, m)], d.bins[(b, m)] = _run(p, y[b], i)
        d.metrics[(b, m)] |= {"mean_confidence": 0.7, "share_confidence_over_0_9": 0.1}
        d.sample_size[(b, m)] = _sample_size(d.metrics[(b, m)])
    d.metrics[("cp", "m1-nobos")] = d.metrics[("cp", "m1")]
    for b in d.benchmarks:
        d.compare[b] = _compare({m: scores[(b, m)] for m in models}, y[b])
        for m in models:
            ok = b == "wb"
            after = dict(d.metrics[(b, m)], ece=d.metrics[(b, m)]["ece"] / 2) if ok else None
            d.calibration[(b, m)] = _calibration(d.metrics[(b, m)], after, "ok" if ok else "failed")
            d.calibration_bins[(b, m)] = [
                {**r, "protocol": "split", "method": x} for x in ("uncalibrated", "platt") for r in d.bins[(b, m)]
            ]
    d.special_tokens = {"m1": {b: {"with": d.metrics[(b, "m1")], "without": d.metrics[(b, "m1-nobos")]} for b in y}}
    d.special_pairs = {"m1": "m1-nobos"}
    return d


def constant_tables(data: ReportData, docs: list[TableDoc]):
    """(doc, table, rows) of every table that shows a benchmark with constant y: the rows of that benchmark (all of
    them where the heading names it)."""
    constant = {b for b in data.benchmarks if identity.claims(data, b)}
    for doc in docs:
        for table in doc.tables:
            if "soft protocol" in table.heading:  # against the annotators' shares, which vary: calibration
                continue
            first = re.split(r"[ :;(]", table.heading, maxsplit=1)[0]
            rows = table.rows if first in constant else [r for r in table.rows if r.label and r.label[0] in constant]
            if rows:
                yield doc, table, rows


def check_constant_tables(data: ReportData, docs: list[TableDoc]) -> int:
    """No constant-y table speaks of calibration or human alignment in its heading, columns or note, and none
    marks a best or worst value; returns how many tables were checked."""
    checked = 0
    for doc, table, rows in constant_tables(data, docs):
        text = " | ".join([table.heading, table.note, *(c.label for c in table.columns)])
        assert not FORBIDDEN.search(ALLOWED.sub("", text)), (doc.name, text)
        assert not [c for r in rows for c in r.cells if c.worst or c.best], (doc.name, table.heading)
        assert all(c.worst is None for c in table.columns), (doc.name, table.heading)
        checked += 1
    return checked


def test_the_metric_table_decides_which_metrics_need_a_varying_y():
    assert metric_defs.on_constant_y("ece") == ("1 − mean p (the paper's identity ECE)", None)
    assert metric_defs.on_constant_y("accuracy") == ("stereotype share (p > 0.5)", None)
    assert metric_defs.on_constant_y("ece_toplabel") is None and identity.shown("cc_ece") is None
    assert metric_defs.on_constant_y("mean_confidence") == ("mean confidence", None)
    for m in metric_defs.METRICS:  # a name kept on constant y says nothing about calibration or human alignment
        shown = metric_defs.on_constant_y(m.key)
        if m.varying_y and shown:
            assert not FORBIDDEN.search(ALLOWED.sub("", shown[0])), m.key
    assert plots.LEGENDS["1 − mean p"] and not FORBIDDEN.search(" ".join(plots.LEGENDS["1 − mean p"]))


def test_no_table_treats_a_constant_y_benchmark_as_calibration(data):
    docs = {doc.name: doc for doc in report_tables.build_tables(data)}
    # a table's heading and note are text, escaped on the page and in the markdown: no markup that would leak
    assert not [t.heading for d in docs.values() for t in d.tables if "`" in t.heading + t.note]
    assert check_constant_tables(data, list(docs.values())) >= 4
    # the special tokens: cp in a table of its own, with the stereotype share, unranked; wb ranked as before
    special = {t.heading: t for t in docs["special_tokens"].tables}
    assert list(special) == [
        "m1 vs m1-nobos",
        "m1 vs m1-nobos: y = 1 for every pair: the stereotype share and 1 − mean p, not calibration",
    ]
    own = special[list(special)[1]]
    assert "stereotype share (p > 0.5)" in [c.label for c in own.columns]
    assert own.note == "the same metrics with and without on cp: one run, scored twice"
    assert any(c.worst for r in special["m1 vs m1-nobos"].rows for c in r.cells)
    # compare: the identity quantities under their names; the run scored twice is one row saying so
    compare = {t.heading.split(";")[0]: t for t in docs["compare"].tables}
    assert [c.label for c in compare["cp"].columns] == [
        "pairs",
        "Δ 1 − mean p (the paper's identity ECE)",
        "Δ 1 − mean p by predicted gender (the paper's Gender-ECE)",
        "Δ mean (1 − p)² (Brier)",
        "Δ stereotype share (p > 0.5)",
    ]
    same = [r for r in compare["cp"].rows if r.label == ["m1", "m1-nobos"]]
    assert same[0].cells[1].value == "the same p on every pair: one run, scored twice"
    # the power note: display names, over the pairs of distinct runs (the run scored twice left out)
    assert "over 2 pairs of runs): 1 − mean p (the paper's identity ECE) 0." in compare["cp"].note
    assert "over 3 pairs of runs): ECE 0." in compare["wb"].note
    # calibration and estimators: cp is left out, wb is there
    for name in ("calibration", "estimators"):
        assert [t.heading.split(":")[0] for t in docs[name].tables] == ["wb"], name


def test_no_finding_or_figure_treats_a_constant_y_benchmark_as_calibration(data, tmp_path):
    text = " ".join(findings.findings_lines(findings.findings(data)))
    assert "m1-nobos is m1 on cp, the same score on every pair" in text
    assert "cp 0." not in text  # no ECE of cp in the special-tokens finding
    statement = report_html.special_tokens_statement(data)
    assert "cp:" not in statement and "On cp m1-nobos and m1 give every pair the same score" in statement
    figs, figures = report_stage._Figures(tmp_path), {"calibration": {}}
    for b in data.benchmarks:
        report_stage._calibration_figure(data, b, figs, figures)
    assert list(figures["calibration"]) == ["wb"]


def test_verdicts_agree_with_the_intervals_beside_them(data):
    """The Holm interval excludes 0 exactly when Holm's verdict is 'differs', on every compared metric; the page's
    lines say '≈' only with an interval that holds 0."""
    for b, rep in data.compare.items():
        for pair in rep["pairs"]:
            for k, c in pair["metrics"].items():
                if c["diff"] is None:
                    continue
                excludes = c["ci_low_holm"] > 0 or c["ci_high_holm"] < 0
                assert excludes == c["significant_holm"], (b, pair["a"], pair["b"], k, c)
                assert c["level_holm"] >= rep["level"] - 1e-12
    check_answer_lines(answers.answers(data))


def check_answer_lines(found: answers.Answers) -> int:
    """Every '≈' of the answers holds 0 in its interval, every difference excludes it; returns the count."""
    checked = 0
    for c in found.comparisons:
        for d in c.same:
            assert d.low is not None and d.low <= 0, d.same_text()
            checked += 1
        for d in c.differ:
            assert d.low is not None and d.low > 0, d.text()
            checked += 1
    return checked


INTERVAL = r"\+(?P<by>\d\.\d+) \[(?P<low>-?\d\.\d+), (?P<high>-?\d\.\d+)\]"


def page_verdicts(text: str) -> tuple[list[float], list[float]]:
    """The lower ends of the intervals the page's answers print beside '≈' and beside a difference."""
    same = [float(m["low"]) for m in re.finditer(r"≈ \S+ " + INTERVAL, text)]
    differ = []
    for line in re.findall(r"pairs differ\. (.*?)(?:no difference|</dd>)", text):
        differ += [float(m["low"]) for m in re.finditer(r"\S+ " + INTERVAL, line)]
    return same, differ


def test_the_committed_page_says_no_difference_only_where_the_interval_holds_0():
    text = html.unescape(" ".join((ROOT / "reports" / "index.html").read_text(encoding="utf-8").split()))
    same, differ = page_verdicts(text)
    assert all(low <= 0 for low in same), same
    assert all(low > 0 for low in differ), differ


def test_the_calibration_headline_reports_the_method_fixed_in_advance(data):
    (x,) = answers.calibration_changes(data)
    assert (x.benchmark, x.method, x.n_fit, x.n_eval) == ("wb", "platt", N // 2, N // 2)
    assert x.text().endswith(f"fitted on {N // 2}, evaluated on {N // 2} other pairs)")
    page = report_html.answers_html(answers.answers(data))
    assert "the method params.yaml fixes in advance (calibrate.headline)" in page


@pytest.fixture(scope="module")
def shipped(workspace_reports):
    """The workspace's reports of every run (after `make repro`); skipped on a clean clone."""
    params = load_params(ROOT / "params.yaml")
    scores = ROOT / "artifacts" / "scores"
    return params, report_data.load_report_data(params, ROOT / "reports", scores, ROOT / "reports", ROOT)


def test_the_workspace_report_treats_no_constant_y_benchmark_as_calibration(shipped, tmp_path):
    params, data = shipped
    constant = [b for b in data.benchmarks if identity.claims(data, b)]
    assert constant, "the workspace has CrowS-Pairs and WinoQueer under the identity protocol"
    assert check_constant_tables(data, report_tables.build_tables(data)) > len(constant)
    figs, figures = report_stage._Figures(tmp_path), {"calibration": {}, "grid": {}, "runs": {}}
    for b in constant:
        report_stage._reliability_figures(params, data, b, ROOT / "artifacts" / "scores", ROOT, figs, figures)
        report_stage._calibration_figure(data, b, figs, figures)
    assert not figures["calibration"] and figs.todo
    for _path, _key, _draw, args, kwargs in figs.todo:
        titles = [a for a in (*args, *kwargs.values()) if isinstance(a, str)]
        assert kwargs.get("metric", "1 − mean p") == "1 − mean p", titles
        assert not FORBIDDEN.search(ALLOWED.sub("", " ".join(titles))), titles
    assert check_answer_lines(answers.answers(data)) > 0
