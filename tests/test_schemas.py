"""Schema round-trips, validation messages and atomic writes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gece.base.errors import GeceError
from gece.io.files.json_reader import read_json
from gece.io.files.json_writer import write_json
from gece.io.files.outputs import atomic_path
from gece.io.files.readers import read_table
from gece.io.files.writer import arrow_schema, write_table
from gece.io.schemas.metric_reports import BinsReport, MetricsReport
from gece.io.schemas.pair_rows import PreparedPair, ScoreRow


def _score_rows(n=3):
    lp_more = np.log([0.3, 0.02, 1e-300])[:n]
    lp_less = np.log([0.1, 0.08, 1e-310])[:n]
    p = 1 / (1 + np.exp(-(lp_more - lp_less)))
    return pd.DataFrame(
        {
            "pair_id": [f"b-{i}" for i in range(n)],
            "row": np.arange(1, n + 1),
            "sent_more": ["He a."] * n,
            "sent_less": ["She a."] * n,
            "y": [1, 0, 1][:n],
            "bias_type": ["gender", None, "gender"][:n],
            "targets_more": [["He"]] * n,
            "targets_less": [["She"]] * n,
            "gender_more": ["male"] * n,
            "gender_less": ["female"] * n,
            "n_tokens_more": [1, 2, None][:n],
            "n_tokens_less": [1, 1, None][:n],
            "logprob_more": lp_more,
            "logprob_less": lp_less,
            "logit_more": [3.5, None, 1.0][:n],
            "logit_less": [2.5, None, 0.5][:n],
            "p": p,
            "scored_punct_only": [None] * n,
        }
    )


def test_score_roundtrip_keeps_types_and_values(tmp_path):
    df = _score_rows()
    write_table(tmp_path / "s.parquet", df, ScoreRow, meta={"benchmark": "b", "model": "m"})
    back, meta = read_table(tmp_path / "s.parquet", ScoreRow)
    assert meta == {"schema": "ScoreRow", "schema_version": "1", "benchmark": "b", "model": "m"}
    schema = pq.read_schema(tmp_path / "s.parquet")
    assert str(schema.field("logprob_more").type) == "double" and str(schema.field("y").type) == "int64"
    assert str(schema.field("targets_more").type) == "list<element: string>"
    np.testing.assert_array_equal(back["logprob_more"], df["logprob_more"])  # float64, bit-exact
    assert back["logprob_more"].iloc[2] == np.log(1e-300)  # tiny probabilities survive as logs
    assert list(back["targets_more"].iloc[0]) == ["He"]
    assert pd.isna(back["bias_type"].iloc[1]) and pd.isna(back["n_tokens_more"].iloc[2])


def test_identical_inputs_give_identical_bytes(tmp_path):
    df = _score_rows()
    write_table(tmp_path / "a.parquet", df, ScoreRow, meta={"model": "m"})
    write_table(tmp_path / "b.parquet", df, ScoreRow, meta={"model": "m"})
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_prepared_schema_columns():
    names = arrow_schema(PreparedPair).names
    assert names[:3] == ["pair_id", "row", "sent_more"] and "starts_more" in names and "position" in names


def test_write_refuses_invalid_rows(tmp_path):
    df = _score_rows()
    df.loc[1, "p"] = 0.9  # disagrees with the log-probabilities
    with pytest.raises(GeceError, match=r"row 2, p=0.9 disagrees"):
        write_table(tmp_path / "s.parquet", df, ScoreRow)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_read_names_file_row_and_fix(tmp_path):
    df = _score_rows()
    write_table(tmp_path / "s.parquet", df, ScoreRow)
    t = pq.read_table(tmp_path / "s.parquet")
    bad = t.set_column(t.schema.get_field_index("y"), "y", pa.array([1, 5, 0], pa.int64()))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(GeceError) as e:
        read_table(tmp_path / "bad.parquet", ScoreRow)
    text = str(e.value)
    assert "bad.parquet" in text and "row 2, y: Input should be 0 or 1" in text and "rerun the stage" in text


def test_read_missing_column_and_wrong_type(tmp_path):
    df = _score_rows()
    pq.write_table(pq.read_table(_write(tmp_path, df)).drop(["p"]), tmp_path / "nop.parquet")
    with pytest.raises(GeceError, match=r"missing column\(s\) \['p'\]"):
        read_table(tmp_path / "nop.parquet", ScoreRow)
    df2 = df.assign(p=df["p"].map(lambda v: f"{v:.3f}%"))
    pq.write_table(pa.Table.from_pandas(df2), tmp_path / "str.parquet")
    with pytest.raises(GeceError, match="column p: type large_string, expected double"):
        read_table(tmp_path / "str.parquet", ScoreRow)
    # another backend's plain pandas output (large strings, nullable ints as float) reads fine
    pq.write_table(pa.Table.from_pandas(df), tmp_path / "pandas.parquet")
    back, _ = read_table(tmp_path / "pandas.parquet", ScoreRow)
    assert back["n_tokens_more"].iloc[0] == 1
    with pytest.raises(GeceError, match="file not found"):
        read_table(tmp_path / "nothing.parquet", ScoreRow)


def _write(tmp_path, df):
    path = tmp_path / "ok.parquet"
    write_table(path, df, ScoreRow)
    return path


def _report(**kw):
    counts = {"n": 10, "n_distinct": 9, "n_clusters": 8, "n_punct_only": 1, "n_ties": 0}
    counts |= {"n_bins": 10, "binning": "equal_width"}
    base = {k: 0.1 for k in MetricsReport.model_fields if k not in (*counts, "null_reasons")}
    return {**counts, **base, **kw}


def test_metrics_report_json_roundtrip(tmp_path):
    write_json(tmp_path / "m.json", MetricsReport.model_validate(_report(ece_female=None, null_reasons="x")))
    data = json.loads((tmp_path / "m.json").read_text())
    assert data["ece_female"] is None and data["null_reasons"] == "x"
    assert read_json(tmp_path / "m.json", MetricsReport).ece_female is None
    write_json(tmp_path / "n.json", MetricsReport.model_validate(_report()))
    assert "null_reasons" not in json.loads((tmp_path / "n.json").read_text())
    assert set(json.loads((tmp_path / "n.json").read_text())) == set(MetricsReport.model_fields) - {"null_reasons"}
    # a protocol's block (gece.report.protocol): a key of its own, absent elsewhere
    write_json(tmp_path / "p.json", MetricsReport.model_validate(_report(toy={"share": 0.5, "n_rows": 3})))
    assert json.loads((tmp_path / "p.json").read_text())["toy"] == {"share": 0.5, "n_rows": 3}


def test_metrics_report_rejects_unknown_and_bad_keys(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(_report(extra_key=1, n=-1)))
    with pytest.raises(GeceError) as e:
        read_json(tmp_path / "m.json", MetricsReport)
    assert "extra_key: Input should be a valid dictionary" in str(e.value)  # only a protocol's block is a key more
    assert "n: Input should be greater" in str(e.value)


def test_bins_json_nan_becomes_null(tmp_path):
    rec = [
        {"bin": 0, "lower": 0.0, "upper": 0.1, "count": 0, "confidence": float("nan"), "accuracy": None, "gap": None}
    ]
    write_json(tmp_path / "b.json", rec, BinsReport)
    assert json.loads((tmp_path / "b.json").read_text())[0]["confidence"] is None


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "x.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_written_files_get_the_usual_permissions(tmp_path):
    import os

    write_json(tmp_path / "x.json", {"a": 1})
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o666 & ~umask
