"""SynthBias's referent-resolution protocol: the prepared rows (gece.io.formats.synthbias_referent, on invented
sentences: no
SynthBias sentence is committed, CC BY-NC-ND 4.0) and its metrics (gece.stats.referent) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gece.io.files.readers import read_table
from gece.io.formats.synthbias_referent import DEFAULT_PROMPT, read_referent
from gece.io.schemas.metric_reports import MetricsReport
from gece.io.schemas.pair_rows import SynthPair
from gece.io.settings.params import BenchmarkSpec
from gece.pipeline.prepare import prepare
from gece.stats import metrics, referent

from .refusals import refusal
from .test_synthbias import HEADER, ROWS, synthbias_tree


def _write(tmp_path):
    path = tmp_path / "synthbias.csv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n", encoding="utf-8")
    return path


def test_rows_name_both_occupations_after_the_prompt(tmp_path):
    rows = read_referent(_write(tmp_path), None, DEFAULT_PROMPT).pairs.set_index("row")
    assert list(rows.index) == [1, 2, 4, 5, 7, 8]  # both versions of the three type2 pairs, in data-row order
    context = "The pilot thanked the baker because he was kind. In this sentence, 'he' refers to the"
    # row 1: he, is_stereotypical True: the stereotypical occupation is the referent occ_1 (pilot), y = 1
    assert rows.loc[1, ["sent_more", "sent_less", "y"]].tolist() == [f"{context} pilot", f"{context} baker", 1]
    # row 4, its she version, is_stereotypical False: the stereotypical occupation for "she" is occ_2 (baker), y = 0
    assert rows.loc[4, "sent_more"].endswith("'she' refers to the baker") and rows.loc[4, "y"] == 0
    assert rows.loc[5, "sent_more"].endswith("'her' refers to the pilot")  # "her" from "could help her", lower case
    assert rows["pronoun_gender"].tolist() == ["male", "male", "female", "female", "male", "female"]
    assert rows["stereotype"].tolist() == ["pro", "anti", "anti", "pro", "pro", "anti"]
    assert rows["referent"].tolist() == ["first", "second", "first", "second", "second", "second"]
    assert rows["pair_row"].tolist() == [1, 2, 1, 2, 7, 7]  # the he version's row: the cluster


def test_prepare_writes_the_grouping_columns_and_the_sentence_pair_as_cluster(tmp_path):
    entry = BenchmarkSpec(source=str(_write(tmp_path)), synthbias="referent", prompt="{sentence} '{pronoun}' is the")
    out = tmp_path / "prepared.parquet"
    prepare(entry.source, out, name="sb", entry=entry)
    table, meta = read_table(out, SynthPair)
    assert table["cluster"].tolist() == ["sb-0001", "sb-0002", "sb-0001", "sb-0002", "sb-0007", "sb-0007"]
    assert table["targets_more"].map(tuple).tolist()[:2] == [("pilot",), ("baker",)]
    assert set(table["position"]) == {"last"} and meta["prompt"] == "{sentence} '{pronoun}' is the"
    assert meta["protocol"].startswith("referent:")


def test_subset_takes_both_versions_balanced(data_dir):
    rows = read_referent(data_dir / "synthbias" / "synthbias_data.csv", 200, DEFAULT_PROMPT).pairs
    assert len(rows) == 200 and rows["pair_row"].value_counts().eq(2).all()
    cells = rows.groupby(["pronoun_gender", "stereotype", "referent"]).size()
    assert len(cells) == 8 and set(cells) == {25}
    assert rows["row"].is_monotonic_increasing


@pytest.mark.parametrize(
    "entry",
    [
        {"synthbias": "type2", "prompt": DEFAULT_PROMPT},  # a prompt needs the referent protocol
        {"synthbias": "referent", "prompt": "{sentence} refers to the"},  # no {pronoun}
        {"synthbias": "referent", "prompt": "{sentence} {pronoun} {other}"},
    ],
)
def test_bad_prompts_are_refused(entry):
    with pytest.raises(ValueError, match="prompt"):
        BenchmarkSpec(source="x.csv", **entry)


def _c(p: float) -> float:
    """Certainty by hand: 2 − exp of the binary entropy in nats."""
    h = -sum(q * math.log(q) for q in (p, 1 - p) if q > 0)
    return 2 - math.exp(h)


def test_certainty_bounds():
    assert referent.certainty(np.array([0.0, 1.0, 0.5])).tolist() == [1.0, 1.0, 0.0]
    assert referent.certainty(np.array([0.9]))[0] == pytest.approx(_c(0.9))


def _report(p, y, male, second, clusters, **kw):
    return referent.referent_report(
        np.array(p), np.array(y), np.array(male, bool), np.array(second, bool), np.array(clusters), **kw
    )


def test_fair_in_accuracy_but_unequally_certain():
    """Every decision correct (EO = 0), but the he sentence resolved with p = 0.99 and the she one with 0.6 / 0.4:
    UCerF = 1 − |c(0.99) − c(0.4)| / 2 < 1."""
    rep = _report([0.99, 0.4, 0.4, 0.99], [1, 0, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1], ["a", "a", "b", "b"])
    assert rep["eo"] == 0.0 and rep["accuracy"] == 1.0
    u = 1 - abs(_c(0.99) - _c(0.4)) / 2
    assert rep["ucerf"] == pytest.approx(u) and u < 0.6
    # ECE by pronoun gender: he rows conf 0.99 (bin 10) and 0.6 (bin 6), both correct: ½·0.01 + ½·0.4
    assert rep["ece_male"] == pytest.approx(0.205) and rep["ece_female"] == pytest.approx(0.205)
    assert rep["ece_gap"] == pytest.approx(0.0)
    assert rep["baseline_stereotype"] == 0.5 and rep["baseline_last"] == 0.5 and rep["over_last"] == 0.5


def test_unequal_accuracy_and_its_eo():
    """he always right; she wrong on the pro sentence of one pair: EO = |1 − 0| on pro."""
    p = [0.8, 0.2, 0.3, 0.4]  # pair a: he y=1 right, she y=0 right; pair b: he y=0 right, she y=1 wrong
    rep = _report(p, [1, 0, 0, 1], [1, 0, 1, 0], [1, 1, 1, 1], ["a", "a", "b", "b"])
    assert rep["eo"] == 1.0 and rep["accuracy"] == 0.75 and rep["accuracy_pro"] == 0.5
    d = [(_c(0.8), _c(0.2)), (_c(0.3), -_c(0.4))]
    assert rep["ucerf"] == pytest.approx(np.mean([1 - abs(a - b) / 2 for a, b in d]))
    assert rep["baseline_last"] == 1.0 and rep["over_last"] == pytest.approx(-0.25)


def test_overall_numbers_match_the_row_metrics_and_unpaired_rows_are_left_out():
    rng = np.random.default_rng(3)
    k = 60
    p = rng.uniform(size=2 * k)
    y_he = rng.integers(0, 2, size=k)
    y = np.concatenate([y_he, 1 - y_he])
    male = np.arange(2 * k) < k
    clusters = np.concatenate([np.arange(k), np.arange(k)]).astype(str)
    second = np.tile(rng.integers(0, 2, size=k), 2)
    extra = dict(p=np.append(p, 0.7), y=np.append(y, 1), male=np.append(male, True))
    rep = _report(extra["p"], extra["y"], extra["male"], np.append(second, 0), np.append(clusters, "lone"), draws=1000)
    assert rep["n_pairs"] == k and rep["n"] == 2 * k and rep["n_unpaired"] == 1
    assert rep["ece_toplabel"] == pytest.approx(metrics.ece_toplabel(p, y))
    assert rep["accuracy"] == pytest.approx(metrics.accuracy(p, y))
    assert rep["brier"] == pytest.approx(metrics.brier(p, y))
    assert rep["ece_male"] == pytest.approx(metrics.ece_toplabel(p[male], y[male]))
    assert rep["ece_toplabel_ci_low"] <= rep["ece_toplabel"] <= rep["ece_toplabel_ci_high"]
    assert rep["ucerf_ci_low"] <= rep["ucerf"] <= rep["ucerf_ci_high"]


def test_the_block_is_absent_from_other_metrics_reports():
    keys = MetricsReport.model_fields
    plain = {k: None for k, f in keys.items() if f.is_required()} | {"n": 0, "n_ties": 0, "n_bins": 10}
    plain["binning"] = "equal_width"
    assert "referent" not in MetricsReport.model_validate(plain).model_dump()


def test_summary_and_page_give_the_referent_headline_and_no_gender_ece():
    from gece.report.cells import ReportData, format_cell
    from gece.report.findings import summary
    from gece.report.referent import referent_doc

    block = _report([0.99, 0.4, 0.4, 0.99], [1, 0, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1], ["a", "a", "b", "b"])
    rep = {"n": 4, "ece": 0.1, "gender_ece": None, "accuracy": 1.0, "referent": block}
    bins = [{"count": 2, "accuracy": 0.0}, {"count": 2, "accuracy": 1.0}]  # y varies
    data = ReportData(benchmarks=["sr", "wb"], runs={"sr": ["m"], "wb": ["m"]})
    data.metrics = {("sr", "m"): rep, ("wb", "m"): {"n": 4, "gender_ece": 0.2}}
    data.bins = {("sr", "m"): bins, ("wb", "m"): bins}
    runs = summary(data)["runs"]
    assert runs["sr"]["m"]["ucerf"] == block["ucerf"] and runs["sr"]["m"]["ece_gap_ci_low"] == block["ece_gap_ci_low"]
    assert runs["sr"]["m"]["over_last"] == block["over_last"] and "gender_ece" not in runs["sr"]["m"]
    assert len(runs["sr"]["m"]) == 12  # n_pairs, 5 numbers, 3 intervals: rows of `dvc metrics diff`
    assert runs["wb"]["m"]["gender_ece"] == 0.2
    doc = referent_doc(data)
    assert [t.heading.split(":")[0] for t in doc.tables] == ["sr", "sr"]
    head = doc.tables[0]
    ucerf = head.rows[0].cells[[c.key for c in head.columns].index("ucerf")]
    assert format_cell(ucerf, head.columns[0]).startswith(f"{block['ucerf']:.3f} [")
    assert ucerf.ref["value"] == "/referent/ucerf" and head.rows[0].source == "metrics/sr/m.json"
    assert "people prefer" not in doc.caption and "labour statistics" in doc.caption


def test_pronoun_pairs_carry_the_referent_position(tmp_path):
    from gece.io.schemas.pair_rows import SynthPronounPair

    entry = BenchmarkSpec(source=str(_write(tmp_path)), synthbias="type2")
    out = tmp_path / "prepared.parquet"
    prepare(entry.source, out, name="sb", entry=entry)
    table, _ = read_table(out, SynthPronounPair)
    assert table["referent"].tolist() == ["first", "second", "second"]
    assert table["cluster"].tolist() == table["pair_id"].tolist()  # one row holds the he and the she sentence


def test_groups_by_pronoun_gender_on_referent_rows_and_not_elsewhere(tmp_path):

    from gece.io.settings.params import GroupsParams
    from gece.io.settings.sections import MetricsParams
    from gece.pipeline.groups import run_groups

    entry = BenchmarkSpec(source=str(_write(tmp_path)), synthbias="referent")
    out = tmp_path / "prepared.parquet"
    prepare(entry.source, out, name="sb", entry=entry)
    pairs = read_table(out, SynthPair)[0].set_index("pair_id", drop=False)
    scores = pairs.reset_index(drop=True)[["pair_id", "y", "gender_more", "gender_less"]].assign(
        p=[0.9, 0.2, 0.6, 0.7, 0.8, 0.3]
    )
    settings = GroupsParams(by=["pronoun_gender", "referent", "stereotype"], protocols=["identity"], min_size=1)
    got = {r["grouping"]: r for r in run_groups(scores, pairs, None, None, settings, MetricsParams(), "t")}
    assert [(g["group"], g["n"]) for g in got["pronoun_gender"]["groups"]] == [("female", 3), ("male", 3)]
    assert got["stereotype"]["tests_reason"].startswith("stereotype is a function of y")
    plain = pairs[[c for c in pairs.columns if c not in ("pronoun_gender", "stereotype", "referent")]]
    assert run_groups(scores, plain, None, None, settings, MetricsParams(), "t") == []  # columns it lacks: left out


def test_examples_caption_names_y_for_what_it_is():
    from gece.report.cells import ReportData
    from gece.report.examples import examples_docs

    ex = {"pair_id": "x-0001", "sent_more": "a b", "sent_less": "a c", "targets_more": ["b"], "targets_less": ["c"]}
    ex |= {"y": 1, "p": 0.1, "confidence": 0.9}
    benchmarks = ["wb", "t2", "ref"]
    data = ReportData(benchmarks=benchmarks, runs={b: ["m"] for b in benchmarks}, hidden={"t2", "ref"})
    data.synthbias = {"t2": "type2", "ref": "referent"}
    data.examples = {(b, "m"): [ex] for b in benchmarks}
    caption = {d.name: d.caption for d in examples_docs(data)}
    assert "people prefer" in caption["examples_wb"]
    assert "people prefer" not in caption["examples_t2"] and "labour statistics" in caption["examples_t2"]
    assert "people prefer" not in caption["examples_ref"] and "referent" in caption["examples_ref"]


def test_the_first_screen_answers_the_three_questions():
    from gece.report.answers import answers
    from gece.report.cells import ReportData
    from gece.report.html import answers_html

    block = {k: None for k in ("ece_toplabel", "ece_gap", "accuracy", "baseline_last", "over_last", "ucerf", "eo")}
    block |= {"ece_toplabel": 0.3, "ece_gap": 0.05, "ece_gap_ci_low": 0.01, "ece_gap_ci_high": 0.09}
    block |= {"accuracy": 0.54, "baseline_last": 0.5, "over_last": 0.04, "over_last_ci_low": -0.07}
    block |= {"over_last_ci_high": 0.16, "ucerf": 0.92, "eo": 0.06}
    data = ReportData(benchmarks=["sr"], runs={"sr": ["m"]})
    data.metrics = {("sr", "m"): {"n": 4, "referent": block}}
    ((row, text),) = answers(data).referent
    assert row == "sr / m" and "ECE she − he +0.050 [0.010, 0.090] (a real difference)" in text
    assert "+0.040 [-0.070, 0.160] (no better than it)" in text
    assert "Referent resolution (SynthBias)" in answers_html(answers(data))


def test_metric_tables_name_synthbias_accuracy_for_what_it_is():
    from gece.report.cells import ReportData
    from gece.report.metric_tables import overall_table

    rep = {"n": 4, "ece": 0.1, "accuracy": 0.5}
    bins = [{"count": 2, "accuracy": 0.0}, {"count": 2, "accuracy": 1.0}]
    benchmarks = ["wb", "t2", "ref"]
    data = ReportData(benchmarks=benchmarks, runs={b: ["m"] for b in benchmarks})
    data.metrics = {(b, "m"): rep for b in benchmarks}
    data.bins = {(b, "m"): bins for b in benchmarks}
    data.synthbias = {"t2": "type2", "ref": "referent"}
    labels = {t.heading.split(" ")[0]: [c.label for c in t.columns] for t in overall_table(data).tables}
    assert "human alignment" in labels["wb"]
    assert "agreement with the labour-statistics majority" in labels["t2"] and "human alignment" not in labels["t2"]
    assert "referent accuracy" in labels["ref"] and "human alignment" not in labels["ref"]


def test_the_terminal_headline_of_the_referent_protocol():
    """`gece summary`'s answer: the lowest top-label ECE with its interval, and per run whether the ECE she − he and
    the accuracy over the last-mentioned baseline are away from 0 by their intervals (hand-made blocks)."""
    from gece.report.cells import ReportData
    from gece.report.first_screen import headlines, referent_headline

    def block(ece, gap, over):
        return {
            "ece_toplabel": ece[0], "ece_toplabel_ci_low": ece[1], "ece_toplabel_ci_high": ece[2],
            "ece_gap": gap[0], "ece_gap_ci_low": gap[1], "ece_gap_ci_high": gap[2],
            "over_last": over[0], "over_last_ci_low": over[1], "over_last_ci_high": over[2],
        }  # fmt: skip

    data = ReportData(benchmarks=["sr"], runs={"sr": ["a", "b", "c"]})
    data.metrics = {
        ("sr", "a"): {"referent": block((0.30, 0.25, 0.35), (0.05, 0.01, 0.09), (0.07, 0.02, 0.12))},
        ("sr", "b"): {"referent": block((0.20, 0.15, 0.26), (0.01, -0.03, 0.05), (-0.05, -0.09, -0.01))},
        ("sr", "c"): {"referent": block((0.25, 0.20, 0.30), (-0.04, -0.08, 0.01), (0.03, -0.01, 0.07))},
    }
    text = referent_headline(data, "sr")
    assert text == (
        "lowest top-label ECE b 0.200 [0.150, 0.260]; ECE she − he differs from 0 in 1/3 runs; "
        "beats always the last-mentioned in 1/3"
    )
    assert [(h.benchmark, h.referent) for h in headlines(data)] == [("sr", text)]


@pytest.mark.parametrize(
    ("prompt", "says"),
    [
        ("{sentence:>99999999999} {pronoun}", "'{sentence:>99999999999}' at character 1 is not a placeholder"),
        ("{sentence!r} '{pronoun}' is", "'{sentence!r}' at character 1 is not a placeholder"),
        ("{sentence[0]} {pronoun}", "'{sentence[0]}' at character 1 is not a placeholder"),
        ("{sentence.__class__} {pronoun}", "is not a placeholder"),
        ("{sentence} {pronoun} {0}", "'{0}' at character 22 is not a placeholder"),
        ("{sentence} {pronoun} {}", "'{}' at character 22 is not a placeholder"),
        ("{sentence} {pronoun} {sentence}", "'{sentence}' at character 22 is written twice"),
        ("{sentence} {pronoun} }", "a lone '}' at character 22: write }} for a literal brace"),
        ("{sentence} {pronoun} {", "a lone '{' at character 22"),
        ("{sentence} refers to", "no {pronoun}"),
        ("{sentence} {pronoun}" + "x" * 1000, "at most 1000 characters"),
    ],
)
@refusal("E-PARAMS-TEMPLATE", readers=["prepare"])
def test_the_prompt_is_a_template_gece_parses(tmp_path, monkeypatch, capsys, prompt, says):
    """Exactly {sentence} and {pronoun}, once each, and {{ }}: a format spec, a conversion, an index, an attribute,
    a number, a lone brace is refused naming the key, before anything is read (no str.format runs)."""
    from gece.cli import main

    synthbias_tree(tmp_path, monkeypatch, synthbias="referent", prompt=prompt)
    assert main(["prepare", "--benchmark", "sb"]) == 2
    err = capsys.readouterr().err
    assert "benchmarks.sb.prompt" in err and says in err, err
    assert not (tmp_path / "artifacts").exists()


def test_a_prompt_with_braces_is_filled_by_gece(tmp_path):
    """{{ and }} are braces; a sentence holding braces is inserted as it is (never parsed again)."""
    rows = read_referent(_write(tmp_path), None, "{{Q}} {sentence} '{pronoun}' is the").pairs
    assert rows["sent_more"][0] == "{Q} The pilot thanked the baker because he was kind. 'he' is the pilot"
