"""Bad input by family (issue 17): every case exits 2 with a message naming the input (file and row,
column, key or option) and a ``hint:``, no traceback, and nothing written or replaced."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from gece.cli import main
from gece.io.files.writer import write_table
from gece.io.schemas.pair_rows import ScoreRow

from .conftest import ROOT
from .refusals import refusal
from .test_bad_input import GOOD, _scores, cli, files

NOT_WRITTEN = "nothing written"


def _refused(capsys, args, *named: str) -> str:
    code, err = cli(capsys, *args)
    assert code == 2, (args, err)
    assert "hint:" in err, err
    for name in named:
        assert name in err, (name, err)
    return err


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """A working directory with a score file (s.parquet, 40 pairs), a benchmark CSV and the repo's params.yaml."""
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "s.parquet", _scores(40), ScoreRow, meta={"benchmark": "b", "model": "m"})
    (tmp_path / "bench.csv").write_text(GOOD)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "data").symlink_to(ROOT / "data")
    return tmp_path


# --------------------------------------------------------------------- output paths
def _fifo(d: Path) -> str:
    os.mkfifo(d / "fifo")
    return "fifo"


def _dir(d: Path) -> str:
    (d / "adir").mkdir()
    return "adir"


def _link_to_dir(d: Path) -> str:
    (d / "adir").mkdir()
    (d / "link").symlink_to(d / "adir")
    return "link"


def _below_file(d: Path) -> str:
    (d / "afile").write_text("x")
    return "afile/out.json"


OUTPUTS = [  # (make the path, what the message says)
    (_fifo, "is a FIFO (named pipe), not a regular file"),
    (lambda d: "/dev/null", "is a character device, not a regular file"),
    (_dir, "is a directory, not a regular file"),
    (_link_to_dir, "(a symlink to"),
    (_below_file, "afile is a file, so nothing can be created below it"),
    (lambda d: "s.parquet", "is the input s.parquet; writing it would replace the input"),
]
COMMANDS = {  # command line with OUT standing for the bad output, and the option named
    "metrics": (["metrics", "s.parquet", "--out", "OUT"], "--out"),
    "metrics-bins": (["metrics", "s.parquet", "--bins-out", "OUT"], "--bins-out"),
    "calibrate": (["calibrate", "s.parquet", "--scores-out", "OUT"], "--scores-out"),
    "compare": (["compare", "s.parquet", "s.parquet", "--markdown-out", "OUT"], "--markdown-out"),
    "ablate": (["ablate", "s.parquet", "--sample-size-out", "a.json", "--binning-out", "OUT"], "--binning-out"),
    "prepare": (["prepare", "bench.csv", "OUT"], "OUT"),
}


@pytest.mark.parametrize(
    "make, message", OUTPUTS, ids=["fifo", "device", "directory", "symlink-to-dir", "below-a-file", "an-input"]
)
@pytest.mark.parametrize("command", COMMANDS)
@refusal("E-OUT-NODE", readers=("metrics", "calibrate", "compare", "ablate", "prepare"))
def test_output_paths(work, capsys, make, message, command):
    bad = make(work)
    args, option = COMMANDS[command]
    if command == "prepare" and bad == "s.parquet":
        bad = "bench.csv"
        message = "is the input bench.csv"
    before = {p: (p.lstat().st_mode, p.lstat().st_size) for p in work.rglob("*")}
    dev = os.stat("/dev/null")
    _refused(capsys, [bad if a == "OUT" else a for a in args], f"{option} {bad}", message)
    assert {p: (p.lstat().st_mode, p.lstat().st_size) for p in work.rglob("*")} == before  # nothing replaced
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and os.stat("/dev/null").st_ino == dev.st_ino


