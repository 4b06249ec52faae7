"""Files that belong together (issue 49, item 4): a meta file records the sha256 of its data file, a reader
refuses a mixed pair naming the command that writes it, the next write repairs it, and every output is
checked before the first is written. The kills use the hooks of gece.base.faults at every rename."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files import paired
from gece.io.files.json_reader import read_json
from gece.io.files.json_writer import write_json
from gece.io.files.readers import read_table
from gece.io.files.writer import write_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.pair_rows import PreparedPair
from gece.io.schemas.tokens import ExtractMeta, TokenRow
from gece.pipeline import prepare as prepare_stage

from .conftest import DATA, ROOT
from .refusals import refusal

PAIRS = 8
MODEL = "fake"


def fake_tokens(logprob: float = -1.0) -> None:
    """A token file of the first PAIRS pairs of winobias (two tokens a target word, so the word probabilities differ)
    and its meta, as extract writes them, without a model."""
    pairs, _ = read_table(layout.prepared_path("winobias"), PreparedPair)
    rows = pairs.head(PAIRS)
    frame = pd.DataFrame(
        {
            "pair_id": rows["pair_id"],
            "row": rows["row"],
            "logprobs_more": [[[logprob, -2.0]]] * PAIRS,
            "logprobs_less": [[[-1.5, -0.5]]] * PAIRS,
            "logits_more": [None] * PAIRS,
            "logits_less": [None] * PAIRS,
        }
    )
    tokens = layout.tokens_path(MODEL, "winobias")
    file_meta = {"benchmark": "winobias", "model": MODEL, "source": "fake", "weights_sha256": "w=0"}
    file_meta |= {"special_tokens": "True", "dtype": "float32", "device": "cpu", "attention": "eager"}
    write_table(tokens, frame, TokenRow, meta=file_meta)
    meta = ExtractMeta(
        benchmark="winobias",
        model=MODEL,
        source="fake",
        kind="directory",
        weights={"w": "0"},
        dtype="float32",
        device="cpu",
        attention="eager",
        special_tokens=True,
        word_prob=None,
        batch_size=1,
        limit=PAIRS,
        torch="0",
        transformers="0",
        gece="0",
        pairs=PAIRS,
        multi_target_pairs=0,
        multi_token_targets=PAIRS * 2,
        continued_pairs=0,
        tokens=1,
        tokens_padded=1,
        tokens_whole=1,
        head_positions=1,
        flops=None,
        flops_per_pair=None,
        shards=0,
    )
    write_json(layout.meta_path(tokens), paired.describing(meta, tokens))


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """params.yaml, winobias prepared, and a fake model's token file of its first pairs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "data").symlink_to(DATA)
    prepare_stage.prepare(DATA / "benchmarks" / "winobias.csv", tmp_path / layout.prepared_path("winobias"))
    fake_tokens()
    return tmp_path


def score_cli(tree, *extra: str, kill: str | None = None) -> subprocess.CompletedProcess:
    """``gece score`` of the fake model in a fresh Python (a kill ends the process), killed at ``kill``."""
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")} | ({"GECE_KILL_AT": kill} if kill else {})
    env.pop("GECE_KILL_AT", None) if kill is None else None
    cmd = [sys.executable, "-m", "gece.cli", "-q", "score", "--benchmark", "winobias", "--model", MODEL, *extra]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def consistent(data) -> bool:
    return read_json(layout.meta_path(data))[paired.FIELD] == paired.sha256_of(data)


def test_the_meta_records_the_sha256_of_its_data_file(tree):
    assert main(["-q", "score", "--benchmark", "winobias", "--model", MODEL]) == 0
    scores = layout.scores_path("winobias", MODEL)
    assert consistent(scores) and consistent(layout.tokens_path(MODEL, "winobias"))
    before = layout.meta_path(scores).read_bytes()
    assert main(["-q", "score", "--benchmark", "winobias", "--model", MODEL]) == 0
    assert layout.meta_path(scores).read_bytes() == before  # deterministic: the sha256 of the same bytes


@refusal("E-PAIR-MIXED", readers=("score", "report"))
def test_a_kill_at_every_rename_leaves_a_pair_that_is_whole_or_refused(tree, capsys):
    """Kill the second write (another word probability: other bytes) at each rename: before the data file's rename
    the old pair stays whole; between the two renames the pair is mixed, and its readers refuse it naming the
    command that writes it; that command's next run repairs it."""
    scores = layout.scores_path("winobias", MODEL)
    assert score_cli(tree).returncode == 0
    old = scores.read_bytes()
    killed = score_cli(tree, "--word-prob", "max", kill=f"rename:{scores.name}")
    assert killed.returncode == -9 and scores.read_bytes() == old and consistent(scores)
    killed = score_cli(tree, "--word-prob", "max", kill=f"rename:{layout.meta_path(scores).name}")
    assert killed.returncode == -9 and scores.read_bytes() != old and not consistent(scores)
    # the reader of a score file's pair (the report's extract metadata) refuses it, naming the command
    from gece.io.settings.params import load_params
    from gece.pipeline import report_data

    params = load_params("params.yaml").model_copy(update={"models": [MODEL]})
    metrics = tree / "reports" / report_layout.metrics_file("winobias", MODEL)
    assert main(["-q", "metrics", str(scores), "--out", str(metrics)]) == 0
    with pytest.raises(GeceError) as e:
        report_data.load_report_data(params, tree / "reports", tree / "artifacts" / "scores", tree / "out", tree)
    assert (
        "do not belong together" in e.value.message and "gece score --benchmark winobias --model fake" in e.value.hint
    )
    assert score_cli(tree, "--word-prob", "max").returncode == 0 and consistent(scores)  # the next write repairs
    # a token file beside another run's meta (extract killed between its renames): score refuses it
    tokens = layout.tokens_path(MODEL, "winobias")
    frame, file_meta = read_table(tokens, TokenRow)
    write_table(tokens, frame.assign(row=frame["row"]), TokenRow, meta=file_meta | {"model": "other"})
    capsys.readouterr()
    assert main(["score", "--benchmark", "winobias", "--model", MODEL]) == 2
    err = capsys.readouterr().err
    assert "do not belong together" in err and "extract@fake" in err and str(tokens) in err


@refusal("E-OUT-NODE", readers=("score", "lmeval-import"))
def test_a_meta_path_that_is_a_directory_is_refused_before_anything_is_written(tree, capsys):
    out = tree / "x.parquet"
    layout.meta_path(out).mkdir()
    assert main(["score", "--benchmark", "winobias", "--model", MODEL, "--out", str(out)]) == 2
    assert not out.exists() and "x.meta.json is a directory" in capsys.readouterr().err
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias", "--out", str(out)]) == 2
    assert not out.exists() and "x.meta.json is a directory" in capsys.readouterr().err
