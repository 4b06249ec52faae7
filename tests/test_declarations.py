"""Every command knows what it reads (issue 49, item 2): over the CLI table, each declared input of each command
given as each of its outputs is refused (exit 2) before anything is written, and every input stays
byte-identical. That the declarations name what the commands really read is checked by tests/audit.py while
every in-process CLI test runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from gece import cli
from gece.cmd.command import Output, declared_inputs, declared_outputs
from gece.io.paths import layout

from .refusals import refusal
from .test_paired import MODEL, tree  # noqa: F401  (tree: the fixture)

SCORES = str(layout.scores_path("winobias", MODEL))
# each command with outputs -> its arguments, an output written {label} (a fresh path, or the input under test)
CASES: dict[str, list[str]] = {
    "prepare": ["prepare", "data/benchmarks/winobias.csv", "{OUT}", "--annotations", "{--annotations}"],
    "extract": [
        "extract",
        "artifacts/prepared/winobias.parquet",
        "{OUT}",
        "--meta-out",
        "{--meta-out}",
        "--model",
        "smollm2-135m",
    ],
    "score": ["score", "--benchmark", "winobias", "--model", MODEL, "--out", "{--out}"],
    "metrics": ["metrics", SCORES, "--out", "{--out}", "--bins-out", "{--bins-out}"],
    "calibrate": [
        "calibrate",
        SCORES,
        "--out",
        "{--out}",
        "--scores-out",
        "{--scores-out}",
        "--bins-out",
        "{--bins-out}",
    ],
    "ablate": [
        "ablate",
        SCORES,
        "--sample-size-out",
        "{--sample-size-out}",
        "--binning-out",
        "{--binning-out}",
        "--figure-out",
        "{--figure-out}",
    ],
    "neutral": ["neutral", "--model", MODEL, "--out", "{--out}"],
    "special-tokens": ["special-tokens", "--model", MODEL, "--out", "{--out}"],
    "prompts": ["prompts", "--model", MODEL, "--out", "{--out}"],
    "compare": ["compare", SCORES, SCORES, "--out", "{--out}", "--markdown-out", "{--markdown-out}"],
    "summary": ["summary", "--out", "{--out}"],
    "import": ["import", "data/crows_pairs/crows_pairs_anonymized.csv", "{OUT}", "--annotations", "{--annotations}"],
    "try": ["try", "smollm2-135m", "--out", "{--out}"],
    "lmeval-import": ["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias", "--out", "{--out}"],
}


def parsed(argv: list[str]):
    return cli.build_parser(argv).parse_args(argv)


def outputs_of(command: str) -> dict[str, str]:
    """A command's output options (label -> dest), as its module declares them."""
    parser = cli.build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return sub.get_default("outputs") or {}


def test_every_command_with_outputs_is_in_the_table():
    with_outputs = {c for c in cli.COMMANDS if outputs_of(c)}
    assert with_outputs == set(CASES)
    for command, argv in CASES.items():
        assert {a[1:-1] for a in argv if a.startswith("{")} == set(outputs_of(command)), command


def fingerprint(paths: list[Path]) -> dict[str, str]:
    """sha256 of every file of ``paths`` (those of a directory, recursively)."""
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else [])]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


@refusal("E-OUT-NODE", readers=("try", "lmeval-import", "score", "import"))
def test_every_declared_input_given_as_every_output_is_refused(tree, capsys):  # noqa: F811
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tree / "lm" / "model").mkdir(parents=True)
    assert cli.main(["-q", "score", "--benchmark", "winobias", "--model", MODEL]) == 0
    checked = 0
    for command, template in CASES.items():
        fresh = {a: str(tree / "fresh" / f"{command}{i}.out") for i, a in enumerate(template) if a.startswith("{")}
        inputs = declared_inputs(parsed([fresh.get(a, a) for a in template]))
        assert inputs, command
        before = fingerprint(inputs)
        for given in inputs:
            for label in fresh:
                argv = [str(given) if a == label else fresh.get(a, a) for a in template]
                if given not in declared_inputs(parsed(argv)):  # derived from that output (extract's shards)
                    continue
                code = cli.main(argv)
                err = capsys.readouterr().err
                assert code == 2, (argv, err)
                assert str(given) in err and ("the input" in err or "is a directory" in err), (argv, err)
                assert fingerprint(inputs) == before, argv
                assert not (tree / "fresh").exists(), argv  # nothing written
                checked += 1
    assert checked >= 50


def test_an_output_inside_or_around_an_input_is_refused(tree, capsys):  # noqa: F811
    """A directory the command reads (lm-eval's output directory) can neither hold nor be the output."""
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tree / "lm" / "model").mkdir(parents=True)
    samples = tree / "lm" / "model" / "samples_gece_winobias.jsonl"
    samples.write_text("{}\n")
    base = ["lmeval-import", "--model", "smol-lm", "--benchmark", "winobias", "--out"]
    for out, how in ((samples, "is inside"), (tree / "lm" / "new.parquet", "is inside")):
        assert cli.main([*base, str(out)]) == 2
        assert f"{how} the input lm" in capsys.readouterr().err
    assert samples.read_text() == "{}\n"


def test_the_declared_outputs_include_the_meta_files():
    args = parsed(["score", "--benchmark", "winobias", "--model", "m", "--out", "x.parquet"])
    assert declared_outputs(args)["the meta file of --out"] == Output(Path("x.meta.json"))


@pytest.mark.parametrize("argv", [["validate", "data/benchmarks/winobias.csv"], ["stage-deps", "--check"]])
def test_commands_without_outputs_still_declare_what_they_read(argv):
    assert len(declared_inputs(parsed(argv))) >= 2


# commands that write nothing of their own (a report printed, or a path)
READ_ONLY = {"validate", "diff", "exp-summary", "lmeval-model"}


def test_every_command_that_writes_declares_it():
    """Each command module declares what it writes (an ``outputs`` option or ``writes(args)``): the one
    declaration the CLI checks, the audit holds the command to (tests/audit.py) and a stage's outputs come from."""
    import importlib

    for name, module in cli.COMMANDS.items():
        declares = bool(outputs_of(name)) or hasattr(importlib.import_module(module), "writes")
        assert declares == (name not in READ_ONLY), name


@refusal("E-OUT-NODE", readers=("lmeval-export",))
def test_a_folder_output_inside_what_the_command_reads_is_refused(tree, capsys):  # noqa: F811
    """lmeval-export's task folders may not sit inside the model directory it loads; nothing is written."""
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["registry"]["local"] = {"source": "models/local"}
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tree / "models" / "local").mkdir(parents=True)
    (tree / "models" / "local" / "config.json").write_text("{}")
    argv = ["lmeval-export", "--model", "local", "--benchmark", "winobias", "--out"]
    assert cli.main([*argv, "models/local/tasks"]) == 2
    err = capsys.readouterr().err
    assert "--out (its task gece_winobias) models/local/tasks/gece_winobias is inside the input models/local" in err
    assert sorted(p.name for p in (tree / "models" / "local").iterdir()) == ["config.json"]