@refusal("E-OUT-TWICE", readers=("metrics",))
def test_two_outputs_on_one_path(work, capsys):
    before = files(work)
    _refused(
        capsys, ["metrics", "s.parquet", "--out", "x.json", "--bins-out", "./x.json"], "--bins-out x.json is also --out"
    )
    assert files(work) == before


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: (d / "rep").write_text("x"), "--out rep is not a directory"),
        (
            lambda d: (
                (d / "rep" / "figures").mkdir(parents=True),
                (d / "rep" / "figures" / "mine.txt").write_text("x"),
            ),
            "rep/figures holds files gece did not write there",
        ),
        (lambda d: ((d / "rep").mkdir(), (d / "rep" / "tables").symlink_to(d)), "rep/tables is a symlink"),
        (
            lambda d: ((d / "rep" / "pages").mkdir(parents=True), (d / "rep" / "pages" / "notes.md").write_text("x")),
            "rep/pages holds files gece did not write there",
        ),
    ],
    ids=["a-file", "foreign-files", "symlinked-subdir", "foreign-pages"],
)
@refusal("E-OUT-REPORT", readers=("report",))
def test_report_output_directory(work, capsys, setup, message):
    setup(work)
    before = files(work)
    _refused(capsys, ["report", "--out", "rep"], message)
    assert files(work) == before


# ---------------------------------------------------------------------- input paths
INPUTS = [
    (lambda d: (d / "adir").mkdir() or "adir", "not a file: it is a directory"),
    (lambda d: os.mkfifo(d / "fifo") or "fifo", "not a file: it is a FIFO"),  # never opened: no hang
    (lambda d: "/dev/zero", "not a file: it is a character device"),
    (lambda d: "missing.parquet", "file not found"),
]


@pytest.mark.parametrize("make, message", INPUTS, ids=["directory", "fifo", "device", "missing"])
@pytest.mark.parametrize("command", ["metrics", "calibrate", "ablate", "validate", "params"])
@refusal("E-IN-NODE", readers=("metrics", "calibrate", "ablate", "validate", "--params"))
def test_input_paths(work, capsys, make, message, command):
    bad = make(work)
    args = {
        "metrics": ["metrics", bad, "--out", "m.json"],
        "calibrate": ["calibrate", bad, "--out", "c.json"],
        "ablate": ["ablate", bad, "--sample-size-out", "a.json", "--binning-out", "b.json"],
        "validate": ["validate", bad],
        "params": ["--params", bad, "metrics", "s.parquet", "--out", "m.json"],
    }
    if command == "validate" and bad == "missing.parquet":
        bad = "missing.csv"
        args["validate"] = ["validate", bad]
    before = files(work)
    _refused(capsys, args[command], f"{bad}: ", message)
    assert files(work) == before


# -------------------------------------------------------------------- settings files
def _params_text(mutate=None) -> str:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    if mutate:
        mutate(raw)
    return yaml.safe_dump(raw)


def _params_lines() -> int:
    return len(_params_text().splitlines())


PARAMS_COMMANDS = {  # a command line of each command that reads --params, on the `work` fixture's files
    "metrics": ["metrics", "s.parquet", "--out", "m.json"],
    "validate": ["validate", "bench.csv"],
    "calibrate": ["calibrate", "s.parquet", "--out", "c.json"],
    "prepare": ["prepare", "bench.csv", "p.parquet"],
}

