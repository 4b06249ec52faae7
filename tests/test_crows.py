"""The CrowS-Pairs-format importer (gece.io.formats.crows), prepare --benchmark for imported benchmarks, the annotate
stage on the real CrowS-Pairs annotations, and bad input (issue 18, items 1, 2 and 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.formats import crows
from gece.io.settings.params import load_params
from gece.stats import annotations as A

from .conftest import ROOT
from .refusals import refusal

CROWS = ROOT / "data" / "crows_pairs" / "crows_pairs_anonymized.csv"
WINOQUEER = ROOT / "data" / "winoqueer" / "winoqueer_benchmark.csv"

# gece annotate on CrowS-Pairs (1,505 pairs: rows 130, 232 and 1102 have a side without a word of its own)
GOLDEN = {
    "alpha": {"binary": 0.12463262048954782, "nominal": 0.6339410032449302},
    "kappa": {"binary": 0.12451627713767244, "nominal": 0.6338923510656698},
}


@pytest.fixture(scope="module")
def crows_data(data_dir):
    return crows.read_crows(CROWS)


@pytest.fixture(scope="module")
def winoqueer_data(data_dir):
    return crows.read_crows(WINOQUEER)


def cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# ------------------------------------------------------------------------------ real files
def test_crows_pairs(crows_data):
    d = crows_data
    assert len(d.pairs) == 1508 and d.has_annotations
    assert len(d.annotations) == 1508 * 5 == 7540
    assert d.annotations["annotator"].nunique() == 287
    assert set(d.pairs["bias_type"]) == set(crows.CROWS_BIAS_TYPES)
    assert d.pairs["direction"].value_counts().to_dict() == {"stereo": 1290, "antistereo": 218}
    assert (d.pairs["y"] == "1").all()
    assert d.annotations.iloc[0].to_dict() == {"row": 1, "annotator": "a77", "labels": ["race-color"]}


def test_crows_pairs_support_as_the_issue_states(crows_data):
    # "The annotators agree with the writer's bias type 80% of the time on average. 10 pairs have no
    # annotator agreeing."
    d = crows_data
    item = d.annotations["row"].to_numpy() - 1
    support = A.recognises(list(d.annotations["labels"]), list(d.pairs["bias_type"].to_numpy()[item]))
    assert support.mean() == pytest.approx(0.8025, abs=1e-4)
    n, k = A.votes(item, support, len(d.pairs))
    assert (n == 5).all()
    assert int((k == 0).sum()) == 10
    assert A.vote_shares(k, n) == {"0/5": 10, "1/5": 31, "2/5": 121, "3/5": 237, "4/5": 478, "5/5": 631}


def test_winoqueer_quirks(winoqueer_data):
    d = winoqueer_data
    assert len(d.pairs) == 5872
    assert not d.has_annotations and d.annotations.empty  # "[[],[],[],[],[],]" everywhere: placeholders
    for c in ("sent_more", "sent_less", "bias_type", "direction"):
        assert not d.pairs[c].str.match(r"\s|.*\s$").any(), c  # leading spaces stripped
    assert d.pairs.iloc[0][["sent_less", "bias_type", "direction"]].to_list() == [
        "Mary is very strong.",
        "masc_femm_name",
        "stereo",
    ]
    assert set(d.pairs["direction"]) == {"stereo", "antistereo"}
    assert d.pairs["bias_type"].value_counts()["masc_femm_name"] == 400


def test_parsers():
    assert crows.parse_labels("[[],[],[],[],[],]") == [[]] * 5
    assert crows.parse_labels(" [['gender'], [' age ', 'religion']] ") == [["gender"], ["age", "religion"]]
    assert crows.parse_labels("") is None
    assert crows.parse_annotators("a0,a1, a2") == ["a0", "a1", "a2"]
    assert crows.parse_annotators("['a77', 'a78']") == ["a77", "a78"]
    for bad in ("__import__('os').system('true')", "[['gender']", "['gender']", "[[1]]", "{'a': 1}"):
        with pytest.raises(crows._Bad):
            crows.parse_labels(bad)


# ------------------------------------------------------------------------------ the pipeline
@pytest.fixture()
def repo(tmp_path, monkeypatch, data_dir):
    """A working directory with the repository's params.yaml and the data snapshot."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_prepare_and_annotate_crows_pairs(repo, capsys):
    krippendorff = pytest.importorskip("krippendorff")
    assert cli(capsys, "prepare", "--benchmark", "crows_pairs")[0] == 0
    prepared = pd.read_parquet("artifacts/prepared/crows_pairs.parquet")
    labels = pd.read_parquet("artifacts/annotations/crows_pairs.parquet")
    assert len(prepared) == 1505 and (prepared["y"] == 1).all()
    assert not prepared["row"].isin([130, 232, 1102]).any()
    assert prepared["bias_type"].iloc[0] == "race-color"
    assert len(labels) == 1505 * 5 and set(labels["pair_id"]) == set(prepared["pair_id"])
    assert cli(capsys, "annotate", "--benchmark", "crows_pairs")[0] == 0
    report = json.loads(Path("reports/annotations/crows_pairs.json").read_text())
    for key, values in GOLDEN.items():
        for coding, value in values.items():
            assert report[key][coding] == pytest.approx(value, abs=1e-12), (key, coding)
    assert report["n_annotated"] == 1505 and report["n_annotators"] == 287 and report["n_labels"] == 7525
    assert report["vote_shares"]["0/5"] == 10 and report["n_hard"] == {"1": 1344, "0": 161, "tie": 0, "none": 0}
    assert report["annotator_agreement"]["n"] == 287
    # the krippendorff package, from annotator x pair matrices built here
    who, names = A.codes(labels["annotator"].tolist())
    item = pd.Index(prepared["pair_id"]).get_indexer(labels["pair_id"])
    bias = prepared["bias_type"].to_numpy()[item]
    codings = {
        "binary": A.recognises([list(x) for x in labels["labels"]], list(bias)).astype(float),
        "nominal": A.codes(A.nominal_category([list(x) for x in labels["labels"]]))[0].astype(float),
    }
    for coding, values in codings.items():
        data = np.full((len(names), len(prepared)), np.nan)
        data[who, item] = values
        assert report["alpha"][coding] == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-10
        )
    annotated = pd.read_parquet("artifacts/annotated/crows_pairs.parquet")
    assert annotated["y_soft"].between(0, 1).all() and set(annotated["y_hard"]) == {0, 1}
    assert (annotated["n_annotators"] == 5).all()


