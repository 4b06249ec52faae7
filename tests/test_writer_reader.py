"""Whatever a gece writer writes, the gece reader of that file accepts (issue 37, item 2): ``gece import`` -> ``gece
validate``, ``gece prepare`` (with ``--labels``) -> the prepared and annotation readers, on generated
CrowS-Pairs-format files with the rows that used to slip through (an annotator named twice, identical, empty or
punctuation-only sentences, a header alone). A writer that cannot write what its reader accepts refuses with exit
2 and leaves the previous output in place."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gece.cli import main
from gece.io import benchmarks, crows
from gece.io.files import read_table
from gece.io.schemas import AnnotationRow, PreparedPair

from .refusals import refusal

SENTENCES = ["He ran.", "She ran.", "The man sang.", "The woman sang.", "His dog", "Her dog", "", " ", "...", "!!!"]
ANNOTATORS = ["a1", "a2", "a3", "a1 "]
LABELS = ["['gender']", "[]", "['race-color']"]


@st.composite
def crows_file(draw) -> str:
    """A CrowS-Pairs-format CSV: rows of (maybe) minimal pairs, each with its annotators and their labels."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["", "sent_more", "sent_less", "stereo_antistereo", "bias_type", "annotations", "anon_annotators"])
    for i in range(draw(st.integers(0, 5))):
        pair = draw(st.sampled_from([("He ran.", "She ran."), ("The man sang.", "The woman sang.")]))
        more, less = (
            pair if draw(st.integers(0, 2)) else (draw(st.sampled_from(SENTENCES)), draw(st.sampled_from(SENTENCES)))
        )
        who = draw(st.lists(st.sampled_from(ANNOTATORS), min_size=1, max_size=3))
        labels = "[" + ", ".join(draw(st.sampled_from(LABELS)) for _ in who) + "]"
        w.writerow([i, more, less, "stereo", "gender", labels, repr(who)])
    return out.getvalue()


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(text=crows_file())
def test_what_import_writes_validate_and_prepare_accept(tmp_path, monkeypatch, capsys, text):
    monkeypatch.chdir(tmp_path)  # no params.yaml: the built-in defaults
    (tmp_path / "src.csv").write_text(text, encoding="utf-8")
    for name in ("bench.csv", "labels.csv"):  # a previous output, to be replaced only by a valid one
        (tmp_path / name).write_text("previous\n")
    code = main(["import", "src.csv", "bench.csv", "--annotations", "labels.csv"])
    crows_code = main(["prepare", "--crows", "src.csv", "crows.parquet", "--annotations", "crows-ann.parquet"])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    assert crows_code == code, err  # the pipeline's reader of the same file agrees
    if code == 2:
        assert "src.csv" in err
        assert all((tmp_path / n).read_text() == "previous\n" for n in ("bench.csv", "labels.csv"))
        return
    rows, problems, _, n = benchmarks.check_benchmark(tmp_path / "bench.csv", "keep")
    assert not problems and n > 0
    types = {t for t in rows["bias_type"] if t}
    crows.read_annotations(tmp_path / "labels.csv", n, types)
    assert main(["validate", "bench.csv", "--allow-duplicates"]) == 0
    assert main(["prepare", "bench.csv", "out.parquet", "--labels", "labels.csv", "--annotations", "ann.parquet"]) == 0
    prepared, _ = read_table(tmp_path / "out.parquet", PreparedPair)
    annotations, _ = read_table(tmp_path / "ann.parquet", AnnotationRow)
    from_crows, _ = read_table(tmp_path / "crows.parquet", PreparedPair)
    assert list(prepared["sent_more"]) == list(from_crows["sent_more"])  # the same pairs either way
    assert len(annotations) == len(read_table(tmp_path / "crows-ann.parquet", AnnotationRow)[0])


HEADER = "id,sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_annotators\n"


@refusal("E-IMPORT-EMPTY", readers=("import", "prepare"))
@pytest.mark.parametrize(
    "body", ["", "0,...,!!!,stereo,gender,\"[['gender']]\",\"['a1']\"\n"], ids=["header-alone", "no-pair-left"]
)
def test_no_pair_left_is_refused_and_the_previous_output_stays(tmp_path, monkeypatch, capsys, body):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src.csv").write_text(HEADER + body, encoding="utf-8")
    (tmp_path / "bench.csv").write_text("previous\n")
    (tmp_path / "crows.parquet").write_text("previous\n")
    assert main(["import", "src.csv", "bench.csv"]) == 2
    assert main(["prepare", "--crows", "src.csv", "crows.parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("src.csv") >= 2 and "Traceback" not in err
    assert (tmp_path / "bench.csv").read_text() == (tmp_path / "crows.parquet").read_text() == "previous\n"


@refusal("E-ANNOTATOR-TWICE", readers=("import", "prepare"))
def test_an_annotator_named_twice_is_refused_naming_the_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    row = "0,He ran.,She ran.,stereo,gender,\"[['gender'], ['gender']]\",\"['a1', 'a1']\"\n"
    (tmp_path / "src.csv").write_text(HEADER + row, encoding="utf-8")
    assert main(["import", "src.csv", "bench.csv", "--annotations", "labels.csv"]) == 2
    first = capsys.readouterr().err
    assert main(["prepare", "--crows", "src.csv", "crows.parquet", "--annotations", "ann.parquet"]) == 2
    second = capsys.readouterr().err
    for err in (first, second):
        assert "line 2" in err and "a1" in err and "Traceback" not in err, err
    assert not (tmp_path / "bench.csv").exists() and not (tmp_path / "crows.parquet").exists()
