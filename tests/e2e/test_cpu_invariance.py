"""The same inputs give the same bytes on every x86-64 machine, shown on one machine.

What differs between two CPUs is which kernels the numeric libraries pick (MKL's per-CPU GEMM code,
OpenBLAS's core type, torch's and numpy's SIMD level), how many threads they run and, through the
batch size and the memory a machine has free, the shapes they are given. Each of those is varied here
through the settings the libraries themselves read, and the score file (two models), the metrics and
the calibration must keep every byte. MKL_CBWR=AUTO is MKL's default mode, the one in which AMD CPUs
made different bits for different batch sizes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import DATA

pytestmark = pytest.mark.slow

GECE = str(Path(sys.executable).with_name("gece"))
PAIRS = "40"


def _numpy_avx512_targets() -> str:
    """numpy's dispatch targets that run AVX-512 code, named as this numpy names them (AVX512F, AVX512_SKX, ...
    before numpy 2.4; X86_V4, AVX512_ICL, AVX512_SPR since): disabling names numpy does not dispatch on
    disables nothing, silently."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    return ",".join(t for t in __cpu_dispatch__ if "AVX512" in t or t == "X86_V4")


NO_AVX512 = _numpy_avx512_targets()
# name: (environment, extra arguments, numpy loaded before gece's command); factors are paired to keep the test
# short. The float64 products run in numpy's OpenBLAS when batches run side by side or on one thread (with
# the kernels OpenBLAS picks for this CPU under `gece extract`, or Haswell's when numpy loaded first), and
# in torch's MKL when one batch has all the threads
CPU_VARIANTS = {
    "as is": ({}, [], False),
    "OpenBLAS's Haswell kernels, batch of 7": ({"OPENBLAS_CORETYPE": "Haswell"}, ["--batch-size", "7"], True),
    "one thread, batch of 1": ({"GECE_THREADS": "1"}, ["--batch-size", "1"], False),
    "MKL default mode (as on AMD), one batch on all threads": ({"MKL_CBWR": "AUTO"}, ["--batch-size", "64"], False),
    "MKL AVX2 code, one batch on all threads": (
        {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "MKL_CBWR": "AUTO"},
        ["--batch-size", "64"],
        False,
    ),
    "torch AVX-512 kernels asked for": ({"ATEN_CPU_CAPABILITY": "avx512"}, [], False),
}
NUMPY_FIRST = "import sys, numpy; from gece.cli import main; sys.exit(main())"


def _gece(args: list[str], env: dict[str, str], numpy_first: bool = False) -> None:
    cmd = [sys.executable, "-c", NUMPY_FIRST] if numpy_first else [GECE]
    res = subprocess.run(
        [*cmd, "-q", *args],
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]


def _digest(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cpu") / "winobias.parquet"
    _gece(["prepare", str(DATA / "benchmarks" / "winobias.csv"), str(out)], {})
    return out


@pytest.mark.parametrize(
    "model,variants",
    [
        ("smollm2-135m", list(CPU_VARIANTS)),
        (
            "gemma-3-270m",
            ["as is", "MKL default mode (as on AMD), one batch on all threads"],
        ),  # sliding window, 262k vocab
    ],
)
def test_score_files_are_the_same_bytes_whatever_the_cpu_settings(prepared, tmp_path, model, variants):
    digests = {}
    for name in variants:
        env, extra, numpy_first = CPU_VARIANTS[name]
        out = tmp_path / name.replace(" ", "_").replace("'", "") / f"{model}.parquet"
        _gece(["extract", "--model", model, "--limit", PAIRS, *extra, str(prepared), str(out)], env, numpy_first)
        digests[name] = _digest(out)
    assert len(set(digests.values())) == 1, digests


def test_metrics_and_calibration_are_the_same_bytes_whatever_the_cpu_settings(tmp_path):
    from gece.pipeline import prepare as prepare_stage

    from ..conftest import write_reference

    prep = tmp_path / "genderlex.parquet"
    prepare_stage.prepare(DATA / "benchmarks" / "genderlex.csv", prep)
    scores = tmp_path / "paper-gpt-j-6b.parquet"
    write_reference(prep, DATA / "reference" / "genderlex" / "gpt-j-6b.csv", scores, "paper-gpt-j-6b")
    variants = {
        "as is": {},
        "numpy without AVX-512": {"NPY_DISABLE_CPU_FEATURES": NO_AVX512},
        "BLAS threads asked for": {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"},
    }
    digests = {}
    for name, env in variants.items():
        d = tmp_path / name.replace(" ", "_")
        d.mkdir()
        _gece(["metrics", str(scores), "--out", str(d / "m.json"), "--bins-out", str(d / "mb.json")], env)
        _gece(
            [
                "calibrate",
                str(scores),
                "--out",
                str(d / "c.json"),
                "--scores-out",
                str(d / "c.parquet"),
                "--bins-out",
                str(d / "cb.json"),
            ],
            env,
        )
        digests[name] = _digest(*(d / f for f in ("m.json", "mb.json", "c.json", "c.parquet", "cb.json")))
    assert len(set(digests.values())) == 1, digests


def test_gece_pins_the_cpu_paths_it_can():
    code = (
        "import gece, numpy, torch, threadpoolctl; torch.zeros(2).sum(); "
        "print(torch.backends.cpu.get_cpu_capability(), "
        "*sorted({(i['internal_api'], i.get('architecture'), i['num_threads']) for i in threadpoolctl.threadpool_info()"
        " if i['internal_api'] == 'openblas'}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY")},
    )
    assert res.stdout.split()[0] == "DEFAULT"
    assert "('openblas', 'Haswell', 1)" in res.stdout


def test_extract_lets_openblas_pick_its_kernels_and_no_other_command_does(monkeypatch):
    core = (
        "import numpy, threadpoolctl; print(*sorted({i.get('architecture') for i in "
        "threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas'}))"
    )  # OpenBLAS's kernels

    def run(code: str, env: dict[str, str]) -> list[str]:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        ).stdout.split()

    bare = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    own = run(core, bare)  # what OpenBLAS picks for this CPU, without gece
    assert run(f"import gece; print(gece.native_blas()); {core}", {**bare, "OPENBLAS_CORETYPE": "Haswell"}) == [
        "True",
        *own,
    ]
    assert run(f"import gece; {core}", bare) == ["Haswell"]  # what every other command runs

    import gece.cli

    called = []
    monkeypatch.setattr(gece.cli, "native_blas", lambda: called.append(True))
    for command in gece.cli.COMMANDS:
        with pytest.raises(SystemExit):
            gece.cli.main([command, "--help"])
        assert called == ([True] if command in gece.cli.NATIVE_BLAS else []), command
        called.clear()
    assert {"extract"} == gece.cli.NATIVE_BLAS