SETTINGS = [  # (bytes of the settings file, what the message says, what the hint says)
    (b"- winobias\n- winogender\n", "the top level is a list, not a mapping of sections", "at the top level"),
    (b"42\n", "the top level is a single value (42), not a mapping of sections", "at the top level"),
    (
        (_params_text() + "metrics:\n  n_bins: 15\n").encode(),
        "key 'metrics' is written twice (first on line",
        "merge the two 'metrics' entries into one",
    ),
    (
        _params_text().replace("  n_bins: 10\n", "  n_bins: 10\n  n_bins: 12\n").encode(),
        "key 'n_bins' is written twice",
        "merge the two 'n_bins' entries",
    ),
    (  # a flow mapping: both on one line
        (_params_text() + "lmeval_extra: {limit: 5, limit: 6}\n").encode(),
        f"line {_params_lines() + 1}: key 'limit' is written twice (first on line {_params_lines() + 1})",
        "merge the two 'limit' entries",
    ),
    ((_params_text() + "# caf\xe9\n").encode("latin-1"), "not valid UTF-8 text: line", "iconv -f latin1 -t utf-8"),
    (
        _params_text().encode("utf-16"),
        "not valid UTF-8 text: line 1, column 1: byte 0xff",
        "the file is UTF-16; re-save the file as UTF-8 (e.g. iconv -f utf-16 -t utf-8",
    ),
    (b"metrics: [\n", "not valid YAML", "fix the line shown"),
    (
        _params_text(lambda r: r["metrics"].update(seed=-1)).encode(),
        ("metrics.seed: Input should be greater than or equal to 0"),
        "Parameters section",
    ),
    (
        _params_text(lambda r: r["calibrate"].update(seed=2**40)).encode(),
        "calibrate.seed: Input should be less than",
        "Parameters section",
    ),
    (
        _params_text(lambda r: r["metrics"].update(bootstrap=10**9)).encode(),
        "metrics.bootstrap: Input should be less",
        "Parameters section",
    ),
    (b"[" * 200_000, "nested too deeply", "--params"),
    (b"x: 1\n" + b"#" * (1 << 20), "exceed the limit of 1,048,576 bytes", "GECE_MAX_PARAMS_BYTES"),
]


@pytest.mark.parametrize(
    "content, message, fix",
    SETTINGS,
    ids=[
        "list",
        "scalar",
        "key-twice",
        "nested-key-twice",
        "flow-key-twice",
        "latin-1",
        "utf-16",
        "bad-yaml",
        "negative-seed",
        "seed-too-big",
        "unbounded-bootstrap",
        "deep-nesting",
        "too-big",
    ],
)
@pytest.mark.parametrize("command", ["metrics", "validate", "calibrate"])
@refusal(
    "E-PARAMS-FILE", "E-PARAMS-TWICE", "E-PARAMS-RANGE", "E-SIZE-TEXT", readers=("metrics", "validate", "calibrate")
)
def test_settings_files(work, capsys, content, message, fix, command):
    (work / "p.yaml").write_bytes(content)
    before = files(work)
    _refused(capsys, ["--params", "p.yaml", *PARAMS_COMMANDS[command]], "p.yaml: ", message, fix)
    assert files(work) == before


# --------------------------------------------------------------- command-line values
OPTIONS = [
    (["metrics", "s.parquet", "--n-bins", "0"], "--n-bins: Input should be greater than or equal to 1"),
    (["metrics", "s.parquet", "--n-bins", "5000"], "--n-bins: Input should be less than or equal to 1000"),
    (["calibrate", "s.parquet", "--folds", "1"], "--folds: Input should be greater than or equal to 2"),
    (["calibrate", "s.parquet", "--fraction", "1.5"], "--fraction: Input should be less than 1"),
    (["calibrate", "s.parquet", "--fraction", "nan"], "argument --fraction: 'nan' is not a finite number"),
    (["calibrate", "s.parquet", "--seed", "-1"], "--seed: Input should be greater than or equal to 0"),
    (["compare", "s.parquet", "s.parquet", "--draws", "10"], "--draws: Input should be greater than or equal to 2000"),
    (
        ["extract", "p.parquet", "o.parquet", "--model", "smollm2-135m", "--limit", "0"],
        "--limit: Input should be greater than or equal to 1",
    ),
    (["metrics", "s.parquet", "--n-bins", "ten"], "argument --n-bins: 'ten' is not a whole number"),
    (["metrics", "s.parquet", "--n-bins", "٣"], "argument --n-bins: '٣' is not a whole number written in ASCII"),
    (["calibrate", "s.parquet", "--folds", "²"], "argument --folds: '²' is not a whole number written in ASCII"),
    (["compare", "s.parquet", "s.parquet", "--draws", "1_0000"], "argument --draws: '1_0000' is not a whole number"),
    (["extract", "--model", "smollm2-135m", "--batch-size", "٣"], "argument --batch-size: must be a positive number"),
    (["metrics", "s.parquet", "--binning", "quantile"], "argument --binning: invalid choice: 'quantile'"),
    (["validate", "bench.csv", "--duplicates", "maybe"], "argument --duplicates: invalid choice"),
    (["compare", "s.parquet"], "compare needs two score files, got 1"),
    (
        ["compare", "s.parquet", "s.parquet", "--benchmark", "winobias"],
        "compare got score files (s.parquet, s.parquet)",
    ),
]


