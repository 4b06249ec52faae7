"""params.yaml loading: the shipped file and every kind of mistake."""

from __future__ import annotations

import pytest
import yaml

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.paths import data_layout
from gece.io.settings.model_entry import memory_caps
from gece.io.settings.params import load_params

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
        (lambda r: r["registry"]["smollm2-135m"].update(backend="vllm", device="mps"), "backend vllm runs on CUDA"),
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
    # (checked as it is parsed: a usage error, exit 2, before any file is read)
    for argv, message in (
        (
            ["compare", "a.parquet", "b.parquet", "--draws", "10"],
            "--draws: Input should be greater than or equal to 2000",
        ),
        (["metrics", "x.parquet", "--n-bins", "0"], "--n-bins: Input should be greater than or equal to 1"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and message in capsys.readouterr().err


# ------------------------------------------------------------------ benchmarks: one entry per benchmark
def _load_raw(tmp_path, raw: dict):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_params(path)


def test_benchmark_entries_of_the_shipped_file():
    """Each benchmark's source, rule and neutral role come from its one entry, in the file's order."""
    params = load_params(ROOT / "params.yaml")
    gender = ["winobias", "winogender", "genderlex", "genderlex_person", "genderlex_someone"]
    identity = ["crows_pairs", "crows_pairs_shared", "winoqueer", "winoqueer_shared"]
    synth = ["synthbias_type2", "synthbias_type1", "synthbias_referent"]
    assert list(params.benchmarks) == gender + identity + synth
    crows, wq = "data/crows_pairs/crows_pairs_anonymized.csv", "data/winoqueer/winoqueer_benchmark.csv"
    assert {b: e.source for b, e in params.benchmarks.items() if e.imported} == dict(
        zip(identity, [crows, crows, wq, wq], strict=True)
    )
    assert params.rules == dict.fromkeys(gender + synth, "target") | dict(
        zip(identity, ["sentence", "shared"] * 2, strict=True)
    )
    assert {b: e.synthbias for b, e in params.benchmarks.items() if e.source and not e.imported} == dict(
        zip(synth, ["type2", "type1", "referent"], strict=True)
    )
    # the same pairs under two rules: the second entry of each source is its variant (SynthBias's types are not)
    assert data_layout.rule_variants(params) == {
        "crows_pairs": ["crows_pairs_shared"],
        "winoqueer": ["winoqueer_shared"],
    }
    assert {b: e.cluster for b, e in params.benchmarks.items() if e.cluster != "pair"} == dict.fromkeys(
        ["winoqueer", "winoqueer_shared"], "template"
    )
    assert params.neutral_benchmarks == ["genderlex", "genderlex_person", "genderlex_someone"]


def test_a_new_layout_file_loads(tmp_path):
    """An entry may be empty (all defaults: data/benchmarks/<name>.csv under extract.rule); its rule replaces
    extract.rule for that benchmark only; a file without neutral_of has no neutral comparison."""
    text = (
        "benchmarks:\n"
        "  mine:\n"  # an empty entry: YAML null, the defaults
        "  theirs: {}\n"
        "  crowsish:\n"
        "    source: data/crowsish.csv\n"
        "    rule: target\n"
        "models: [m]\n"
        "registry: {m: {source: org/m}}\n"
        "extract: {rule: sentence}\n"
        "ablate: {special_tokens: {}}\n"
    )
    path = tmp_path / "params.yaml"
    path.write_text(text)
    params = load_params(path)
    assert list(params.benchmarks) == ["mine", "theirs", "crowsish"]
    assert params.rules == {"mine": "sentence", "theirs": "sentence", "crowsish": "target"}
    assert [b for b, e in params.benchmarks.items() if e.imported] == ["crowsish"]
    assert params.neutral_benchmarks == []


def test_neutral_benchmarks_follow_the_entries(tmp_path):
    """The benchmark the rewrites name comes first, then the rewrites in the file's order, wherever it stands."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["benchmarks"] = {"a": {"neutral_of": "c"}, "b": {}, "c": {}, "d": {"neutral_of": "c"}}
    assert _load_raw(tmp_path, raw).neutral_benchmarks == ["c", "a", "d"]


def _entry(name, **fields):
    return lambda r: r["benchmarks"].setdefault(name, {}).update(fields)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (_entry("crows_pairs", rules="target"), "benchmarks.crows_pairs.rules: unknown key (did you mean 'rule'?)"),
        (_entry("genderlex", neutral="x"), "benchmarks.genderlex.neutral: unknown key (did you mean 'neutral_of'?)"),
        (_entry("winobias", sorce="x.csv"), "benchmarks.winobias.sorce: unknown key (did you mean 'source'?)"),
        (
            _entry("winoqueer", rule="words"),
            "benchmarks.winoqueer.rule: Input should be 'target', 'sentence', 'mean' or 'shared'",
        ),
        (_entry("winoqueer", source=""), "benchmarks.winoqueer.source: must be the path of a CrowS-Pairs-format CSV"),
        (
            _entry("winobias", source="data/benchmarks/winobias.csv"),
            "benchmarks.winobias.source is data/benchmarks/winobias.csv, the gece CSV a benchmark without source",
        ),
        (lambda r: r["benchmarks"].update({"Bad/Name": {}}), "benchmarks key 'Bad/Name'"),
        (lambda r: r.update(benchmarks={}), "benchmarks: Dictionary should have at least 1 item"),
        (
            lambda r: r.update(benchmarks=list(r["benchmarks"])),
            "benchmarks: a list of names is no longer accepted: benchmarks is a mapping, one entry per benchmark",
        ),
        # a neutral entry naming an unknown benchmark, itself, or another rewrite; rewrites of two benchmarks
        (
            _entry("genderlex_person", neutral_of="genderlex_nobody"),
            "benchmarks.genderlex_person.neutral_of names 'genderlex_nobody', which has no entry under benchmarks; "
            "add an entry for 'genderlex_nobody' or fix the name",
        ),
        (
            _entry("genderlex_person", neutral_of="genderlex_person"),
            "benchmarks.genderlex_person.neutral_of names 'genderlex_person' itself",
        ),
        (
            _entry("genderlex_someone", neutral_of="genderlex_person"),
            "benchmarks.genderlex_someone.neutral_of names 'genderlex_person', itself a rewrite "
            "(benchmarks.genderlex_person.neutral_of: genderlex)",
        ),
        (
            _entry("winogender_person", neutral_of="winogender"),
            "the rewrites name 2 benchmarks (benchmarks.genderlex_person.neutral_of: genderlex, "
            "benchmarks.genderlex_someone.neutral_of: genderlex, benchmarks.winogender_person.neutral_of: winogender)",
        ),
        (lambda r: r["benchmarks"]["genderlex_person"].update(neutral_of="Bad/Name"), "neutral_of: 'Bad/Name' is not"),
        # the keys of the layout before the entries: where each one went
        (
            lambda r: r.update(imports={"crows_pairs": "x.csv"}),
            "imports: moved into the benchmark entries: benchmarks.<b>.source",
        ),
        (
            lambda r: r["extract"].update(rules={"crows_pairs": "sentence"}),
            "extract.rules: moved into the benchmark entries: benchmarks.<b>.rule",
        ),
        (
            lambda r: r["ablate"].update(neutral=["genderlex", "genderlex_person"]),
            "ablate.neutral: moved into the benchmark entries: benchmarks.<rewrite>.neutral_of",
        ),
    ],
)
def test_bad_benchmark_entries_are_named(tmp_path, mutate, expected):
    path = _write(tmp_path, mutate)
    with pytest.raises(GeceError) as e:
        load_params(path)
    assert expected in str(e.value), str(e.value)
    assert "README.md" in str(e.value)


def test_dvc_stages_come_from_the_benchmark_entries():
    """dvc.yaml's matrix stages iterate the names of the benchmark mapping (DVC's matrix enumerates a mapping's
    keys: not documented, so checked here with DVC's own resolver), each prepare stage depends on its own entry,
    and the neutral stage's deps are the metrics of the benchmarks the entries compare (DVC cannot derive them)."""
    from dvc.parsing import DataResolver
    from dvc.repo import Repo

    params = load_params(ROOT / "params.yaml")
    dvc_yaml = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    with Repo(str(ROOT)) as repo:
        resolver = DataResolver(repo, str(ROOT), dvc_yaml)
        names = resolver.get_keys()
        stage = {n: resolver.resolve_one(n)[n] for n in ("prepare@crows_pairs", f"neutral@{params.models[0]}")}
    assert [n for n in names if n.startswith("prepare@")] == [f"prepare@{b}" for b in params.benchmarks]
    assert [n for n in names if n.startswith("score@")] == [
        f"score@{b}-{m}" for b in params.benchmarks for m in params.models
    ]
    assert stage["prepare@crows_pairs"]["params"] == ["benchmarks.crows_pairs", "prepare"]
    assert stage[f"neutral@{params.models[0]}"]["params"] == ["benchmarks"]
    deps = dvc_yaml["stages"]["neutral"]["deps"]
    metrics = [d.split("/")[2] for d in deps if d.startswith("reports/metrics/")]
    assert metrics == params.neutral_benchmarks, "dvc.yaml's neutral stage deps: one metrics file per compared one"


def test_help_placeholders_name_keys_of_params():
    """Every ``{params:key}`` of a command's help names a key of the validated params (a removed key would show
    as null)."""
    from gece.cli_help import PARAM

    values = load_params(ROOT / "params.yaml").model_dump(mode="json")
    missing = []
    for path in sorted((ROOT / "src" / "gece").rglob("*.py")):
        for key in PARAM.findall(path.read_text(encoding="utf-8")):
            value: object = values
            for part in key.split("."):
                value = value.get(part, KeyError) if isinstance(value, dict) else KeyError
            if value is KeyError and key != "section.key":  # cli_help.py's docstring example
                missing.append(f"{path.relative_to(ROOT)}: {{params:{key}}}")
    assert not missing, missing


def test_neutral_without_rewrites_is_refused(tmp_path, monkeypatch, capsys):
    """No entry with neutral_of: the neutral stage has nothing to compare, and says how to mark a rewrite."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "params.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "benchmarks": {"winobias": {}},
                "models": ["m"],
                "registry": {"m": {"source": "org/m"}},
                "ablate": {"special_tokens": {}},
            }
        )
    )
    assert main(["neutral", "--model", "m", "--out", "n.json"]) == 2
    err = capsys.readouterr().err
    assert "no benchmark of params.yaml is a gender-neutral rewrite" in err and "neutral_of: genderlex" in err
    assert not (tmp_path / "n.json").exists()


def test_the_top_level_keys_are_the_sections_of_params():
    """params_file.SECTIONS, which every command checks, are the fields of the whole file's model."""
    from gece.io.settings.params import Params
    from gece.io.settings.params_file import SECTIONS

    assert tuple(Params.model_fields) == SECTIONS


def test_a_command_that_reads_one_section_checks_the_top_level_keys(tmp_path):
    """gece score validates extract alone: a misspelled section is an error there too, a misspelled key of
    another section is an error for every command that reads the whole file (the other stages, gece validate)."""
    from gece.io.settings.params_file import load_sections
    from gece.pipeline.score import Settings

    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({**raw, "metrcs": {}}), encoding="utf-8")
    for load in (lambda p: load_sections(p, Settings), load_params):
        with pytest.raises(GeceError) as e:
            load(path)
        assert e.value.problems == ["metrcs: unknown key (did you mean 'metrics'?)"]
    path.write_text(yaml.safe_dump({**raw, "metrics": {**raw.get("metrics", {}), "nbins": 3}}), encoding="utf-8")
    assert load_sections(path, Settings).extract == load_params(ROOT / "params.yaml").extract
    with pytest.raises(GeceError) as e:
        load_params(path)
    assert e.value.problems == ["metrics.nbins: unknown key (did you mean 'n_bins'?)"]
    path.write_text(
        yaml.safe_dump({**raw, "extract": {**raw.get("extract", {}), "word_porb": "max"}}), encoding="utf-8"
    )
    with pytest.raises(GeceError) as e:
        load_sections(path, Settings)
    assert e.value.problems == ["extract.word_porb: unknown key (did you mean 'word_prob'?)"]
