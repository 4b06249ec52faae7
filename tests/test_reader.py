"""The one reader of files from outside (gece.io.files.inputs: read_bytes, read_text, parse_json, read_json_lines)
and the
bounded cost of validating a benchmark (issue 49, items 3 and 5). The commands that read through it are tested
in test_lmeval.py (lm-eval logs), test_bad_input.py and test_crows.py (CSVs)."""

from __future__ import annotations

import os
import time

import pandas as pd
import pytest

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files import inputs, json_reader
from gece.io.formats import benchmarks
from gece.io.settings.params_file import load_yaml

from .refusals import refusal

NODES = {
    "fifo": (lambda p: os.mkfifo(p), "not a file: it is a FIFO"),
    "device": (lambda p: p.symlink_to("/dev/zero"), "not a file: it is a character device"),
    "directory": (lambda p: p.mkdir(), "not a file: it is a directory"),
    "dangling": (lambda p: p.symlink_to("nowhere.json"), "file not found (a symlink to nowhere.json"),
}


@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize("reader", ["bytes", "json", "jsonl", "yaml"])
def test_only_regular_files_are_read(tmp_path, node, reader):
    """A FIFO is never opened (it would block until a writer comes), a device never read."""
    make, says = NODES[node]
    path = tmp_path / "x.json"
    make(path)
    read = {
        "bytes": lambda: inputs.read_bytes(path, "fix it", "json_bytes"),
        "json": lambda: json_reader.read_json_file(path, "fix it"),
        "jsonl": lambda: json_reader.read_json_lines(path, "fix it", "lmeval_bytes"),
        "yaml": lambda: load_yaml(path, "fix it"),
    }[reader]
    with pytest.raises(GeceError, match=r"x\.json") as e:
        read()
    assert says in str(e.value)


def test_the_limit_is_named_and_read_no_further(tmp_path, monkeypatch):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n' * 20)
    monkeypatch.setenv("GECE_MAX_LMEVAL_BYTES", "100")
    with pytest.raises(GeceError, match="180 bytes exceed the limit of 100 bytes") as e:
        json_reader.read_json_lines(path, "fix it", "lmeval_bytes")
    assert "GECE_MAX_LMEVAL_BYTES=180" in e.value.hint
    monkeypatch.setenv("GECE_MAX_LMEVAL_BYTES", "180")
    assert json_reader.read_json_lines(path, "fix it", "lmeval_bytes")[-1] == (20, {"a": 1})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000, "not valid JSON (nested too deeply), at most 64 levels"),
        ("[" * 65 + "]" * 65, "nested more than 64 deep"),
        ('{"a": ' * 65 + "1" + "}" * 65, "nested more than 64 deep"),
        ("1" * 1_000_000, "a number of 1,000,000 characters (at most 100)"),
        ("0." + "1" * 200, "a number of 202 characters"),
        ('{"a": 1, "b": {"c": 1, "c": 2}}', "key 'c' is written twice"),
        ('["\\udc80"]', "half of a UTF-16 surrogate pair"),
        ('{"a": 1', "not valid JSON: line 1, column 8"),
    ],
)
def test_json_is_parsed_with_bounds(text, says):
    t = time.perf_counter()
    with pytest.raises(GeceError, match=r"f\.json") as e:
        json_reader.parse_json(text, "f.json", "fix it")
    assert says in str(e.value) and time.perf_counter() - t < 1


def test_json_within_bounds_parses_as_json_does():
    text = '{"a": [1, -2.5e-3, 12345678901234567890, NaN, "\\ud83d\\ude00"], "b": {"c": null}}'
    value = json_reader.parse_json(text, "f.json", "fix it")
    assert value["a"][:3] == [1, -2.5e-3, 12345678901234567890] and value["a"][3] != value["a"][3]
    assert value["a"][4] == "\U0001f600" and value["b"] == {"c": None}
    assert json_reader.parse_json("[" * 64 + "]" * 64, "f.json", "x") is not None  # 64 deep is allowed


