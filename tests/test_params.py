"""params.yaml loading: the shipped file and every kind of mistake."""

from __future__ import annotations

import pytest
import yaml

from gece.cli import main
from gece.errors import GeceError
from gece.io.params import load_params, memory_caps

from .conftest import ROOT


def test_shipped_params_load():
    params = load_params(ROOT / "params.yaml")
    assert params.metrics.n_bins == 10 and params.metrics.binning == "equal_width"
    assert params.models == ["smollm2-135m", "gemma-3-270m", "gemma-3-270m-nobos"]
    assert params.registry["gemma-3-270m-nobos"].special_tokens is False
    assert len(params.references) == 6
    assert all(params.registry[m].reference == m.removeprefix("paper-") for m in params.references)


def test_scale_settings_load(tmp_path):
    def scale(raw):
        raw["extract"]["batch_size"] = "auto"
        raw["registry"]["big"] = {
            "source": "org/big",
            "device": "multi",
            "dtype": "bfloat16",
            "max_memory": {0: "70GiB", 1: "70GiB", "cpu": "200GiB"},
        }
        raw["registry"]["fast"] = {"source": "org/big", "backend": "vllm", "tensor_parallel": 4, "dtype": "bfloat16"}

    params = load_params(_write(tmp_path, scale))
    assert params.extract.batch_size == "auto"
    assert memory_caps(params.registry["big"].max_memory) == {0: "70GiB", 1: "70GiB", "cpu": "200GiB"}
    assert params.registry["fast"].backend == "vllm" and params.registry["fast"].tensor_parallel == 4
    assert params.registry["smollm2-135m"].backend == "transformers"


def _write(tmp_path, mutate):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    mutate(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r["metrics"].update(nbins=15), "metrics.nbins: unknown key (did you mean 'n_bins'?)"),
        (lambda r: r["metrics"].update(n_bins="ten"), "metrics.n_bins: Input should be a valid integer"),
        (lambda r: r["metrics"].update(binning="quantile"), "metrics.binning: Input should be 'equal_width' or"),
        (
            lambda r: r["metrics"].update(bootstrap=10),
            "metrics.bootstrap: Input should be greater than or equal to 1000",
        ),
        (lambda r: r.pop("benchmarks"), "benchmarks: required key is missing"),
        (lambda r: r["models"].append("gpt-5"), "models ['gpt-5'] have no entry under registry"),
        (
            lambda r: r["registry"]["smollm2-135m"].update(special_token=True),
            "registry.smollm2-135m.special_token: unknown key",
        ),
        (lambda r: r.update(metric={}), "metric: unknown key (did you mean 'metrics'?)"),
        (
            lambda r: r["extract"].update(batch_size=0),
            "extract.batch_size: must be a positive number of pairs or auto (got 0)",
        ),
        (
            lambda r: r["registry"]["smollm2-135m"].update(max_memory={0: "20GiB"}),
            "max_memory caps the devices of device: multi",
        ),
        (
            lambda r: r["registry"]["smollm2-135m"].update(device="multi", max_memory={"gpu0": "20GiB"}),
            "max_memory key 'gpu0' is not a device",
        ),
        (
            lambda r: r["registry"]["smollm2-135m"].update(device="multi", max_memory={0: "lots"}),
            "max_memory value 'lots' is not a size",
        ),
        (lambda r: r["registry"]["smollm2-135m"].update(backend="vllm", device="cpu"), "backend vllm runs on CUDA"),
        (lambda r: r["registry"]["smollm2-135m"].update(tensor_parallel=2), "tensor_parallel is for backend: vllm"),
        (lambda r: r["registry"]["smollm2-135m"].update(backend="tgi"), "Input should be 'transformers' or 'vllm'"),
    ],
)
def test_bad_params_are_named(tmp_path, mutate, expected):
    path = _write(tmp_path, mutate)
    with pytest.raises(GeceError) as e:
        load_params(path)
    assert expected in str(e.value) and str(path) in str(e.value)


def test_bad_params_exit_2_without_traceback(tmp_path, capsys):
    path = _write(tmp_path, lambda r: r["metrics"].update(nbins=15))
    assert main(["--params", str(path), "metrics", "whatever.parquet"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'n_bins'" in err and "Traceback" not in err


def test_not_yaml(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("metrics: [unclosed")
    with pytest.raises(GeceError, match="not valid YAML"):
        load_params(path)


def test_command_line_overrides_are_validated_like_params(tmp_path, capsys):
    # an override outside the bounds of its params key is an error naming the option
    assert main(["compare", "a.parquet", "b.parquet", "--draws", "10"]) == 2
    assert "--draws: Input should be greater than or equal to 2000" in capsys.readouterr().err
    assert main(["metrics", "x.parquet", "--n-bins", "0"]) == 2
    assert "--n-bins: Input should be greater than or equal to 1" in capsys.readouterr().err
