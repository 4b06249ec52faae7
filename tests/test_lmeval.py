"""lm-evaluation-harness as a source: gece's rules as requests, and the import of logged samples (refusals
included). No model runs here; the round trip through lm_eval is tests/e2e/test_lmeval_roundtrip.py."""

from __future__ import annotations

import json
import math
import os
import time

import pandas as pd
import pytest
import yaml

from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.files.readers import read_table
from gece.io.schemas.lmeval_files import ImportMeta
from gece.io.schemas.pair_rows import ScoreRow
from gece.lmeval import export, requests, samples
from gece.pipeline import prepare as prepare_stage
from gece.scoring.planning import SideTokens

from .conftest import DATA, ROOT
from .refusals import refusal

DATE = "2026-12-04T07-20-23.476391"


def pair(more: str, less: str) -> dict:
    """A prepared pair's fields the requests read, from gece's own alignment."""
    from gece.io.formats import benchmarks

    rows = pd.DataFrame({"row": [1], "sent_more": [more], "sent_less": [less], "y": [1], "bias_type": ["gender"]})
    return benchmarks.prepare_pairs(rows, "t").iloc[0].to_dict()


def test_requests_per_rule():
    p = pair("The doctor slapped him in the face.", "The doctor slapped her in the face.")
    assert requests.request_for(p, "target").arguments == [
        ("The doctor slapped ", "him"),
        ("The doctor slapped ", "her"),
    ]
    assert requests.request_for(p, "sentence").arguments == [("", p["sent_more"]), ("", p["sent_less"])]
    assert requests.request_for(p, "mean") == requests.request_for(p, "sentence")
    assert requests.request_for(p, "shared").arguments == [
        ("The doctor slapped him", " in the face."),
        ("The doctor slapped her", " in the face."),
    ]
    # several differing spans: no single context holds both sides
    two = pair("he is divorcing him.", "she is divorcing her.")
    assert requests.request_for(two, "target") == requests.request_for(two, "shared") == "spans"
    assert requests.request_for(two, "sentence").arguments == [
        ("", "he is divorcing him."),
        ("", "she is divorcing her."),
    ]
    # nothing after the identity term: the shared rule has no continuation
    assert requests.request_for(pair("I saw him", "I saw her"), "shared") == "no_suffix"


def test_a_chat_run_logs_its_contexts_rendered():
    """lm-eval logs the contexts of a run with --apply_chat_template as the chat template rendered them (the
    context in the user turn): the import takes them for the stage's chat prompts only, with the continuations
    exactly, each context holding the exported one, and one context for both sides where the export has one."""
    p = pair("The doctor slapped him in the face.", "The doctor slapped her in the face.")

    def chat(context: str) -> str:
        return f"<|im_start|>user\n{context}<|im_end|>\n<|im_start|>assistant\n"

    for rule in ("target", "sentence", "shared"):
        req = requests.request_for(p, rule)
        rendered = [(chat(c), t) for c, t in req.arguments]
        assert requests.logged_as(req.arguments, req) and not requests.logged_as(rendered, req)
        assert requests.logged_as(rendered, req, chat=True), rule
        assert not requests.logged_as(req.arguments, req, chat=True), rule  # no template applied
        assert not requests.logged_as([rendered[0], (rendered[1][0], "x")], req, chat=True)
        assert not requests.logged_as(rendered[:1], req, chat=True)
    word = requests.request_for(p, "target")
    assert not requests.logged_as(
        [(chat("The doctor slapped "), "him"), (chat("A doctor slapped "), "her")], word, True
    )
    shared = requests.request_for(p, "shared")
    assert not requests.logged_as([(chat("The doctor slapped her"), t) for _, t in shared.arguments], shared, True)


def encoder(vocab: dict[str, int]):
    """A word tokenizer (a leading space belongs to the word), as ``encode(text, special)``."""
    import re

    return lambda text, special: [vocab[w] for w in re.findall(r" ?[^ ]+| +$", text)]


