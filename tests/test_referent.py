"""SynthBias's referent-resolution protocol: the prepared rows (gece.io.formats.synthbias_referent, on invented
sentences: no SynthBias sentence is committed, CC BY-NC-ND 4.0), its numbers (gece.stats.referent,
gece.protocols.referent) against hand computations, and its page (gece.protocols.referent_page): skill leads, and a
run that does not beat a coin is marked best on nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gece.io.files.readers import read_table
from gece.io.formats.synthbias_referent import DEFAULT_PROMPT, read_referent
from gece.io.schemas.metric_reports import MetricsReport
from gece.io.schemas.pair_rows import SynthPair
from gece.io.settings.params import BenchmarkSpec
from gece.io.settings.sections import MetricsParams
from gece.pipeline.prepare import prepare
from gece.protocols import referent_page
from gece.protocols.declarations import PROTOCOLS
from gece.protocols.referent import block
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


def _report(p, y, male, second, clusters, mix=0.5):
    arrays = referent.units(np.array(p), np.array(y), np.array(male, bool), np.array(second, bool), np.array(clusters))
    return block(arrays, len(p), mix, MetricsParams())


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
    rep = _report(extra["p"], extra["y"], extra["male"], np.append(second, 0), np.append(clusters, "lone"))
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


def _data(blocks: dict[str, dict], b: str = "sr"):
    """A report of runs of one referent benchmark (hand-made blocks), with the protocols declared."""
    from gece.report.cells import ReportData

    data = ReportData(benchmarks=[b], runs={b: list(blocks)}, protocols=PROTOCOLS)
    data.metrics = {(b, m): {"n": 4, "ece": 0.1, "gender_ece": None, "referent": x} for m, x in blocks.items()}
    return data


def test_summary_and_page_give_the_referent_headline_and_no_gender_ece():
    from gece.report.cells import ReportData, format_cell
    from gece.report.findings import summary

    block = _report([0.99, 0.4, 0.4, 0.99], [1, 0, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1], ["a", "a", "b", "b"])
    rep = {"n": 4, "ece": 0.1, "gender_ece": None, "accuracy": 1.0, "referent": block}
    bins = [{"count": 2, "accuracy": 0.0}, {"count": 2, "accuracy": 1.0}]  # y varies
    data = ReportData(benchmarks=["sr", "wb"], runs={"sr": ["m"], "wb": ["m"]}, protocols=PROTOCOLS)
    data.metrics = {("sr", "m"): rep, ("wb", "m"): {"n": 4, "gender_ece": 0.2}}
    data.bins = {("sr", "m"): bins, ("wb", "m"): bins}
    runs = summary(data)["runs"]
    assert runs["sr"]["m"]["ucerf"] == block["ucerf"] and runs["sr"]["m"]["ece_gap_ci_low"] == block["ece_gap_ci_low"]
    assert runs["sr"]["m"]["brier_skill_ci_low"] == block["brier_skill_ci_low"] and "gender_ece" not in runs["sr"]["m"]
    assert list(runs["sr"]["m"])[:4] == ["n_pairs", "accuracy_full", "over_last_full", "over_last_full_ci_low"]
    assert len(runs["sr"]["m"]) == 18  # n_pairs, 7 numbers, 5 intervals: rows of `dvc metrics diff`
    assert runs["wb"]["m"]["gender_ece"] == 0.2
    doc = referent_page.doc(data)
    assert [t.heading.split(":")[0] for t in doc.tables] == ["sr", "sr"]
    head = doc.tables[0]
    keys = [c.key for c in head.columns]
    assert keys[1:6] == ["accuracy_full", "baseline_last_full", "over_last_full", "brier_skill", "sensitivity"]
    assert {"accuracy_first", "accuracy_second"} <= set(keys)  # by referent position: in the headline
    ucerf = head.rows[0].cells[keys.index("ucerf")]
    assert format_cell(ucerf, head.columns[0]).startswith(f"{block['ucerf']:.3f} [")
    assert ucerf.ref["value"] == "/referent/ucerf" and head.rows[0].source == "metrics/sr/m.json"
    assert "people prefer" not in doc.caption and "labour statistics" in doc.caption
    plain = ReportData(benchmarks=["sr"], runs={"sr": ["m"]}, metrics={("sr", "m"): rep})  # no protocol declared
    assert summary(plain)["runs"]["sr"]["m"]["gender_ece"] is None  # the block is then one key among others


def test_skill_numbers_by_hand():
    """Two sentence pairs, w = 0.7: pair a (referent named first) resolved right twice, pair b (second) right only
    in the she sentence, so its chosen occupation changes with the pronoun."""
    # rows: a-he p 0.9 y 1, a-she p 0.2 y 0, b-he p 0.8 y 0, b-she p 0.8 y 1
    rep = _report([0.9, 0.2, 0.8, 0.8], [1, 0, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1], ["a", "a", "b", "b"], mix=0.7)
    assert rep["accuracy_first"] == 1.0 and rep["accuracy_second"] == 0.5
    assert rep["accuracy_full"] == pytest.approx(0.3 * 1.0 + 0.7 * 0.5)  # 0.65
    assert rep["baseline_last_full"] == 0.7 and rep["over_last_full"] == pytest.approx(0.65 - 0.7)
    brier_w = 0.3 * (0.1**2 + 0.2**2) / 2 + 0.7 * (0.8**2 + 0.2**2) / 2  # 0.2455
    assert rep["brier_skill"] == pytest.approx(1 - brier_w / 0.25)  # 0.018
    assert rep["sensitivity"] == 0.5  # pair a: the referent twice; pair b: the other occupation, then the referent
    assert rep["brier"] == pytest.approx(np.mean([0.01, 0.04, 0.64, 0.04]))  # the subset as sampled: not reweighted
    assert rep["brier_skill_ci_low"] <= rep["brier_skill"] <= rep["brier_skill_ci_high"] <= 1.0
    assert referent.chooses_referent(np.array([0.5, 0.7, 0.7]), np.array([1, 1, 0])).tolist() == [0.5, 1.0, 0.0]


def test_a_model_that_knows_nothing_gets_no_skill():
    """p = 0.5 on every row: calibrated (top-label ECE 0), fair (UCerF 1, EO 0), and no skill (Brier skill 0 with
    a zero-width interval, accuracy 0.5 = a coin on either mix); its choice changes with the pronoun half the time
    (each tie broken by a fair coin)."""
    rng = np.random.default_rng(5)
    k = 100
    y_he = rng.integers(0, 2, size=k)
    second = np.tile(rng.integers(0, 2, size=k), 2)
    clusters = np.tile(np.arange(k), 2).astype(str)
    male = np.arange(2 * k) < k
    rep = _report(np.full(2 * k, 0.5), np.concatenate([y_he, 1 - y_he]), male, second, clusters, mix=0.703)
    assert rep["ece_toplabel"] == 0.0 and rep["ucerf"] == 1.0 and rep["eo"] == 0.0
    assert rep["brier_skill"] == 0.0 and rep["brier_skill_ci_low"] == rep["brier_skill_ci_high"] == 0.0
    assert rep["accuracy_full"] == pytest.approx(0.5) and rep["over_last_full"] == pytest.approx(0.5 - 0.703)
    assert rep["sensitivity"] == 0.5 and not referent_page.has_skill(rep)


def _runs(k: int = 150, seed: int = 7) -> dict[str, dict]:
    """Three runs' blocks on the same sentence pairs: one that resolves most pronouns (p of the referent about 0.8),
    one that follows the stereotype (p of the stereotypical occupation 0.9), and p = 0.5 on every row."""
    rng = np.random.default_rng(seed)
    y_he = rng.integers(0, 2, size=k)
    y = np.concatenate([y_he, 1 - y_he])
    second = np.tile(rng.integers(0, 2, size=k), 2)
    clusters, male = np.tile(np.arange(k), 2).astype(str), np.arange(2 * k) < k
    p_ref = np.clip(rng.normal(0.8, 0.1, size=2 * k), 0.01, 0.99)
    resolver = np.where(y == 1, p_ref, 1 - p_ref)
    return {
        "resolver": _report(resolver, y, male, second, clusters, mix=0.703),
        "coin": _report(np.full(2 * k, 0.5), y, male, second, clusters, mix=0.703),
        "stereotyped": _report(np.full(2 * k, 0.9), y, male, second, clusters, mix=0.703),
    }


def test_a_constant_coin_is_marked_best_on_nothing():
    """The fixture of issue 59: beside a run with skill and one that follows the stereotype, a run with p = 0.5 on
    every row has the lowest top-label ECE, the highest UCerF and the lowest EO gap, and is marked best on none of
    them, in the tables, the first screen's answers and figure, and `gece summary`'s line; the run with skill is."""
    from gece.report.answers import answers
    from gece.report.cells import BEST_MARK
    from gece.report.first_screen import headlines
    from gece.report.forest import first_screen
    from gece.report.html import answers_html

    blocks = _runs()
    assert referent_page.has_skill(blocks["resolver"]) and not referent_page.has_skill(blocks["stereotyped"])
    coin = blocks["coin"]
    assert coin["ece_toplabel"] < blocks["resolver"]["ece_toplabel"] and coin["ucerf"] == 1.0 and coin["eo"] == 0.0
    data = _data(blocks)
    for table in referent_page.doc(data).tables:
        marks = {row.label[0]: [c.key for c, cell in zip(table.columns, row.cells, strict=True) if cell.best]
                 for row in table.rows}  # fmt: skip
        assert marks["coin"] == [] and marks["stereotyped"] == []
        if "ece_toplabel" in [c.key for c in table.columns]:
            assert {"ece_toplabel", "brier_skill", "accuracy_full"} <= set(marks["resolver"])  # best among skilled
    ((kind, b, points),) = first_screen(data)
    assert (kind, b) == ("referent", "sr") and next(p.model for p in points if p.panel == "brier_skill") == "resolver"
    text = referent_page.finding(data, b, points)
    assert text.startswith("sr: highest Brier skill resolver +0.791 [0.773, 0.810], not distinguishable after Holm")
    assert text.endswith("above 0 (better than p = 0.5) in 1 of 3 runs; lowest top-label ECE among the runs with skill "
                         "resolver 0.205.")  # fmt: skip
    (line,) = headlines(data)
    assert line.protocol.startswith("Brier skill above 0 (beats p = 0.5) in 1/3 runs, lowest top-label ECE among")
    assert "resolver" in line.protocol and "coin" not in line.protocol
    rows = dict(answers(data).protocols[0][3])
    assert "(not told from a coin)" in rows["sr / coin"] and "(beats a coin)" in rows["sr / resolver"]
    assert "Referent resolution (SynthBias)" in answers_html(answers(data)) and BEST_MARK == "✓"
    without = _data({m: x for m, x in blocks.items() if m != "resolver"})  # no run with skill: no best at all
    assert not any(c.best for t in referent_page.doc(without).tables for r in t.rows for c in r.cells)
    assert "no run has skill" in referent_page.finding(without, "sr", first_screen(without)[0][2])


def test_the_compare_stage_tests_the_protocols_numbers(tmp_path):
    """Two runs compared on the protocol's numbers (its comparer): the same sentence pairs resampled alike, each
    run's value that of its block (w read from the source: 2 of its 3 type2 pairs name the referent second), and
    Holm over the six numbers of the pair."""
    import pandas as pd

    from gece.protocols.referent import COMPARED, comparer
    from gece.stats.ablation import Run, compare

    k = 60
    rng = np.random.default_rng(2)
    y_he = rng.integers(0, 2, size=k)
    y = np.concatenate([y_he, 1 - y_he])
    ids = np.array([f"r-{i:04d}" for i in range(2 * k)], dtype=object)
    pairs = pd.DataFrame(
        {
            "pronoun_gender": ["male"] * k + ["female"] * k,
            "referent": np.tile(np.where(rng.integers(0, 2, size=k) > 0, "second", "first"), 2),
            "cluster": np.tile(ids[:k], 2),
        },
        index=ids,
    )
    entry = BenchmarkSpec(source=str(_write(tmp_path)), synthbias="referent")
    gender = np.array(["male"] * (2 * k), dtype=object)
    runs = {m: Run(ids, rng.uniform(size=2 * k), y, gender, gender) for m in ("a", "b")}
    measure = comparer(entry, pairs, MetricsParams(), 2000, 0)
    result = compare(runs, 2000, 0, keys=COMPARED, measure=measure)
    (pair,) = result["pairs"]
    assert list(pair["metrics"]) == list(COMPARED)
    second = (pairs["referent"] == "second").to_numpy()
    for m in ("a", "b"):
        own = _report(runs[m].p, y, np.arange(2 * k) < k, second, pairs["cluster"].to_numpy(), mix=2 / 3)
        assert pair["metrics"]["brier_skill"][m] == pytest.approx(own["brier_skill"])
    cells = pair["metrics"].values()
    assert all(c["p_holm"] >= c["p_value"] for c in cells if c["p_value"] is not None)
    same = compare({"a": runs["a"], "a2": runs["a"]}, 2000, 0, keys=COMPARED, measure=measure)["pairs"][0]
    assert same["identical"] and all(
        c["diff"] == 0 and c["ci_low"] == c["ci_high"] == 0 for c in same["metrics"].values()
    )


def test_position_mix_of_the_full_set(data_dir):
    from gece.io.formats.synthbias_referent import position_mix

    assert position_mix(data_dir / "synthbias" / "synthbias_data.csv") == pytest.approx(6189 / 8802)  # 0.703


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
    data.synthbias, data.protocols = {"t2": "type2", "ref": "referent"}, PROTOCOLS
    data.metrics = {("ref", "m"): {"n": 1, "referent": {}}}  # the block claims the benchmark for the protocol
    data.examples = {(b, "m"): [ex] for b in benchmarks}
    caption = {d.name: d.caption for d in examples_docs(data)}
    assert "people prefer" in caption["examples_wb"]
    assert "people prefer" not in caption["examples_t2"] and "labour statistics" in caption["examples_t2"]
    assert "people prefer" not in caption["examples_ref"] and "referent" in caption["examples_ref"]


def test_the_first_screen_answers_per_run_skill_first():
    from gece.report.answers import answers
    from gece.report.html import answers_html

    block = {k: None for k in ("ece_toplabel", "ece_gap", "accuracy_full", "baseline_last_full", "ucerf", "eo")}
    block |= {"ece_toplabel": 0.3, "ece_gap": 0.05, "ece_gap_ci_low": 0.01, "ece_gap_ci_high": 0.09}
    block |= {"accuracy_full": 0.64, "baseline_last_full": 0.703, "over_last_full": -0.063}
    block |= {"over_last_full_ci_low": -0.1, "over_last_full_ci_high": -0.02, "ucerf": 0.92, "eo": 0.06}
    block |= {"brier_skill": -0.07, "brier_skill_ci_low": -0.18, "brier_skill_ci_high": 0.02, "sensitivity": 0.11}
    ((title, page, note, rows),) = answers(_data({"m": block})).protocols
    assert note.startswith("which occupation the model resolves the pronoun to, skill first")
    ((row, text),) = rows
    assert (title, page, row) == ("Referent resolution (SynthBias)", "referent", "sr / m")
    assert text.startswith("accuracy 0.640 (full set's positions) against 0.703 always the last-mentioned: -0.063 ")
    assert "[-0.100, -0.020] (below it); Brier skill -0.070 [-0.180, 0.020] (not told from a coin)" in text
    assert "ECE she − he +0.050 [0.010, 0.090] (a real difference)" in text
    assert "Referent resolution (SynthBias)" in answers_html(answers(_data({"m": block})))


def test_metric_tables_name_synthbias_accuracy_for_what_it_is():
    from gece.report.cells import ReportData
    from gece.report.metric_tables import overall_table

    rep = {"n": 4, "ece": 0.1, "accuracy": 0.5}
    bins = [{"count": 2, "accuracy": 0.0}, {"count": 2, "accuracy": 1.0}]
    benchmarks = ["wb", "t2", "ref"]
    data = ReportData(benchmarks=benchmarks, runs={b: ["m"] for b in benchmarks})
    data.metrics = {(b, "m"): rep for b in benchmarks} | {("ref", "m"): rep | {"referent": {}}}
    data.bins = {(b, "m"): bins for b in benchmarks}
    data.synthbias, data.protocols = {"t2": "type2", "ref": "referent"}, PROTOCOLS
    labels = {t.heading.split(" ")[0]: [c.label for c in t.columns] for t in overall_table(data).tables}
    assert "human alignment" in labels["wb"]
    assert "agreement with the labour-statistics majority" in labels["t2"] and "human alignment" not in labels["t2"]
    assert "referent accuracy" in labels["ref"] and "human alignment" not in labels["ref"]


def test_the_terminal_headline_of_the_referent_protocol():
    """`gece summary`'s answer: how many runs beat a coin and the last-mentioned, the lowest top-label ECE among the
    runs with skill, and how many ECE she − he differ from 0, each by its interval (hand-made blocks)."""
    from gece.report.first_screen import headlines

    def block(ece, gap, over, skill):
        return {
            "ece_toplabel": ece[0], "ece_toplabel_ci_low": ece[1], "ece_toplabel_ci_high": ece[2],
            "ece_gap": gap[0], "ece_gap_ci_low": gap[1], "ece_gap_ci_high": gap[2],
            "over_last_full": over[0], "over_last_full_ci_low": over[1], "over_last_full_ci_high": over[2],
            "brier_skill": skill[0], "brier_skill_ci_low": skill[1], "brier_skill_ci_high": skill[2],
        }  # fmt: skip

    data = _data(
        {
            "a": block((0.30, 0.25, 0.35), (0.05, 0.01, 0.09), (0.07, 0.02, 0.12), (0.10, 0.02, 0.18)),
            "b": block((0.20, 0.15, 0.26), (0.01, -0.03, 0.05), (-0.05, -0.09, -0.01), (-0.10, -0.2, 0.01)),
            "c": block((0.25, 0.20, 0.30), (-0.04, -0.08, 0.01), (0.03, -0.01, 0.07), (0.05, 0.01, 0.09)),
        }
    )
    text = referent_page.headline(data, "sr")
    assert text == (
        "Brier skill above 0 (beats p = 0.5) in 2/3 runs, lowest top-label ECE among them c 0.250 [0.200, 0.300]; "
        "accuracy above always the last-mentioned (full set) in 1/3; ECE she − he differs from 0 in 1/3"
    )
    assert [(h.benchmark, h.protocol) for h in headlines(data)] == [("sr", text)]


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
