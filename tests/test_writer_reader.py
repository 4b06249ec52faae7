"""Whatever a gece writer writes, the gece reader of that file accepts (issue 37, item 2): ``gece import`` -> ``gece
validate``, ``gece prepare`` (with ``--labels``) -> the prepared and annotation readers, on generated
CrowS-Pairs-format files with the rows that used to slip through (an annotator named twice, identical, empty or
punctuation-only sentences, a header alone); ``gece score`` -> the score readers of metrics/compare
(``runs.read_run``), on generated token files; ``gece prepare`` -> extract's, score's and groups' prepared-pair
readers and ``gece annotate`` -> groups' annotated-pairs reader, on generated benchmarks and labels. A writer
that cannot write what its reader accepts refuses with exit 2 and leaves the previous output in place."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import HealthCheck, example, given, settings
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


# --------------------------------------------------------------- score -> metrics/compare's readers
SCORE_META = {
    "benchmark": "bench",
    "model": "m",
    "source": "org/m",
    "kind": "hub",
    "weights": {"model.safetensors": "0" * 64},
    "dtype": "float32",
    "device": "cpu",
    "attention": "gece_exact",
    "special_tokens": True,
    "word_prob": None,
    "batch_size": 1,
    "limit": None,
    "torch": "0",
    "transformers": "0",
    "gece": "0",
    "pairs": 0,
    "multi_target_pairs": 0,
    "multi_token_targets": 0,
    "continued_pairs": 0,
    "tokens": 0,
    "tokens_padded": 0,
    "tokens_whole": 0,
    "head_positions": 0,
    "flops": None,
    "flops_per_pair": None,
    "shards": 0,
}
TOKEN_FILE_META = {k: str(SCORE_META[k]) for k in ("benchmark", "model", "source", "dtype", "device", "attention")}
TOKEN_FILE_META |= {"weights_sha256": "0" * 64, "special_tokens": "True"}
PAIRS = 6


@pytest.fixture(scope="module")
def prepared_pairs(tmp_path_factory):
    """A small prepared benchmark, written by gece prepare's own function."""
    from gece.pipeline import prepare as prepare_stage

    d = tmp_path_factory.mktemp("prepared")
    rows = [("He ran {}.", "She ran {}."), ("The man sang {}.", "The woman sang {}.")]
    lines = ["sent_more,sent_less,y"] + [
        f"{rows[i % 2][0].format(i)},{rows[i % 2][1].format(i)},{i % 2}" for i in range(PAIRS)
    ]
    (d / "bench.csv").write_text("\n".join(lines) + "\n")
    prepare_stage.prepare(d / "bench.csv", d / "bench.parquet")
    return d / "bench.parquet"


# log-probabilities a model gives, and finite ones far outside (their sum or difference may overflow)
LOGPROB = st.one_of(st.floats(-60.0, 0.0), st.floats(allow_nan=False, allow_infinity=False))
WORDS = st.lists(st.lists(LOGPROB, min_size=1, max_size=3), min_size=1, max_size=2)


@st.composite
def token_rows(draw) -> list[dict]:
    """Token records of the first k prepared pairs (k may be 0), as extract writes them, built without a model."""
    rows = []
    for i in range(draw(st.integers(0, PAIRS))):
        more, less = draw(WORDS), draw(WORDS)
        with_logits = draw(st.booleans())
        rows.append(
            {
                "pair_id": f"bench-{i + 1:04d}",
                "row": i + 1,
                "logprobs_more": more,
                "logprobs_less": less,
                "logits_more": [[x + 1.0 if abs(x) < 1e300 else x for x in w] for w in more] if with_logits else None,
                "logits_less": [[x + 1.0 if abs(x) < 1e300 else x for x in w] for w in less] if with_logits else None,
            }
        )
    return rows


