"""SynthBias's pronoun pairs (gece.io.formats.synthbias, the prepare stage): the pairing rules on invented sentences (no
SynthBias sentence is committed: CC BY-NC-ND 4.0), the stratified subset, and the counts of the real file."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from gece.base.errors import GeceError
from gece.io.files.readers import read_table
from gece.io.formats import synthbias
from gece.io.formats.synthbias import MASK, read_synthbias, stratified_subset
from gece.io.schemas.pair_rows import PreparedPair
from gece.io.settings.params import BenchmarkSpec, Params, load_params
from gece.pipeline.prepare import prepare
from gece.report.cells import ReportData
from gece.report.examples import examples_docs
from gece.report.markdown import doc_markdown

from .conftest import ROOT
from .refusals import refusal

HEADER = "type,sample,occ_1,occ_2,pronoun,is_stereotypical\n"
# invented rows in SynthBias's layout: type2 referent occ_1; the she/her versions come later, not adjacent
ROWS = [
    "type2,The pilot thanked the baker because he was kind.,pilot,baker,he,True",
    "type2,The baker called the pilot so that she could help him.,pilot,baker,him,False",
    "type1,The clerk and the guard met before he left.,clerk,guard,he,ambiguous",
    "type2,The pilot thanked the baker because she was kind.,pilot,baker,she,False",
    "type2,The baker called the pilot so that she could help her.,pilot,baker,her,True",
    "type1,The clerk and the guard met before she left.,clerk,guard,she,ambiguous",
    "type2,The nurse praised the cook for his soup.,cook,nurse,his,True",
    "type2,The nurse praised the cook for her soup.,cook,nurse,her,False",
    "type2,The nurse praised the cook for her soup.,cook,nurse,her,False",  # a duplicate
    "type1,A tailor saw a judge and he waved.,tailor,judge,he,ambiguous",  # listed under both types
    "type2,A tailor saw a judge and he waved.,tailor,judge,he,True",
    "type2,The chef paid the maid after he ate.,maid,chef,he,True",  # no female version: unpaired
]


def _write(tmp_path, rows=ROWS):
    path = tmp_path / "synthbias.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_pairs_rules_and_labels(tmp_path):
    read = read_synthbias(_write(tmp_path), "type2", None)
    assert read.removed == {"both_types": 2, "duplicates": 1, "unpaired": 1} and read.rows_read == 12
    p = read.pairs.set_index("row")
    # "her" pairs with "him" (row 2 with row 5) and with "his" (row 7 with row 8)
    assert p.loc[2, "sent_less"] == "The baker called the pilot so that she could help her."
    assert p.loc[7, "sent_less"] == "The nurse praised the cook for her soup."
    assert list(p.index) == [1, 2, 7]  # the male version's row
    # y = 1: the referent's occupation is male-majority (male pronoun stereotypical, or female anti-stereotypical)
    assert p["y"].to_dict() == {1: 1, 2: 0, 7: 1}
    assert p["referent"].to_dict() == {1: "first", 2: "second", 7: "second"}
    assert p.loc[1, "key"] == f"The pilot thanked the baker because {MASK} was kind."


def test_type1_is_constant_y(tmp_path):
    read = read_synthbias(_write(tmp_path), "type1", None)
    assert read.pairs["y"].tolist() == [1] and read.pairs["referent"].isna().all()
    assert read.strata == {"all": 1}


def test_stratified_subset_is_balanced_fixed_and_order_free():
    keys = [f"sentence {i} {MASK}" for i in range(80)]
    pairs = pd.DataFrame(
        {
            "row": range(1, 81),
            "y": [i % 2 for i in range(80)],
            "referent": ["first" if i % 4 < 2 else "second" for i in range(80)],
            "key": keys,
        }
    )
    chosen, strata = stratified_subset(pairs, 20)
    assert strata == {"first/0": 5, "first/1": 5, "second/0": 5, "second/1": 5}
    assert chosen["row"].is_monotonic_increasing  # the rows' order, which extract requires
    first = pairs[(pairs["referent"] == "first") & (pairs["y"] == 0)]
    by_hash = sorted(first["key"], key=lambda k: hashlib.sha256(k.encode()).hexdigest())[:5]
    assert set(chosen["key"]) >= set(by_hash)
    shuffled, _ = stratified_subset(pairs.sample(frac=1, random_state=1).reset_index(drop=True), 20)
    assert shuffled["row"].tolist() == chosen["row"].tolist()
    small, strata = stratified_subset(pairs.iloc[:10], 20)  # fewer than the share: all of them
    assert len(small) == 10 and sum(strata.values()) == 10


def test_bad_rows_are_named(tmp_path):
    rows = [*ROWS[:2], "type3,The cook left.,cook,maid,she,True", "type2,The cook left.,cook,maid,it,True"]
    with pytest.raises(GeceError) as e:
        read_synthbias(_write(tmp_path, rows), "type2", None)
    text = str(e.value) + " ".join(e.value.problems)
    assert "row 3" in text and "type3" in text and "row 4" in text and "'it'" in text


def test_params_need_a_source_and_subset_needs_synthbias():
    with pytest.raises(ValueError, match="synthbias needs source"):
        BenchmarkSpec(synthbias="type2")
    with pytest.raises(ValueError, match="subset is a SynthBias setting"):
        BenchmarkSpec(subset=100)
    entry = BenchmarkSpec(source="x.csv", synthbias="type1")
    assert not entry.imported


def test_prepare_writes_pairs_and_the_rules_counts(tmp_path):
    entry = BenchmarkSpec(source=str(_write(tmp_path)), synthbias="type2")
    out = tmp_path / "prepared.parquet"
    prepare(entry.source, out, name="sb", entry=entry)
    table, meta = read_table(out, PreparedPair)
    assert table["targets_more"].map(tuple).tolist() == [("he",), ("him",), ("his",)]
    assert table["targets_less"].map(tuple).tolist() == [("she",), ("her",), ("her",)]
    assert set(table["gender_more"]) == {"male"} and set(table["gender_less"]) == {"female"}
    assert meta["removed_rows"] == "both_types 2, duplicates 1, unpaired 1" and meta["subset"] == "all"


def test_real_file_counts(data_dir):
    """The shared snapshot: 31,728 rows; 8 rows under both types, 2 repeated; 15,859 pairs (8,802 type2, 44% with a
    male-majority referent, 70% of whose referent is named second; 7,057 type1)."""
    _, table = synthbias.rows_of(data_dir / "synthbias" / "synthbias_data.csv")  # read once, paired twice
    t2, removed = synthbias.pronoun_pairs(table, "type2")
    t1, _ = synthbias.pronoun_pairs(table, "type1")
    assert len(table) == 31728 and removed == {"both_types": 8, "duplicates": 2, "unpaired": 0}
    assert (len(t2), len(t1)) == (8802, 7057)
    assert t2["y"].mean() == pytest.approx(3871 / 8802)
    assert (t2["referent"] == "second").mean() == pytest.approx(6189 / 8802)
    _, strata = stratified_subset(t2, 2000)
    assert strata == {"first/0": 500, "first/1": 500, "second/0": 500, "second/1": 500}


def test_params_yaml_scores_both_types():
    params: Params = load_params(ROOT / "params.yaml")
    kinds = {e.synthbias: e.subset for e in params.benchmarks.values() if e.synthbias}
    assert kinds == {"type1": 1000, "type2": 1000, "referent": 1000}


def test_examples_of_a_hidden_benchmark_show_no_sentence():
    """SynthBias's licence: the confidently wrong pairs list pair ids and target words, never the sentences."""
    ex = {
        "pair_id": "sb-0001",
        "sent_more": "The pilot thanked the baker because he was kind.",
        "sent_less": "The pilot thanked the baker because she was kind.",
        "targets_more": ["he"],
        "targets_less": ["she"],
        "y": 1,
        "p": 0.1,
        "confidence": 0.9,
    }
    data = ReportData(benchmarks=["sb", "wb"], runs={"sb": ["m"], "wb": ["m"]}, hidden={"sb"})
    data.examples = {("sb", "m"): [ex], ("wb", "m"): [ex | {"pair_id": "wb-0001"}]}
    docs = {d.name: doc_markdown(d) for d in examples_docs(data)}
    assert "sb-0001" in docs["examples_sb"] and "he / she" in docs["examples_sb"]
    assert "pilot" not in docs["examples_sb"] and "CC BY-NC-ND 4.0" in docs["examples_sb"]
    assert "The pilot thanked the baker because he was kind." in docs["examples_wb"]
    params = load_params(ROOT / "params.yaml")
    hidden = {b for b, e in params.benchmarks.items() if not e.sentences_shown}
    assert hidden == {"synthbias_type1", "synthbias_type2", "synthbias_referent"}