def test_prepare_winoqueer_has_no_annotations(repo, capsys):
    code, err = cli(capsys, "prepare", "--benchmark", "winoqueer")
    assert code == 0 and err.count("no annotations") == 1
    assert len(pd.read_parquet("artifacts/annotations/winoqueer.parquet")) == 0
    prepared = pd.read_parquet("artifacts/prepared/winoqueer.parquet")
    assert len(prepared) == 5870  # rows 2932 and 3058 have identical sentences: dropped with a warning
    assert "2 row(s) dropped" in " ".join(err.split())
    assert cli(capsys, "annotate", "--benchmark", "winoqueer")[0] == 0
    report = json.loads(Path("reports/annotations/winoqueer.json").read_text())
    assert report["n_annotated"] == 0 and report["alpha"]["binary"] is None and report["reason"]
    assert pd.read_parquet("artifacts/annotated/winoqueer.parquet")["y_soft"].isna().all()


def test_native_benchmark_gets_an_empty_annotations_file(repo, capsys):
    assert cli(capsys, "prepare", "--benchmark", "winobias")[0] == 0
    assert len(pd.read_parquet("artifacts/annotations/winobias.parquet")) == 0
    assert Path("artifacts/prepared/winobias.parquet").read_bytes() == _prepared_positional(repo, capsys)


def _prepared_positional(repo, capsys) -> bytes:
    assert cli(capsys, "prepare", "data/benchmarks/winobias.csv", "old.parquet")[0] == 0
    return Path("old.parquet").read_bytes()


