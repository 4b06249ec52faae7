"""Scoring real language models: model sources and loading (:mod:`gece.scoring.models`), numerics
that give the same bits on every CPU (:mod:`gece.scoring.exact`), the attention built on them
(:mod:`gece.scoring.attention`) and the fast scoring engine (:mod:`gece.scoring.engine`).

Environment set when :mod:`gece` is imported, before torch loads:

- ``ATEN_CPU_CAPABILITY=default``: torch's portable CPU kernels instead of its AVX2/AVX-512 ones,
  whose results depend on the CPU and on where an element sits in a tensor (set unconditionally:
  gece's promise of identical bytes on every machine rests on it).
- ``OMP_WAIT_POLICY=PASSIVE`` (a default): idle OpenMP threads sleep instead of spinning. On a
  machine whose cores are shared with other jobs, spinning threads made a forward pass up to 5x
  slower with two threads than with one (measured on the two-core development machine).
"""
