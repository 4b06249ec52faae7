"""Scoring real language models: model sources and loading (:mod:`gece.scoring.models`), the
exact attention (:mod:`gece.scoring.attention`) and the fast scoring engine
(:mod:`gece.scoring.engine`). SPEC §3 defines what is computed.

Numerics. Two environment defaults are set when :mod:`gece` is imported, before torch loads:

- ``MKL_CBWR=AUTO,STRICT``: Intel MKL (torch's CPU BLAS) in its strict conditional numerical
  reproducibility mode. By default MKL picks different float32 GEMM kernels for different
  numbers of rows, so a sentence scored alone and inside a batch differ by ~1e-5 in
  log-probability; in strict mode every row's result is bit-identical whatever the batch, at
  no measured cost. MKL reads the variable on its first call;
  :func:`gece.scoring.engine.blas_is_batch_invariant` checks that it took effect.
- ``OMP_WAIT_POLICY=PASSIVE``: idle OpenMP threads sleep instead of spinning. On a machine
  whose cores are shared with other jobs, spinning threads made a forward pass up to 5x slower
  with two threads than with one (measured on the two-core development machine).
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