@pytest.mark.parametrize("args, message", OPTIONS, ids=[" ".join(a[1:]) for a, _ in OPTIONS])
@refusal("E-OPTION-RANGE", readers=("metrics", "calibrate", "compare", "extract"))
def test_command_line_values(work, capsys, args, message):
    before = files(work)
    try:
        _refused(capsys, args, message)
    except SystemExit as e:  # argparse: exit 2 with a usage line and the hint
        err = capsys.readouterr().err
        assert e.code == 2 and message in err and "hint: `gece" in err and "--help` lists the options" in err, err
    assert files(work) == before


# ------------------------------------------------------------------------ score files
def _repeated_ids(d: Path) -> str:
    df = _scores(40)
    df.loc[[5, 17], "pair_id"] = df.loc[2, "pair_id"]
    write_table(d / "dup.parquet", df, ScoreRow, meta={"benchmark": "b", "model": "m"})
    return "dup.parquet"


SCORE_COMMANDS = {
    "metrics": ["metrics", "BAD", "--out", "m.json", "--bins-out", "b.json"],
    "ablate": ["ablate", "BAD", "--sample-size-out", "a.json", "--binning-out", "b.json"],
    "calibrate": ["calibrate", "BAD", "--out", "c.json", "--scores-out", "c.parquet"],
    "compare": ["compare", "s.parquet", "BAD", "--out", "d.json"],
}


@pytest.mark.parametrize("command", SCORE_COMMANDS)
@refusal("E-PAIR-ID", readers=("metrics", "ablate", "calibrate", "compare"))
def test_repeated_pair_id(work, capsys, command):
    bad = _repeated_ids(work)
    before = files(work)
    _refused(
        capsys,
        [bad if a == "BAD" else a for a in SCORE_COMMANDS[command]],
        f"{bad}: 1 pair_id(s) appear more than once",
        "pair_id 'b-0003' appears 3 times: rows 3, 6, 18",
        "rerun the stage that writes it",
    )
    assert files(work) == before


@pytest.mark.parametrize(
    "env, message",
    [
        ({"GECE_MAX_ROWS": "39"}, "40 rows exceed the limit of 39 rows that one run reads"),
        ({"GECE_MAX_PARQUET_BYTES": "100"}, "bytes exceed the limit of 100 bytes"),
        ({"GECE_MAX_ROWS": "lots"}, "GECE_MAX_ROWS='lots' is not a positive whole number"),
    ],
    ids=["rows", "bytes", "bad-limit"],
)
@pytest.mark.parametrize("command", SCORE_COMMANDS)
@refusal("E-SIZE-ROWS", readers=("metrics", "ablate", "calibrate", "compare"))
def test_score_file_size_limit(work, capsys, monkeypatch, env, message, command):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    before = files(work)
    err = _refused(capsys, ["s.parquet" if a == "BAD" else a for a in SCORE_COMMANDS[command]], message)
    assert "GECE_MAX_" in err
    assert files(work) == before


@refusal("E-SIZE-TEXT", readers=("validate", "prepare"))
def test_csv_size_limit(work, capsys, monkeypatch):
    monkeypatch.setenv("GECE_MAX_CSV_BYTES", "20")
    for args in (["validate", "bench.csv"], ["prepare", "bench.csv", "p.parquet"]):
        _refused(capsys, args, "bench.csv: ", "bytes exceed the limit of 20 bytes", "GECE_MAX_CSV_BYTES=")
    assert not (work / "p.parquet").exists()


def test_calibration_hint_names_the_file(work, capsys):
    df = _scores(40)
    df["y"] = [1] * 37 + [0] * 3
    write_table(work / "s1.parquet", df, ScoreRow, meta={"benchmark": "b", "model": "m"})
    _refused(
        capsys,
        ["calibrate", "s1.parquet", "--out", "c.json"],
        "s1.parquet: calibration needs at least 5",
        "lower calibrate.folds (or --folds) to at most 3 for s1.parquet",
    )
    assert not (work / "c.json").exists()