def synthbias_tree(tmp_path, monkeypatch, rows=ROWS, **entry) -> None:
    """A checkout with one SynthBias benchmark ``sb`` (``entry``: its settings) read from ``rows``."""
    import yaml

    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"sb": {"source": str(_write(tmp_path, rows)), "synthbias": "type2", **entry}}
    params["models"], params["references"], params["lmeval_runs"], params["ablate"]["special_tokens"] = [], [], [], {}
    params["ablate"]["prompts"] = {}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("type2,The pilot thanked the pilot because he was kind.,pilot,Pilot,he,True", "two different occupations"),
        ("type2,The pilot thanked the baker because he was kind.,pilot,,he,True", "two different occupations"),
        ("type2,The pilot thanked the baker because he was kind.,pilot,cook,he,True", "names the occupation 'cook'"),
        ("type2,The pilots thanked the baker because he was kind.,pilot,baker,he,True", "never names the occupation"),
    ],
)
@refusal("E-SYNTH-ROW", readers=["prepare"])
def test_a_row_that_breaks_an_assumption_is_named_with_its_row(tmp_path, monkeypatch, capsys, row, says):
    """A row whose two occupations are one, or whose sentence never names one (the referent's position and the
    referent rows need both), is refused naming the file, the row and the assumption: never a bug in gece."""
    from gece.cli import main

    for synth in ("type2", "referent"):
        synthbias_tree(tmp_path, monkeypatch, [*ROWS, row], synthbias=synth)
        assert main(["prepare", "--benchmark", "sb"]) == 2
        err = capsys.readouterr().err
        assert "synthbias.csv: row 13 (line 14)" in err and says in err and "bug" not in err, err
        assert not (tmp_path / "artifacts").exists()


@refusal("E-SYNTH-SUBSET", readers=["prepare"])
def test_a_subset_that_leaves_no_pair_is_refused(tmp_path, monkeypatch, capsys, data_dir):
    from gece.cli import main

    (tmp_path / "data").symlink_to(data_dir)
    csv = "data/synthbias/synthbias_data.csv"
    for synth, subset, least in (("type2", 4, None), ("referent", 6, 8), ("referent", 4, 8)):
        synthbias_tree(tmp_path, monkeypatch, synthbias=synth, subset=subset)
        params = (tmp_path / "params.yaml").read_text().replace(str(tmp_path / "synthbias.csv"), csv)
        (tmp_path / "params.yaml").write_text(params)
        code = main(["-q", "prepare", "--benchmark", "sb"])
        err = capsys.readouterr().err
        if least is None:  # 4 pronoun pairs: one per stratum
            assert code == 0 and len(read_table(tmp_path / "artifacts/prepared/sb.parquet", PreparedPair)[0]) == 4
            continue
        assert code == 2 and f"subset {subset} leaves no pair" in err and f"subset {least} or more" in err, err
    assert len(read_table(tmp_path / "artifacts/prepared/sb.parquet", PreparedPair)[0]) == 4  # the last good run kept
