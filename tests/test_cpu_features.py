"""gece pins numpy's dispatch: a gece process runs none of numpy's AVX-512 code (docs/numerics.md), so a CPU with
AVX-512 gives the same bytes as one without."""

from __future__ import annotations

import os
import subprocess
import sys

import gece

PROBE = (
    "import gece, numpy\n"
    "from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__\n"
    "print(','.join(t for t in __cpu_dispatch__ if __cpu_features__.get(t)))\n"
)


def _enabled_targets(env: dict[str, str]) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return set(filter(None, out.stdout.strip().split(",")))


def test_numpy_runs_no_avx512_target_under_gece():
    env = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    assert not _enabled_targets(env) & set(gece.NUMPY_AVX512)


def test_features_a_user_disabled_stay_disabled():
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES="X86_V3")
    assert not _enabled_targets(env) & {"X86_V3", *gece.NUMPY_AVX512}