def test_one_label_is_reported_not_refused(work, capsys):
    """Identity labels (y = 1 for every pair): each method is failed with the reason, the uncalibrated
    metrics stay."""
    df = _scores(40)
    df["y"] = 1
    write_table(work / "s1.parquet", df, ScoreRow, meta={"benchmark": "b", "model": "m"})
    assert cli(capsys, "calibrate", "s1.parquet", "--out", "c.json")[0] == 0
    report = json.loads((work / "c.json").read_text())
    for protocol in ("split", "crossfit"):
        assert report[protocol]["uncalibrated"]["ece"] is not None
        for m in report[protocol]["methods"].values():
            assert m["status"] == "failed" and m["metrics"] is None
            assert "every fit pair has y=1: a calibration map needs both labels" in m["reason"]


# ------------------------------------------------------------------ what is valid
@refusal("E-CSV-REPEAT", readers=("validate", "prepare"))
def test_validate_and_prepare_follow_one_setting(work, capsys):
    shipped = ROOT / "data" / "benchmarks" / "winobias.csv"  # holds one exact repeat
    assert cli(capsys, "validate", shipped)[0] == 0  # prepare.duplicates: keep, as prepare does
    assert cli(capsys, "prepare", shipped, "w.parquet")[0] == 0
    (work / "params.yaml").write_text(_params_text(lambda r: r["prepare"].update(duplicates="error")))
    for args in (["validate", shipped], ["prepare", shipped, "w2.parquet"]):
        _refused(capsys, args, "row 385 (line 386): repeats row 383")
    assert not (work / "w2.parquet").exists()


@pytest.mark.parametrize(
    "row, shown",
    [
        ("He left.,he left.,1", "'He' vs 'he': both 'male'"),
        ("He saw him.,He saw his.,1", "'him' vs 'his': both 'male'"),
        ("The Nurse left.,The nurse left.,0", "'Nurse' vs 'nurse': both 'nurse'"),
    ],
)
@refusal("E-CSV-PAIR", readers=("validate", "prepare"))
def test_pair_that_contrasts_nothing(work, capsys, row, shown):
    (work / "c.csv").write_text(GOOD + row + "\n")
    for args in (["validate", "c.csv"], ["prepare", "c.csv", "c.parquet"]):
        _refused(
            capsys,
            args,
            "c.csv: row 3 (line 4): the sentences differ only in words of one group",
            shown,
            "contrasts nothing",
        )
    assert not (work / "c.parquet").exists()


# --------------------------------------------------------------------- literal text
LABELS = [":x:", "[bold]B[/bold]", "\x1b[31mred", "a\u202eb"]


@pytest.mark.parametrize("label", LABELS, ids=["emoji-code", "markup", "escape-code", "bidi-override"])
def test_data_prints_as_literal_text(work, capsys, label):
    write_table(work / "l.parquet", _scores(40), ScoreRow, meta={"benchmark": label, "model": label})
    assert main(["metrics", "l.parquet"]) == 0
    text = capsys.readouterr().out
    shown = label.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")
    assert f"{shown} / {shown}: 40 pairs" in text
    assert "❌" not in text and "\x1b" not in text and "\u202e" not in text
    # in an error (a bad row's text) and in a warning (a kept repeat)
    (work / "b.csv").write_text(GOOD + f"He x.,She x.,{label}\n" + "He y.,She y.,1\n" * 2)
    code, err = cli(capsys, "validate", "b.csv")
    assert code == 2 and "❌" not in err and "\x1b" not in err and "\u202e" not in err
    assert f"y is {label!r}" in err and "repeated pair(s) kept" in err


@pytest.mark.parametrize("label", LABELS, ids=["emoji-code", "markup", "escape-code", "bidi-override"])
def test_log_lines_are_literal_text(work, capsys, label):
    assert main(["prepare", "bench.csv", f"o{label}.parquet"]) == 0  # the log line names the output path
    err = capsys.readouterr().err
    shown = label.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")
    assert f"-> o{shown}.parquet" in err and "\x1b" not in err and "\u202e" not in err and "❌" not in err