def test_utf8_errors_are_named_by_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "\xe4"}\n')
    with pytest.raises(GeceError, match=r"x.jsonl: not valid UTF-8 text: line 2, column 8: byte 0xe4"):
        json_reader.read_json_lines(path, "fix it", "lmeval_bytes")


# ------------------------------------------------------------------ bounded cost (item 5)
def _pair(tmp_path, n_chars: int, name: str = "big.csv"):
    more = ("word " * (n_chars // 5)).strip() + "."
    less = "word " * (n_chars // 5 - 1) + "she."
    path = tmp_path / name
    path.write_text(f"sent_more,sent_less,y\n{more},{less},1\n")
    return path


@pytest.mark.parametrize("n_chars", [100_000, 1 << 20])
def test_two_long_sentences_are_answered_quickly(tmp_path, capsys, n_chars):
    """issue 49: one pair of 100,000-character sentences of one repeated word took gece validate over three
    minutes (difflib's cost grows with the cube of such a sentence). A 1 MiB sentence is over the CSV field
    limit; a 100,000-character one is refused by the alignment's budget, naming the row."""
    path = _pair(tmp_path, n_chars)
    t = time.perf_counter()
    code = main(["validate", str(path)])
    seconds = time.perf_counter() - t
    captured = capsys.readouterr()
    out = (captured.err + captured.out).replace("\n", " ")
    assert code == 2 and seconds < 5 and "Traceback" not in out, (seconds, out)
    says = "row 1 (line 2): the two sentences repeat words" if n_chars < 131_072 else "a field of more than 131,072"
    assert says in out and "big.csv" in out


def _hostile_rows(n: int) -> pd.DataFrame:
    more = [" ".join(["w"] * 40) + f" he {i}." for i in range(n)]
    less = [" ".join(["w"] * 40) + f" she {i}." for i in range(n)]
    return pd.DataFrame({"sent_more": more, "sent_less": less, "y": ["1"] * n}, index=range(2, n + 2))


def test_validation_cost_grows_linearly(monkeypatch):
    """Rows of one repeated word (each one refused) cost about the same per row at 1x and 4x the rows: the
    alignment stops at its budget. Generous bounds: the speed itself is measured in bench/bench_align.py."""
    times = []
    for n in (500, 2000):
        rows = _hostile_rows(n)
        t = time.perf_counter()
        _, problems, _ = benchmarks.check_rows(rows, "b.csv")
        times.append(time.perf_counter() - t)
        assert len(problems) == n and "within 840 steps" in problems[0]
    assert times[1] < 10 * times[0] + 0.5, times  # linear: about 4x
    monkeypatch.setenv("GECE_MAX_ALIGN_STEPS", "1000")  # the budget is raised: the same rows are aligned
    assert benchmarks.check_rows(_hostile_rows(2), "b.csv")[1] == []


def test_the_budget_never_changes_an_alignment():
    """The counted matcher is difflib's: where it finishes, the same opcodes (the shipped pairs: all 10,840 in
    bench/bench_align.py)."""
    import difflib

    a, b = (
        ["the", "man", "saw", "the", "woman", "and", "the", "dog"],
        ["the", "woman", "saw", "the", "man", "and", "a", "dog"],
    )
    counted = benchmarks.CountedMatcher(a, b, 10**9)
    assert counted.get_opcodes() == difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    assert 0 < counted.steps <= 10 * 50


@refusal("E-JSON", readers=("diff",))
@pytest.mark.parametrize("side", ["workspace", "revision"])
def test_gece_diff_reads_json_with_bounds(tmp_path, monkeypatch, capsys, side):
    """gece diff parsed a report with json.loads: JSON nested 100,000 deep was a RecursionError's traceback."""
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "r.json").write_text(deep if side == "workspace" else '{"a": 1}')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gece.tools.diff.files_at", lambda rev, paths: ["r.json"])
    monkeypatch.setattr("gece.tools.diff._git", lambda *a, **k: '{"a": 1}' if side == "workspace" else deep)
    code = main(["diff", "r.json"])
    err = capsys.readouterr().err.replace("\n", " ")
    assert code == 2 and "r.json" in err and "not valid JSON (nested too deeply)" in err and "Traceback" not in err