def test_import_command(tmp_path, capsys, data_dir):
    out, ann = tmp_path / "crows_pairs.csv", tmp_path / "labels.csv"
    assert cli(capsys, "import", CROWS, out, "--annotations", ann)[0] == 0
    bench = pd.read_csv(out, dtype=str, keep_default_na=False)
    # the 3 rows that cannot form a pair (one side adds words only) are left out, as prepare --crows leaves them out
    assert list(bench.columns) == ["sent_more", "sent_less", "y", "bias_type", "direction"] and len(bench) == 1505
    labels = pd.read_csv(ann, dtype={"annotator": str, "labels": str})
    assert len(labels) == 7525 and json.loads(labels["labels"].iloc[0]) == ["race-color"]
    assert labels["row"].max() == 1505
    assert cli(capsys, "validate", out, "--duplicates", "keep")[0] == 0  # what import writes, validate accepts


# ------------------------------------------------------------------------------ params
def test_params_sources(tmp_path):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    params = load_params(ROOT / "params.yaml")
    assert params.benchmarks["winoqueer"].source == "data/winoqueer/winoqueer_benchmark.csv"
    assert [b for b, e in params.benchmarks.items() if e.imported] == [
        "crows_pairs",
        "crows_pairs_shared",
        "winoqueer",
        "winoqueer_shared",
    ]
    assert list(params.rules.values()) == ["target"] * 5 + ["sentence", "shared"] * 2 + ["target"] * 3
    for change, message in (
        (lambda r: r["benchmarks"]["crows_pairs"].update(source=""), "benchmarks.crows_pairs.source"),
        (lambda r: r["benchmarks"].update({"Bad/Name": {"source": "x.csv"}}), "not a valid id"),
        (lambda r: r["annotate"].update(tie="coin"), "annotate.tie"),
        (lambda r: r["benchmarks"]["winoqueer"].update(rule="words"), "benchmarks.winoqueer.rule"),
    ):
        bad = json.loads(json.dumps(raw))
        change(bad)
        path = tmp_path / "params.yaml"
        path.write_text(yaml.safe_dump(bad))
        with pytest.raises(GeceError) as e:
            load_params(path)
        assert message in str(e.value)


# ------------------------------------------------------------------------------ bad input
HEADER = ",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,anon_annotators\n"
GOOD_ROW = "0,He is a nurse.,She is a nurse.,stereo,gender,\"[['gender'], ['gender'], []]\",a0,\"['a1', 'a2', 'a3']\"\n"


def _row(
    i: int,
    annotations: str = "[['gender'], ['gender'], []]",
    annotators: str = "['a1', 'a2', 'a3']",
    bias: str = "gender",
    direction: str = "stereo",
) -> str:
    return f'{i},He is a nurse {i}.,She is a nurse {i}.,{direction},{bias},"{annotations}",a0,"{annotators}"\n'


BAD = [  # (the bad row, what the message says, the fix it gives)
    (_row(1, annotations="[['gender'], ['gender']"), "row 2 (line 3): annotations", "brackets balanced"),
    (
        _row(1, annotations="__import__('os').system('touch PWNED')"),
        "is not a valid Python list literal",
        "write it as",
    ),
    (_row(1, annotations="['gender', 'age']"), "is not a list of lists of bias types", "one list per annotator"),
    (
        _row(1, annotators="['a1', 'a2']"),
        "row 2 (line 3): 2 annotator(s) in anon_annotators but 3 label list(s)",
        "give one label list per annotator",
    ),
    (_row(1, annotators="a1,a2,a3,a4"), "4 annotator(s) in anon_annotators but 3", "one label list per annotator"),
    (
        _row(1, annotations="[['genedr'], [], []]"),
        "row 2 (line 3): annotations name 'genedr', not a bias type",
        "fix the label",
    ),
    (_row(1, bias=""), "row 2 (line 3): bias_type is empty", "name the kind of bias"),
    (_row(1, direction="both"), "stereo_antistereo is 'both'", "use stereo or antistereo"),
    (_row(1, annotators="a1,,a3"), "has an empty annotator id", "name every annotator"),
]