def test_exact_against_gece_tokens():
    vocab = {w: i for i, w in enumerate(["<s>", "The", " doctor", " slapped", " him", " her", " in", " the", " face."])}
    enc = encoder(vocab)
    ids = (
        vocab["The"],
        vocab[" doctor"],
        vocab[" slapped"],
        vocab[" him"],
        vocab[" in"],
        vocab[" the"],
        vocab[" face."],
    )
    target = SideTokens(ids, ((3,),))
    fed, n_ctx = requests.lmeval_tokens(enc, 0, "The doctor slapped ", "him")
    assert (fed, n_ctx) == (list(ids[:4]), 3)  # the trailing space moved to the continuation
    assert requests.exact(target, [3], fed, n_ctx)
    assert not requests.exact(SideTokens((0, *ids), ((4,),)), [4], fed, n_ctx)  # gece fed a BOS lm-eval did not
    # the sentence rule: lm-eval's prefix token, then the sentence
    whole = SideTokens((0, *ids), (tuple(range(1, 8)),), prefixed=True)
    fed, n_ctx = requests.lmeval_tokens(enc, 0, "", "The doctor slapped him in the face.")
    assert requests.exact(whole, requests.scored_positions(whole, whole, "sentence"), fed, n_ctx)
    # shared: the matched tokens after the common prefix are the continuation's
    her = SideTokens((0, *ids[:3], vocab[" her"], *ids[4:]), (tuple(range(1, 8)),), prefixed=True)
    assert requests.scored_positions(whole, her, "shared") == [5, 6, 7]
    assert requests.scored_positions(whole, SideTokens((0, vocab[" her"]), ((1,),)), "shared") == []  # no prefix


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """params.yaml with a registry entry lmeval:lm, winobias prepared, and lm-eval output of 10 of its pairs."""
    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "data").symlink_to(DATA)
    prepare_stage.prepare(DATA / "benchmarks" / "winobias.csv", tmp_path / "artifacts/prepared/winobias.parquet")
    return tmp_path


def write_samples(root, rows: list[dict], name: str = f"samples_gece_winobias_{DATE}.jsonl") -> None:
    out = root / "lm" / "model"
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = {"lm_eval_version": "0.4.13", "config": {"model": "hf", "model_args": {"dtype": "float32"}}}
    (out / f"results_{DATE}.json").write_text(json.dumps(results))


def good_samples(n: int = 10) -> list[dict]:
    from gece.io.schemas.pair_rows import PreparedPair

    pairs, _ = read_table("artifacts/prepared/winobias.parquet", PreparedPair)
    rows = []
    for i, rec in enumerate(pairs.iloc[:n].to_dict("records")):
        req = requests.request_for(rec, "target")
        doc = {"pair_id": rec["pair_id"], "sha": requests.pair_sha(rec["sent_more"], rec["sent_less"]), "gold": 0}
        doc |= {"context": req.more[0], "choices": [req.more[1], req.less[1]], "n_tokens": [1, 1]}
        args = {f"gen_args_{k}": {"arg_0": c, "arg_1": t} for k, (c, t) in enumerate(req.arguments)}
        resps = [[str(-1.0 - i / 10), "False"], [str(-2.0 + i / 5), "False"]]
        rows.append(
            {"doc_id": i, "doc": doc, "arguments": args, "resps": [[r] for r in resps], "filtered_resps": resps}
        )
    return rows


def test_import_writes_a_score_file(workdir, capsys):
    write_samples(workdir, good_samples())
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 0
    scores, meta = read_table("artifacts/scores/winobias/smol-lm.parquet", ScoreRow)
    assert len(scores) == 10 and meta["backend"] == "lm-eval" and meta["coverage"] == "10/771"
    assert scores["logprob_more"].iloc[3] == pytest.approx(-1.3) and scores["logprob_less"].iloc[3] == pytest.approx(
        -1.4
    )
    assert scores["p"].iloc[3] == pytest.approx(1 / (1 + math.exp(-0.1)))
    m = read_json("artifacts/scores/winobias/smol-lm.meta.json", ImportMeta)
    assert (m.lm_eval_version, m.backend, m.model_args, m.dtype) == ("0.4.13", "hf", "dtype=float32", "unknown")
    assert (m.pairs_scored, m.pairs_prepared, m.source) == (10, 771, "lmeval:lm")
    assert len(m.unscored) == 761 and scores["pair_id"].iloc[-1] not in m.unscored  # the pairs without a sample
    # a run of winobias like any other: listed among its runs, its metrics computed from the file
    from gece.io.settings.params import load_params
    from gece.pipeline import runs

    assert runs.runs(load_params(), "winobias")[-1] == "smol-lm"
    assert "smol-lm" not in runs.runs(load_params(), "crows_pairs")  # no score file for it
    capsys.readouterr()
    assert main(["metrics", "artifacts/scores/winobias/smol-lm.parquet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 10
    # an older run of the same task is not read; the newest is
    write_samples(workdir, good_samples(4), name="samples_gece_winobias_2025-01-01T00-00-00.000001.jsonl")
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 0
    assert len(read_table("artifacts/scores/winobias/smol-lm.parquet", ScoreRow)[0]) == 10


def hostile(kind: str) -> list[dict]:
    rows = good_samples(6)
    bad = rows[2]
    if kind == "missing side":
        bad["filtered_resps"] = bad["filtered_resps"][:1]
    elif kind == "foreign pair":
        bad["doc"]["pair_id"] = "winobias-9999"
    elif kind == "nan":
        bad["filtered_resps"][1][0] = "nan"
    elif kind == "changed sentence":
        bad["arguments"]["gen_args_1"]["arg_1"] = "it"
        bad["doc"]["choices"][1] = "it"
    elif kind == "changed hash":
        bad["doc"]["sha"] = "0" * 64
    elif kind == "max":
        bad["doc"]["n_tokens"] = [2, 1]
    return rows


@refusal("E-LMEVAL-SAMPLE", readers=["lmeval-import"])
@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("missing side", "1 side(s) answered, not 2"),
        ("foreign pair", "winobias-9999: no such pair"),
        ("nan", "is not finite"),
        ("changed sentence", "not the ones gece exports"),
        ("changed hash", "sentences differ from the prepared pair"),
        ("max", "word_prob is max"),
    ],
)
def test_import_refuses_hostile_samples(workdir, capsys, kind, says):
    if kind == "max":
        params = yaml.safe_load((workdir / "params.yaml").read_text())
        params["extract"]["word_prob"] = "max"
        (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    write_samples(workdir, hostile(kind))
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert says in err and "1 sample(s) do not match" in err
    assert kind == "foreign pair" or "line 3, pair winobias-0003" in err
    assert f"samples_gece_winobias_{DATE}.jsonl" in err.replace(" ", "")
    assert not (workdir / "artifacts/scores").exists()  # nothing written


@refusal("E-LMEVAL-SOURCE", readers=["lmeval-import"])
def test_import_needs_an_lmeval_source_and_its_samples(workdir, capsys):
    assert main(["lmeval-import", "--model", "smollm2-135m", "--benchmark", "winobias"]) == 2
    assert "source lmeval:<directory>" in capsys.readouterr().err
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    assert "no such directory" in capsys.readouterr().err
    (workdir / "lm").mkdir()
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    assert "no lm-eval samples of task gece_winobias" in capsys.readouterr().err


def test_task_yaml_reads_local_json(tmp_path):
    text = export.task_yaml("gece_x", tmp_path / "docs.jsonl", "shared")
    config = yaml.safe_load(text)
    assert config["dataset_path"] == "json" and config["dataset_kwargs"]["data_files"]["test"].endswith("docs.jsonl")
    assert (config["doc_to_text"], config["doc_to_choice"], config["doc_to_target"]) == (
        "gold",
        "contexts",
        "continuation",
    )
    assert export.model_args("/m", None) == "pretrained=/m,dtype=float32"
    assert export.add_bos_token("target", True) is None and export.add_bos_token("target", False) is False
    assert export.add_bos_token("shared", False) is True
    assert samples.output_dir("lmeval:lm/out") is not None and samples.output_dir("reference:x") is None


def test_the_page_marks_lm_eval_runs():
    from gece.report import html
    from gece.report.cells import ReportData

    meta = ImportMeta(
        model="smol-lm",
        benchmark="winobias",
        source="lmeval:lm",
        rule="target",
        samples_file="m/samples_gece_winobias_x.jsonl",
        lm_eval_version="0.4.13",
        backend="hf",
        model_args="dtype=float32",
        dtype="float32",
        pairs_prepared=771,
        pairs_scored=768,
        coverage=768 / 771,
        unscored=["winobias-0001", "winobias-0002", "winobias-0003"],
    )
    data = ReportData(benchmarks=["winobias"], runs={"winobias": ["smol-lm"]}, lmeval={"smol-lm"})
    data.meta[("winobias", "smol-lm")] = meta.model_dump()
    page = html._provenance_html(data)
    assert "smol-lm: lm-eval runs" in page and "float32 sums, not byte-identical" in page
    assert "<th>pairs_scored</th><td>768</td>" in page and "<th>lm_eval_version</th><td>0.4.13</td>" in page
    assert "No extract metadata" not in page


def test_every_reason_is_explained():
    from typing import get_args

    from gece.io.schemas.lmeval_files import Reason

    assert set(requests.REASONS) == set(get_args(Reason))


def test_mean_divides_lm_evals_sentence_sums_by_the_token_counts(workdir):
    from gece.io.schemas.lmeval_files import Sample
    from gece.io.schemas.pair_rows import PreparedPair

    pairs, _ = read_table("artifacts/prepared/winobias.parquet", PreparedPair)
    rec = pairs.iloc[0].to_dict()
    req = requests.request_for(rec, "mean")
    doc = {"pair_id": rec["pair_id"], "sha": requests.pair_sha(rec["sent_more"], rec["sent_less"])}
    doc |= {"context": "", "choices": [rec["sent_more"], rec["sent_less"]], "n_tokens": [10, 8], "punct_only": False}
    args = {f"gen_args_{k}": {"arg_0": c, "arg_1": t} for k, (c, t) in enumerate(req.arguments)}
    sample = Sample.model_validate(
        {"doc_id": 0, "doc": doc, "arguments": args, "filtered_resps": [["-30", "x"], ["-20", "x"]]}
    )
    frame = samples.score_frame(pairs, [(1, sample)], "mean", workdir / "s.jsonl")
    assert (frame["logprob_more"].iloc[0], frame["logprob_less"].iloc[0]) == (-3.0, -2.5)
    assert frame["p"].iloc[0] == pytest.approx(1 / (1 + math.exp(0.5)))
    assert not frame["scored_punct_only"].iloc[0] and len(frame) == 1


# ------------------------------------------------------------------ files from outside (issue 49)
SAMPLES = f"lm/model/samples_gece_winobias_{DATE}.jsonl"
RESULTS = f"lm/model/results_{DATE}.json"


def _replace(path, make) -> None:
    """Put what ``make(path)`` creates where ``path`` was."""
    path.unlink()
    make(path)


def _first_line(text: str, line: str) -> str:
    return line + "\n" + text.split("\n", 1)[1]


NODES = [  # (which file, what replaces it, what the message says)
    ("samples", lambda p: p.mkdir(), "not a file: it is a directory"),
    ("samples", lambda p: p.symlink_to("gone.jsonl"), "file not found (a symlink to gone.jsonl"),
    ("samples", lambda p: os.mkfifo(p), "not a file: it is a FIFO"),
    ("samples", lambda p: p.symlink_to("/dev/zero"), "not a file: it is a character device"),
    ("results", lambda p: os.mkfifo(p), "not a file: it is a FIFO"),
    ("results", lambda p: p.mkdir(), "not a file: it is a directory"),
    ("results", lambda p: p.symlink_to("/dev/zero"), "not a file: it is a character device"),
]


@refusal("E-LMEVAL-FILE", readers=["lmeval-import"])
@pytest.mark.parametrize(("which", "make", "says"), NODES, ids=[f"{w}-{s}" for w, _, s in NODES])
def test_import_reads_regular_files_only(workdir, capsys, which, make, says):
    """A FIFO is never opened (it would hang), a device never read (/dev/zero: until memory runs out)."""
    write_samples(workdir, good_samples(3))
    path = workdir / (SAMPLES if which == "samples" else RESULTS)
    _replace(path, make)
    code = main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"])
    err = capsys.readouterr().err.replace("\n", " ")
    assert code == 2 and says in err and path.name in err.replace(" ", "") and "Traceback" not in err, err
    assert not (workdir / "artifacts/scores").exists()


def _hostile_text(kind: str, text: str) -> str | bytes:
    line = text.split("\n", 1)[0]
    if kind == "not utf-8":
        return text.encode().replace(b"winobias-0002", b"winobias-\xe40002")
    if kind == "long number":
        return _first_line(text, line.replace('"doc_id": 0', '"doc_id": 1' + "0" * 1_000_000))
    if kind == "deep":
        return _first_line(text, "[" * 100_000 + "]" * 100_000)
    if kind == "depth 65":
        return _first_line(text, "[" * 65 + "]" * 65)
    if kind == "key twice":
        return _first_line(text, line.replace('{"doc_id": 0', '{"doc_id": 0, "doc_id": 0'))
    if kind == "not json":
        return _first_line(text, line[:-5])
    raise AssertionError(kind)


HOSTILE_TEXT = [
    ("not utf-8", "not valid UTF-8 text: line 2, column"),
    ("long number", "line 1: refused JSON: a number of 1,000,001 characters (at most 100)"),
    ("deep", "line 1: not valid JSON (nested too deeply), at most 64 levels"),
    ("depth 65", "line 1: refused JSON: nested more than 64 deep"),
    ("key twice", "line 1: refused JSON: key 'doc_id' is written twice"),
    ("not json", "line 1: not valid JSON: line 1, column"),
]


@refusal("E-LMEVAL-FILE", readers=["lmeval-import"])
@pytest.mark.parametrize(("kind", "says"), HOSTILE_TEXT, ids=[k for k, _ in HOSTILE_TEXT])
def test_import_reads_bounded_json(workdir, capsys, kind, says):
    """Bytes that are not UTF-8, a million-digit number (int() would raise past 4,300 digits, slowly), nesting
    100,000 deep: exit 2 naming the file and the line, in well under a second."""
    write_samples(workdir, good_samples(3))
    path = workdir / SAMPLES
    content = _hostile_text(kind, path.read_text())
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    t = time.perf_counter()
    code = main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"])
    err = capsys.readouterr().err.replace("\n", " ")
    assert time.perf_counter() - t < 5
    assert code == 2 and says in err and path.name in err.replace(" ", "") and "Traceback" not in err, err
    assert not (workdir / "artifacts/scores").exists()


@refusal("E-LMEVAL-FILE", "E-SIZE-TEXT", readers=["lmeval-import"])
def test_import_bounds_the_samples_file_and_reads_results_strictly(workdir, capsys, monkeypatch):
    write_samples(workdir, good_samples(3))
    monkeypatch.setenv("GECE_MAX_LMEVAL_BYTES", "100")
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "exceed the limit of 100 bytes" in err and "GECE_MAX_LMEVAL_BYTES=" in err.replace(" ", "")
    monkeypatch.delenv("GECE_MAX_LMEVAL_BYTES")
    (workdir / RESULTS).write_text('{"lm_eval_version": 4, "config": {}}')
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "not an lm-eval results file (Input should be a valid string)" in err
    (workdir / RESULTS).write_text('{"lm_eval_version": "0.4", "config": {"a": ' + "1" * 200 + "}}")
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    assert "a number of 200 characters" in capsys.readouterr().err.replace("\n", " ")


def _strict(kind: str) -> list[dict]:
    rows = good_samples(6)
    bad = rows[2]
    if kind == "true":
        bad["filtered_resps"][0][0] = True
    elif kind == "text":
        bad["filtered_resps"][0][0] = "5.0"
    elif kind == "words":
        bad["filtered_resps"][0][0] = "-1_0"
    elif kind == "zero tokens":
        bad["doc"]["n_tokens"] = [0, 1]
    elif kind == "huge tokens":  # an int64 column of the score file could not hold it
        bad["doc"]["n_tokens"] = [1, 10**30]
    elif kind == "text tokens":
        bad["doc"]["n_tokens"] = ["1", 1]
    elif kind == "doc_id twice":
        bad["doc_id"] = 1
    elif kind == "doc_id text":
        bad["doc_id"] = "2"
    return rows


STRICT = [
    ("true", "a log-likelihood is a number, not bool True"),
    ("text", "log-likelihood '5.0' is above 0"),
    ("words", "a log-likelihood is a number, not the text '-1_0'"),
    ("zero tokens", "doc.n_tokens.0: Input should be greater than or equal to 1"),
    ("huge tokens", "doc.n_tokens.1: Input should be less than or equal to 2147483647"),
    ("text tokens", "doc.n_tokens.0: Input should be a valid integer"),
    ("doc_id twice", "doc_id 1 appears again (first on line 2)"),
    ("doc_id text", "doc_id: Input should be a valid integer"),
]


@refusal("E-LMEVAL-SAMPLE", readers=["lmeval-import"])
@pytest.mark.parametrize(("kind", "says"), STRICT, ids=[k for k, _ in STRICT])
def test_import_reads_samples_with_strict_types(workdir, capsys, kind, says):
    """A log-likelihood is a JSON number or lm-eval's text of one (lm-eval 0.4 logs ["-1.37", "False"]), finite
    and at most 0, never a boolean; a token count is an integer of 1 or more (mean divides by it)."""
    write_samples(workdir, _strict(kind))
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert says in err and "1 sample(s) do not match" in err and "line 3, pair winobias-0003" in err, err
    assert not (workdir / "artifacts/scores").exists()


def test_import_takes_numbers_and_lm_evals_text_alike(workdir, capsys):
    rows = good_samples(4)
    rows[1]["filtered_resps"] = [[-1.5, False], [-2, True]]  # JSON numbers (an integer too) and booleans
    rows[2]["filtered_resps"] = [["-1.5e-3", "True"], ["-0.0", "False"]]
    write_samples(workdir, rows)
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 0
    scores, _ = read_table("artifacts/scores/winobias/smol-lm.parquet", ScoreRow)
    assert scores["logprob_more"].tolist()[1:3] == [-1.5, -1.5e-3]
    assert scores["logprob_less"].tolist()[1:3] == [-2.0, 0.0]


def test_a_foreign_id_is_shown_cut_and_quoted(workdir, capsys):
    rows = good_samples(3)
    rows[1]["doc"]["pair_id"] = "\x1b[31m" + "x" * 1_000_000
    write_samples(workdir, rows)
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err
    assert "line 2, pair '\\x1b[31mxxx" in err and "(1,000,005 characters)" in err and len(err) < 2000