@refusal("E-TOKENS", readers=("score",))
@pytest.mark.filterwarnings("ignore")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(rows=token_rows(), word_prob=st.sampled_from(["chain", "max"]))
@example(rows=[], word_prob="chain")  # no pair: an empty score file would replace the previous one
@example(  # two finite log-probabilities whose chain-rule sum overflows: the writer refuses, naming the file
    rows=[
        {
            "pair_id": "bench-0001",
            "row": 1,
            "logprobs_more": [[-1e308, -1e308]],
            "logprobs_less": [[-1.0]],
            "logits_more": None,
            "logits_less": None,
        }
    ],
    word_prob="chain",
)
def test_what_score_writes_metrics_and_compare_read(prepared_pairs, tmp_path, rows, word_prob):
    import pandas as pd

    from gece.errors import GeceError
    from gece.io.files import write_json, write_table
    from gece.io.schemas import ExtractMeta, ScoreRow, TokenRow
    from gece.pipeline import runs, score

    prepared, _ = read_table(prepared_pairs, PreparedPair)
    assert list(prepared["pair_id"]) == [f"bench-{i + 1:04d}" for i in range(PAIRS)]
    tokens, out = tmp_path / "tokens.parquet", tmp_path / "scores.parquet"
    frame = pd.DataFrame(
        rows, columns=["pair_id", "row", "logprobs_more", "logprobs_less", "logits_more", "logits_less"]
    )
    write_table(tokens, frame, TokenRow, meta=TOKEN_FILE_META)
    write_json(tmp_path / "tokens.meta.json", SCORE_META | {"pairs": len(rows)}, ExtractMeta)
    out.write_text("previous\n")
    try:
        score.score(prepared_pairs, tokens, out, word_prob)
    except GeceError as e:
        assert str(tokens) in e.message and "bug in gece" not in (e.hint or ""), (e.message, e.hint)
        assert out.read_text() == "previous\n"  # nothing replaced, an empty result least of all
        return
    assert rows, "a token file of no pair was scored into an empty score file"
    run, meta = runs.read_run(out)  # metrics, ablate, calibrate and compare read a run through this
    whole, _ = read_table(out, ScoreRow)
    assert list(run["pair_id"]) == list(whole["pair_id"]) == [r["pair_id"] for r in rows]
    assert meta["benchmark"] == "bench" and meta["word_prob"] == word_prob
    runs.as_run(run)


# ------------------------------------------------------- prepare -> extract/score/groups; annotate -> groups
@st.composite
def labelled(draw) -> tuple[list[str], list[tuple[int, str, list[str]]]]:
    """A benchmark CSV's lines and annotation rows (its row, an annotator, the bias types they saw)."""
    n = draw(st.integers(1, 5))
    lines = ["sent_more,sent_less,y,bias_type"] + [f"He ran {i}.,She ran {i}.,{i % 2},gender" for i in range(n)]
    labels = draw(
        st.lists(
            st.tuples(
                st.integers(1, n),
                st.sampled_from(["a1", "a2", "a3"]),
                st.sampled_from([["gender"], [], ["race-color"], ["gender", "age"]]),
            ),
            max_size=10,
            unique_by=lambda t: (t[0], t[1]),
        )
    )
    return lines, labels


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(case=labelled(), tie=st.sampled_from(["writer", "drop"]))
def test_what_prepare_and_annotate_write_their_readers_accept(tmp_path, case, tie):
    import pandas as pd

    from gece.io.disk import check_unique_ids
    from gece.io.files import iter_table, pair_ids, write_table
    from gece.io.params import AnnotateParams
    from gece.pipeline import annotate, groups
    from gece.pipeline import prepare as prepare_stage

    lines, labels = case
    (tmp_path / "b.csv").write_text("\n".join(lines) + "\n")
    prepared_path = tmp_path / "artifacts" / "prepared" / "b.parquet"
    prepare_stage.prepare(tmp_path / "b.csv", prepared_path, name="b")
    # the readers of a prepared file: extract (the ids alone, then chunks), score and groups (whole)
    ids = pair_ids(prepared_path)
    check_unique_ids(prepared_path, ids)
    chunks = list(iter_table(prepared_path, PreparedPair, 2))
    pairs, _ = read_table(prepared_path, PreparedPair)
    assert sum(map(len, chunks)) == len(pairs) == len(lines) - 1 == len(ids)

    rows = pd.DataFrame(
        [{"pair_id": pairs["pair_id"].iloc[r - 1], "row": r, "annotator": a, "labels": t} for r, a, t in labels],
        columns=["pair_id", "row", "annotator", "labels"],
    )
    write_table(tmp_path / "ann.parquet", rows, AnnotationRow)
    annotated = tmp_path / "artifacts" / "annotated" / "b.parquet"
    annotate.annotate(
        "b", prepared_path, tmp_path / "ann.parquet", annotated, tmp_path / "report.json", AnnotateParams(tie=tie)
    )
    y_soft, reason = groups.soft_labels("b", pairs, root=tmp_path)  # the groups stage's reader
    assert (y_soft is None) == bool(reason)
    if y_soft is not None:
        assert list(y_soft.index) == list(pairs["pair_id"])
