"""gece: calibration of language-model confidence against human judgements of gender bias."""

import os

__version__ = "0.1.0"

# torch's CPU kernels read these when they load, so they are set before anything imports torch
# (defaults only: the environment wins). See gece.scoring for why.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")  # MKL GEMM results independent of the batch
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine
