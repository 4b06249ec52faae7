"""Every reader of every command, with hostile file contents (issue 49, item 6): never a traceback or a hang.

tests/test_cli_fuzz.py drives every option; this drives the bytes of every file a command reads. The files are
taken from the commands' own declarations (``gece.cmd.command.declared_inputs``, the same list tests/audit.py checks
against what the commands really open), expanded to the files below a declared directory. Each example
replaces one of them with hostile bytes (empty, truncated, garbage, not UTF-8, a NUL byte, a number of 100,000
digits, JSON nested 20,000 deep, a byte flipped in the middle), runs the command in-process (model loads and
external commands stop it, as in the option fuzz) and restores the file. A command passes when it exits 0, or
exits 2 naming the file (or with the message it gives on the intact files: the file was not reached), within
:data:`TIMEOUT` seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gece import cli
from gece.cmd.command import declared_inputs

from .test_cli_fuzz import Reached, hooks  # noqa: F401  (hooks: the fixture)
from .test_declarations import CASES
from .test_paired import MODEL, tree  # noqa: F401  (tree: the fixture)

EXAMPLES = 6  # per command: about 60 s for all of them
TIMEOUT = 20  # seconds a command may take on one hostile file before it counts as a hang
DEEP = 20_000  # past Python's recursion limit and its 4,300 digits of an int
HOSTILE = (
    "empty",
    "truncated",
    "garbage",
    "not utf-8",
    "nul byte",
    "huge number",
    "deep json",
    "flipped byte",
)
COMMANDS = {**CASES, "validate": ["validate", "data/benchmarks/winobias.csv"]}


def hostile(kind: str, original: bytes, cut: float, seed: bytes) -> bytes:
    """``original`` made hostile: ``cut`` (0..1) says where to truncate or flip, ``seed`` the garbage."""
    at = int(len(original) * cut)
    return {
        "empty": lambda: b"",
        "truncated": lambda: original[:at],
        "garbage": lambda: seed * 64,
        "not utf-8": lambda: original[:at] + b"\xff\xfe\xc3(" + original[at:],
        "nul byte": lambda: original[:at] + b"\x00" + original[at:],
        "huge number": lambda: b'{"x": ' + b"9" * DEEP + b"}\n",
        "deep json": lambda: b"[" * DEEP + b"]" * DEEP,
        "flipped byte": lambda: original[:at] + bytes([original[at] ^ 0xFF]) + original[at + 1 :] if original else b"",
    }[kind]()


def readers(argv: list[str]) -> list[Path]:
    """The files a command line reads, by its declaration: each declared file, the files below a declared
    directory (the first 5 of each), params.yaml first."""
    files = []
    for p in declared_inputs(cli.build_parser(argv).parse_args(argv)):
        files += [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())[:5] if p.is_dir() else []
    return list(dict.fromkeys(files))


class Hang(Exception):
    """A command ran past TIMEOUT seconds."""


def _alarm(signum, frame):
    raise Hang


@pytest.fixture
def lm_tree(tree):  # noqa: F811
    """``tree`` with a score file of the fake model and an lm-eval run of it (registry entry smol-lm), and a copy
    of the data snapshot instead of ``tree``'s link to it: the examples overwrite the files they read, and the
    repository's own files are read by the tests running beside this one."""
    from .test_lmeval import good_samples, write_samples

    data = tree / "data"
    source = data.resolve()
    data.unlink()
    shutil.copytree(source, data, ignore=shutil.ignore_patterns("synthbias"))

    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["registry"]["smol-lm"] = {"source": "lmeval:lm"}
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    write_samples(tree, good_samples(6))
    assert cli.main(["-q", "score", "--benchmark", "winobias", "--model", MODEL]) == 0
    return tree


def attempt(argv: list[str], path: Path, data: bytes, intact_err: str | None, capsys) -> None:
    """Run ``gece argv`` with ``path`` holding ``data`` (restored after): exit 0, or exit 2 naming the file (or
    with ``intact_err``, the message of the intact files: the file was not reached); no traceback, no hang."""
    assert Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(Path.cwd()))), f"{path}: not the test's"
    original = path.read_bytes()
    path.write_bytes(data)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT)
    try:
        code = cli.main(["-q", *argv])
    except Reached:
        code = 0
    except SystemExit as e:
        code = e.code
    except Hang:
        code = "a hang"
    except Exception as e:
        raise AssertionError(f"gece {' '.join(argv)} with {data[:40]!r} in {path}: {type(e).__name__}: {e}") from e
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        path.write_bytes(original)
    err = capsys.readouterr().err
    shown = f"gece {' '.join(argv)} with {data[:40]!r}... in {path} -> {code}\n{err[-2000:]}"
    assert code in (0, 2), shown
    assert "Traceback" not in err, shown
    if code == 2 and err != intact_err:
        assert path.name in err, shown


def intact_error(name: str, argv: list[str], capsys) -> str | None:
    """The message of the command on the intact files when it exits 2 there (None when it does not)."""
    capsys.readouterr()
    intact = cli.main(["-q", *argv]) if name not in ("try", "extract") else 0  # their models stop at the hooks
    return capsys.readouterr().err if intact == 2 else None


def command_line(name: str, root: Path) -> list[str]:
    """The command line of ``name`` in :data:`COMMANDS`, its outputs under ``root/fresh``."""
    return [str(root / "fresh" / a[1:-1].strip("-")) if a.startswith("{") else a for a in COMMANDS[name]]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_reader_with_hostile_bytes(name, lm_tree, hooks, capsys):  # noqa: F811
    argv = command_line(name, lm_tree)
    files = readers(argv)
    assert files, name
    intact_err = intact_error(name, argv, capsys)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )
    @given(
        which=st.integers(0, len(files) - 1),
        kind=st.sampled_from(HOSTILE),
        cut=st.floats(0, 0.99),
        seed=st.binary(min_size=1, max_size=16),
    )
    def check(which, kind, cut, seed):
        path = files[which]
        attempt(argv, path, hostile(kind, path.read_bytes(), cut, seed), intact_err, capsys)

    check()


@pytest.mark.filterwarnings("ignore")
def test_every_hostile_kind_in_every_lm_eval_file(lm_tree, hooks, capsys):  # noqa: F811
    """The newest reader, every kind in each of its files (not a sample): lm-eval's samples and results."""
    argv = command_line("lmeval-import", lm_tree)
    files = [f for f in readers(argv) if f.is_relative_to(lm_tree / "lm") or f.parent.name == "model"]
    assert len(files) == 2
    for path in files:
        for kind in HOSTILE:
            attempt(argv, path, hostile(kind, path.read_bytes(), 0.5, b"\x80garbage"), None, capsys)
