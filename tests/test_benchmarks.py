"""Benchmark validation, alignment and the prepare stage on the shipped data and on bad files."""

from __future__ import annotations

import pandas as pd
import pytest

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files.readers import read_table
from gece.io.formats import benchmarks
from gece.io.schemas.pair_rows import PreparedPair
from gece.io.settings.sections import PrepareParams
from gece.pipeline import prepare as prepare_stage

from .conftest import BENCHMARKS

SIZES = {"winobias": 771, "winogender": 178, "genderlex": 837, "genderlex_person": 837, "genderlex_someone": 837}
REPEATS = {"winobias": 1, "winogender": 0, "genderlex": 17, "genderlex_person": 18, "genderlex_someone": 18}


# ----------------------------------------------------------------------- alignment
def test_align_single_pronoun_mid_sentence():
    al = benchmarks.align(
        "The person argued with the designer and slapped him in the face.",
        "The person argued with the designer and slapped her in the face.",
    )
    assert [w.text for w in al.more] == ["him"] and [w.text for w in al.less] == ["her"]
    assert (al.more[0].start, al.more[0].end) == (48, 51)
    assert al.n_blocks == 1 and not al.last


def test_align_his_her_and_sentence_initial_he_she():
    al = benchmarks.align("The chief gave his report.", "The chief gave her report.")
    assert ([w.text for w in al.more], [w.text for w in al.less]) == (["his"], ["her"])
    al = benchmarks.align("The last book is his.", "The last book is hers.")
    assert ([w.text for w in al.more], [w.text for w in al.less]) == (["his"], ["hers"]) and al.last
    al = benchmarks.align("He said hers was late.", "She said hers was late.")
    assert ([w.text for w in al.more], [w.text for w in al.less]) == (["He"], ["She"])
    assert al.more[0].start == 0 and al.less[0].end == 3


def test_align_two_differing_words_and_cloze_last():
    al = benchmarks.align("He told him.", "She told her.")
    assert [w.text for w in al.more] == ["He", "him"] and al.n_blocks == 2 and al.last


@pytest.mark.parametrize("name", BENCHMARKS)
def test_prepare_shipped_benchmarks(name, data_dir, prepared_dir):
    df, meta = read_table(prepared_dir / f"{name}.parquet", PreparedPair)
    raw = pd.read_csv(data_dir / "benchmarks" / f"{name}.csv")
    assert len(df) == SIZES[name] == len(raw)
    assert meta["benchmark"] == name
    assert df["pair_id"].is_unique
    assert (df["y"].to_numpy() == raw["y"].to_numpy()).all()
    # every side's targets are exactly the characters at their spans
    for r in df.itertuples():
        for words, starts, ends, sent in (
            (r.targets_more, r.starts_more, r.ends_more, r.sent_more),
            (r.targets_less, r.starts_less, r.ends_less, r.sent_less),
        ):
            assert [sent[s:e] for s, e in zip(starts, ends, strict=True)] == list(words)
    # the shipped benchmarks put the male pronoun in sent_more
    assert set(df["gender_more"]) == {"male"} and set(df["gender_less"]) == {"female"}


def test_prepare_real_rows_he_his_her(prepared_dir):
    df, _ = read_table(prepared_dir / "winobias.parquet", PreparedPair)
    pairs = {(tuple(a), tuple(b)) for a, b in zip(df["targets_more"], df["targets_less"], strict=True)}
    assert pairs == {(("him",), ("her",)), (("his",), ("her",)), (("he",), ("she",)), (("him", "him"), ("her", "her"))}
    assert int((df["n_targets"] > 1).sum()) == 3
    assert int((df["position"] == "last").sum()) == 173
    first = df.iloc[0]
    assert first["pair_id"] == "winobias-0001" and first["row"] == 1 and first["bias_type"] == "gender"
    wg, _ = read_table(prepared_dir / "winogender.parquet", PreparedPair)
    assert set(map(tuple, wg["targets_more"])) == {("he",)} and (wg["position"] == "mid").all()
    gl, _ = read_table(prepared_dir / "genderlex_person.parquet", PreparedPair)
    assert (gl["position"] == "last").all() and gl["bias_type"].isna().all()


