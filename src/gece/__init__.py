"""gece: calibration of language-model confidence against human judgements of gender bias."""

import os
import sys

__version__ = "0.1.0"


def _cpu_has(*flags: str) -> bool:
    """True when /proc/cpuinfo lists every flag (False where there is no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            words = set(f.read().split())
    except OSError:
        return False
    return all(flag in words for flag in flags)


# The numeric libraries read these when they load or first run, so they are set before anything
# imports torch or numpy. They make every result the same bits on every x86-64 CPU; docs/numerics.md
# (and gece.scoring.exact) say why each is needed.
os.environ["ATEN_CPU_CAPABILITY"] = "default"  # torch's portable CPU kernels
os.environ["OPENBLAS_NUM_THREADS"] = "1"  # numpy/scipy's BLAS sums in one order whatever the core count
if _cpu_has("avx2", "fma"):  # every x86-64 CPU since 2013 (Intel) and 2015 (AMD)
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # the same BLAS kernels on Intel and AMD
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine
# numpy's AVX-512 code paths (its X86_V4 dispatch target and the AVX-512 extensions numpy 2.4 names) round some
# float64 functions (exp, log, ...) differently from its AVX2 ones: off, so a CPU with AVX-512 gives the bytes of one
# without. numpy ignores names this CPU lacks; names the user disabled already are kept.
NUMPY_AVX512 = ("X86_V4", "AVX512_ICL", "AVX512_SPR")
os.environ["NPY_DISABLE_CPU_FEATURES"] = " ".join(
    dict.fromkeys([*os.environ.get("NPY_DISABLE_CPU_FEATURES", "").replace(",", " ").split(), *NUMPY_AVX512])
)


def native_blas() -> bool:
    """Let OpenBLAS pick its kernels for this CPU (``OPENBLAS_CORETYPE`` dropped), in a process whose only
    OpenBLAS work is the float64 products of :mod:`gece.scoring.exact` (``gece extract``). Those are
    correctly rounded, so no kernel changes a bit of them, and on a CPU with AVX-512 OpenBLAS's own choice
    (SkylakeX) computes them about 1.7x faster than the Haswell kernels the other commands pin
    (docs/numerics.md). OpenBLAS reads the variable when numpy loads: True if it was not loaded yet."""
    if "numpy" in sys.modules:
        return False
    os.environ.pop("OPENBLAS_CORETYPE", None)
    return True