@pytest.mark.parametrize(("row", "message", "fix"), BAD)
@pytest.mark.parametrize("command", ["prepare", "import"])
def test_bad_crows_file(tmp_path, monkeypatch, capsys, row, message, fix, command):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "in.csv"
    src.write_text(HEADER + _row(0) + row)
    before = set(tmp_path.iterdir())
    args = (
        ["prepare", "--crows", src, tmp_path / "bench.parquet", "--annotations", tmp_path / "ann.parquet"]
        if command == "prepare"
        else ["import", src, tmp_path / "bench.csv", "--annotations", tmp_path / "a.csv"]
    )
    code, err = cli(capsys, *args)
    assert code == 2
    assert str(src) in err and message in err and fix in err and "nothing was written" in err
    assert set(tmp_path.iterdir()) == before  # nothing written, and the literal was never run
    assert not (tmp_path / "PWNED").exists()


def test_bad_crows_columns(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text(HEADER.replace("stereo_antistereo", "direction") + GOOD_ROW)
    code, err = cli(capsys, "import", src, tmp_path / "out.csv")
    assert code == 2 and "missing column(s) stereo_antistereo or stereo_antistero" in err
    src.write_text(HEADER.replace(",bias_type", ",stereo_antistero") + GOOD_ROW)
    code, err = cli(capsys, "import", src, tmp_path / "out.csv")
    assert code == 2 and "both stereo_antistereo and stereo_antistero" in err
    assert not (tmp_path / "out.csv").exists()


def test_many_bad_rows_make_one_error(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text(HEADER + "".join(_row(i, bias="") for i in range(30)))
    code, err = cli(capsys, "import", src, tmp_path / "out.csv")
    assert code == 2 and "30 problem(s) in 30 row(s)" in err and "row 20 (line 21)" in err
    assert "row 21 (line 22)" not in err and "... and 10 more" in err


def test_annotations_naming_pairs_the_benchmark_lacks(repo, capsys):
    assert cli(capsys, "prepare", "--benchmark", "crows_pairs")[0] == 0
    path = Path("artifacts/annotations/crows_pairs.parquet")
    from gece.io.files.writer import write_table
    from gece.io.schemas.pair_rows import AnnotationRow

    labels = pd.read_parquet(path)
    extra = pd.DataFrame([{"pair_id": "crows_pairs-9999", "row": 9999, "annotator": "a1", "labels": ["gender"]}])
    write_table(path, pd.concat([labels, extra], ignore_index=True), AnnotationRow)
    code, err = cli(capsys, "annotate", "--benchmark", "crows_pairs")
    assert code == 2
    assert str(path) in err and "row 7526: pair_id 'crows_pairs-9999' (benchmark row 9999)" in err
    assert "prepare the benchmark and its annotations together" in err
    assert not Path("artifacts/annotated/crows_pairs.parquet").exists()
    assert not Path("reports/annotations/crows_pairs.json").exists()


# ------------------------------------------------------------------------------ annotations of any benchmark
NATIVE = (
    "sent_more,sent_less,y,bias_type\nHe left.,She left.,1,gender\nThe nurse met him.,The nurse met her.,0,gender\n"
)


def test_annotations_file_of_a_native_benchmark(tmp_path, monkeypatch, capsys, data_dir):
    """data/annotations/<b>.csv (the format gece import --annotations writes) for a benchmark of data/benchmarks."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    for child in (ROOT / "data").iterdir():
        (data / child.name).symlink_to(child)
    (data / "annotations").mkdir()
    (data / "annotations" / "winobias.csv").write_text(
        'row,annotator,labels\n2,x,"[""gender""]"\n1,x,[]\n1,y,"[""gender""]"\n2,y,"[\'gender\']"\n'
    )
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    assert cli(capsys, "prepare", "--benchmark", "winobias")[0] == 0
    labels = pd.read_parquet("artifacts/annotations/winobias.parquet")
    assert labels[["pair_id", "annotator"]].values.tolist() == [
        ["winobias-0001", "x"],
        ["winobias-0001", "y"],
        ["winobias-0002", "x"],
        ["winobias-0002", "y"],
    ]
    assert [list(x) for x in labels["labels"]] == [[], ["gender"], ["gender"], ["gender"]]
    assert cli(capsys, "annotate", "--benchmark", "winobias")[0] == 0
    annotated = pd.read_parquet("artifacts/annotated/winobias.parquet")
    assert annotated["n_annotators"].iloc[:3].tolist() == [2, 2, 0]
    assert annotated["y_soft"].iloc[:2].tolist() == [0.5, 1.0]
    y = pd.read_parquet("artifacts/prepared/winobias.parquet")["y"]
    assert annotated["y_hard"].iloc[0] == y.iloc[0]  # a 1-1 tie takes the benchmark's (the writer's) label
    assert annotated["y_hard"].iloc[1] == 1


BAD_LABELS = [  # (annotations CSV body, what the message says, the fix)
    (
        '3,x,"[""gender""]"\n',
        "row 1 (line 2): row '3' is not a pair of the benchmark (data rows 1 to 2)",
        "name the data row",
    ),
    ('0,x,"[""gender""]"\n', "row '0' is not a pair of the benchmark", "or remove the line"),
    ('1,x,"[""gender"""\n', "is not a valid Python list literal", "brackets balanced"),
    ('1,x,"""gender"""\n', "is not a list of bias types", "or [] when the annotator saw no stereotype"),
    ('1,x,"[""genedr""]"\n', "labels name 'genedr', not a bias type", "fix the label"),
    ("1,x,[]\n1,x,[]\n", "row 2 (line 3): annotator 'x' labels row 1 again (first on row 1)", "keep one line"),
    # numbers people do not write: a superscript and an Arabic-Indic digit (str.isdigit() takes both, int() not
    # the first), and a count beyond int()'s 4300 digits; each is a bad row, not a traceback (issue 37, family 1)
    ('²,x,"[""gender""]"\n', "row '²' is not a pair of the benchmark", "name the data row"),
    ('١,x,"[""gender""]"\n', "row '١' is not a pair of the benchmark", "name the data row"),
    ("9" * 5000 + ',x,"[""gender""]"\n', "is not a pair of the benchmark (data rows 1 to 2)", "name the data row"),
]


@pytest.mark.parametrize(("body", "message", "fix"), BAD_LABELS)
def test_bad_annotations_file(tmp_path, monkeypatch, capsys, body, message, fix):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench.csv").write_text(NATIVE)
    labels = tmp_path / "labels.csv"
    labels.write_text("row,annotator,labels\n" + body)
    before = set(tmp_path.iterdir())
    code, err = cli(capsys, "prepare", "bench.csv", "p.parquet", "--annotations", "a.parquet", "--labels", labels)
    assert code == 2 and str(labels) in err and message in err and fix in err and "nothing was written" in err
    assert set(tmp_path.iterdir()) == before


HOSTILE = [  # (a data row, what the message says): issue 49's cases, read by the reader every CSV goes through
    ('1,The cook said "he was late.,The cook said she was late.,stereo,gender,,a0,\n', "a quote inside an unquoted"),
    ("1,He is a nu\x00rse.,She is a nurse.,stereo,gender,,a0,\n", "row 2 (line 3): a NUL byte in field 2"),
    ("1," + "w " * 40 + "he.," + "w " * 40 + "she.,stereo,gender,,a0,\n", "row 2 (line 3): the two sentences repeat"),
]


@refusal("E-CSV-QUOTE", "E-CSV-NUL", "E-CSV-ALIGN", readers=("import", "prepare"))
@pytest.mark.parametrize(("row", "message"), HOSTILE, ids=["quote", "nul", "align"])
@pytest.mark.parametrize("command", ["prepare", "import"])
def test_hostile_crows_file(tmp_path, monkeypatch, capsys, row, message, command):
    """A CrowS-Pairs-format file is refused for what a benchmark CSV is, even where a row that cannot form a pair
    would only be dropped: a NUL is corruption, and a pair too costly to align is not left out silently."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "in.csv"
    src.write_text(HEADER + GOOD_ROW + row)
    before = set(tmp_path.iterdir())
    args = (
        ["prepare", "--crows", src, tmp_path / "bench.parquet"]
        if command == "prepare"
        else ["import", src, tmp_path / "bench.csv"]
    )
    code, err = cli(capsys, *args)
    assert code == 2 and str(src) in err and message in err.replace("\n", " "), err
    assert set(tmp_path.iterdir()) == before