# --------------------------------------------------------------------- validation
def _csv(tmp_path, text, name="bench.csv"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


GOOD = "sent_more,sent_less,y\nHe left.,She left.,1\nThe nurse met him.,The nurse met her.,0\n"


@pytest.mark.parametrize("name", BENCHMARKS)
def test_validate_shipped(name, data_dir, capsys):
    path = data_dir / "benchmarks" / f"{name}.csv"
    assert main(["validate", str(path), "--allow-duplicates"]) == 0
    assert main(["validate", str(path)]) == 0  # prepare.duplicates: keep, as gece prepare
    if REPEATS[name]:
        assert main(["validate", str(path), "--duplicates", "error"]) == 2
        n = REPEATS[name]
        assert f"{n} problem{'s' if n > 1 else ''} in " in capsys.readouterr().err  # "1 problem", "17 problems"
    else:
        assert main(["validate", str(path), "--duplicates", "error"]) == 0


def test_validate_good_file(tmp_path, capsys):
    assert main(["validate", str(_csv(tmp_path, GOOD))]) == 0
    assert "valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text, expected",
    [
        ("sent_more,y\nHe left.,1\n", "missing column(s) sent_less"),
        ("sent_more,sent_less\nHe left.,She left.\n", "missing column(s) y"),
        (GOOD + ",She left.,1\n", "row 3 (line 4): sent_more is empty"),
        (GOOD + "He left.,,1\n", "row 3 (line 4): sent_less is empty"),
        (GOOD + "He ran.,He ran.,1\n", "row 3 (line 4): sent_more and sent_less are identical"),
        (GOOD + "He ran.,She ran.,2\n", "row 3 (line 4): y is '2'; use 1 if sent_more"),
        (GOOD + "He ran.,She ran.,yes\n", "row 3 (line 4): y is 'yes'"),
        (GOOD + "He ran.,He ran!,1\n", "differ only in punctuation or spacing"),
        (GOOD + "He left.,She left.,1\n", "row 3 (line 4): repeats row 1"),
        (GOOD + "He left.,She left.,0\n", "repeats row 1 with a different label"),
    ],
)
def test_validate_invalid(tmp_path, capsys, text, expected):
    path = _csv(tmp_path, text)
    assert main(["validate", str(path), "--duplicates", "error"]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(path) in err
    assert "Traceback" not in err


def test_validate_undecodable(tmp_path, capsys):
    path = _csv(tmp_path, GOOD.encode() + "Er schl\xe4ft.,Sie schl\xe4ft.,1\n".encode("latin-1"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err and "row 3 (line 4): undecodable text (byte 0xe4" in err


def test_validate_lists_at_most_20_rows(tmp_path, capsys):
    path = _csv(tmp_path, GOOD + "He ran.,He ran.,1\n" * 25)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "25 problems in 27 rows" in err and "... and 5 more" in err and "row 23 " not in err


def test_prepare_writes_nothing_on_invalid_input(tmp_path, capsys):
    src = _csv(tmp_path, GOOD + "He ran.,He ran.,1\n")
    out = tmp_path / "out" / "bench.parquet"
    with pytest.raises(GeceError, match="nothing was written"):
        prepare_stage.prepare(src, out)
    assert not (tmp_path / "out").exists()
    monkeypatch_free = main(["prepare", str(src), str(out)])
    assert monkeypatch_free == 2 and "row 3 (line 4)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_prepare_cli_without_params_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = _csv(tmp_path, GOOD)
    assert main(["prepare", str(src), "p.parquet"]) == 0
    df, _ = read_table(tmp_path / "p.parquet", PreparedPair)
    assert list(df["pair_id"]) == ["bench-0001", "bench-0002"]
    assert list(df["gender_more"]) == ["male", "male"] and list(df["position"]) == ["mid", "last"]


@pytest.mark.parametrize("policy, n", [("keep", 3), ("drop", 2)])
def test_duplicate_policies(tmp_path, policy, n):
    src = _csv(tmp_path, GOOD + "He left.,She left.,1\n")
    df = prepare_stage.prepare(src, tmp_path / "p.parquet", PrepareParams(duplicates=policy))
    assert len(df) == n
    with pytest.raises(GeceError, match="repeats row 1"):
        prepare_stage.prepare(src, tmp_path / "q.parquet", PrepareParams(duplicates="error"))


def test_extra_columns_ignored_and_bias_type_kept(tmp_path):
    src = _csv(tmp_path, ",sent_more,sent_less,bias_type,y\n0,He left.,She left.,gender,1\n")
    df = prepare_stage.prepare(src, tmp_path / "p.parquet")
    assert df.loc[0, "bias_type"] == "gender" and df.loc[0, "y"] == 1


def _rows(*pairs: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"row": range(1, len(pairs) + 1), "sent_more": [m for m, _ in pairs], "sent_less": [l for _, l in pairs]}
    ).assign(y=1, bias_type="sexual-orientation")


def test_where_a_pair_first_differs():
    pairs = benchmarks.prepare_pairs(
        _rows(
            ("Gay people are kind.", "Straight people are kind."),  # the first word
            ("Alex is divorcing Sam.", "Alex is divorcing Kim."),  # the last word
            ("She said he was late.", "She said she was late."),  # the third word
            ("He knows her well.", "She knows him well."),  # two blocks: the first decides
        ),
        "t",
    )
    assert list(pairs["first_diff_word"]) == [1, 4, 3, 1]
    assert list(pairs["first_diff"]) == ["initial", "later", "later", "initial"]


def test_clusters_of_identical_pairs_and_of_templates():
    rows = _rows(
        ("Gay people are kind.", "Straight people are kind."),
        ("Lesbian people are kind.", "Straight people are kind."),
        ("Gay people are kind.", "Straight people are kind."),  # repeats row 1
        ("Gay people are rude.", "Straight people are rude."),
        ("Gay people are kind.", "Queer people are kind."),  # sent_more of row 1, another sent_less
    )
    by_pair = benchmarks.prepare_pairs(rows, "t")
    assert list(by_pair["cluster"]) == ["t-0001", "t-0002", "t-0001", "t-0004", "t-0005"]
    by_template = benchmarks.prepare_pairs(rows, "t", cluster="template")
    assert list(by_template["cluster"]) == [
        "_ people are kind.",
        "_ people are kind.",
        "_ people are kind.",
        "_ people are rude.",
        "_ people are kind.",
    ]
    two_blocks = benchmarks.prepare_pairs(_rows(("He knows her well.", "She knows him well.")), "t", "template")
    assert two_blocks["cluster"].iloc[0] == "_ knows _ well."


def test_winoqueer_counts(data_dir, tmp_path):
    """The numbers docs/metrics.md quotes: WinoQueer v0's 5,870 rows are 2,482 distinct pairs in 132 sentence frames,
    and 3,287 of them differ in their first word; CrowS-Pairs' 1,505 are 1,504 distinct, 423 differing first."""
    wq = prepare_stage.prepare(
        data_dir / "winoqueer" / "winoqueer_benchmark.csv", tmp_path / "wq.parquet", imported=True, cluster="template"
    )
    assert (len(wq), wq["cluster"].nunique(), len(wq.drop_duplicates(["sent_more", "sent_less"]))) == (5870, 132, 2482)
    assert (wq["first_diff"] == "initial").sum() == 3287
    cp = prepare_stage.prepare(
        data_dir / "crows_pairs" / "crows_pairs_anonymized.csv", tmp_path / "cp.parquet", imported=True
    )
    assert (len(cp), cp["cluster"].nunique(), (cp["first_diff"] == "initial").sum()) == (1505, 1504, 423)