@pytest.mark.parametrize("command", ["extract"])
@refusal("E-PAIR-ID", readers=("extract",))
def test_repeated_pair_id_in_a_prepared_file(work, capsys, command):
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert cli(capsys, "prepare", "bench.csv", "p.parquet")[0] == 0
    table = pq.read_table(work / "p.parquet")
    i = table.schema.get_field_index("pair_id")
    pq.write_table(table.set_column(i, "pair_id", pa.array(["bench-0001"] * len(table))), work / "dup.parquet")
    (work / "ref.csv").write_text("never read")
    before = files(work)
    args = {"extract": ["extract", "dup.parquet", "o.parquet", "--model", "smollm2-135m"]}[command]
    _refused(
        capsys,
        args,
        "dup.parquet: 1 pair_id(s) appear more than once",
        "pair_id 'bench-0001' appears 2 times: rows 1, 2",
    )
    assert files(work) == before


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: (d / "o.timing.json").mkdir(), "the timing file o.timing.json is a directory"),
        (lambda d: (d / "o.shards").write_text("x"), "the shards directory o.shards is not a directory"),
    ],
    ids=["timing-file", "shards-dir"],
)
@refusal("E-OUT-NODE", readers=("extract",))
def test_extract_paths_named_after_the_output(work, capsys, make, message):
    assert cli(capsys, "prepare", "bench.csv", "p.parquet")[0] == 0
    make(work)
    before = files(work)
    _refused(capsys, ["extract", "p.parquet", "o.parquet", "--model", "smollm2-135m"], message, "give OUT another name")
    assert files(work) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "--reports", "s.parquet", "--out", "r"], "--reports s.parquet is not a directory"),
        (["report", "--scores", "s.parquet", "--out", "r"], "--scores s.parquet is not a directory"),
        (["report", "--data-dvc", "bench.csv", "--out", "r"], "bench.csv: not valid YAML"),
    ],
    ids=["reports", "scores", "data-dvc"],
)
@refusal("E-JSON", readers=("report",))
def test_report_inputs(work, capsys, args, message):
    (work / "bench.csv").write_text("a: [\n")
    before = files(work)
    _refused(capsys, args, message)
    assert files(work) == before


@refusal("E-JSON", readers=("neutral",))
def test_json_nested_too_deeply(work, capsys):
    path = work / "reports" / "metrics" / "genderlex" / "smollm2-135m.json"
    path.parent.mkdir(parents=True)
    path.write_text("[" * 200_000)
    _refused(
        capsys,
        ["neutral", "--model", "smollm2-135m", "--out", "n.json"],
        "smollm2-135m.json: not valid JSON (nested too deeply)",
    )
    assert not (work / "n.json").exists()


def test_figure_titles_are_literal_text(work, capsys):
    """Matplotlib would parse '$...$' in a title as mathtext (and fail on a bad formula): data is drawn as text."""
    write_table(work / "m.parquet", _scores(40), ScoreRow, meta={"benchmark": "$\\frac{$", "model": "a$x^2$b"})
    code, err = cli(
        capsys, "ablate", "m.parquet", "--sample-size-out", "a.json", "--binning-out", "b.json", "--figure-out", "f.png"
    )
    assert code == 0 and (work / "f.png").exists(), err


def test_a_log_record_is_one_line(work, capsys):
    assert main(["prepare", "bench.csv", "o\nINFO: forged.parquet"]) == 0
    err = capsys.readouterr().err
    assert "-> o\\nINFO: forged.parquet" in err and "\nINFO: forged" not in err


def test_a_symlink_to_a_file_is_replaced_not_written_through(work, capsys):
    (work / "target.json").write_text("cache\n")
    (work / "link.json").symlink_to(work / "target.json")
    assert cli(capsys, "metrics", "s.parquet", "--out", "link.json")[0] == 0
    assert not (work / "link.json").is_symlink() and (work / "target.json").read_text() == "cache\n"
