"""The score files gece computed in a tree, and the log-probabilities in them that are above 0 (a "probability"
above 1). The authors' released scores (data/reference/, runs ``paper-<model>``) are not score files of gece's:
they carry the authors' sums, which exceed 1 on a few pairs (docs/metrics.md, "Scoring rules")."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def logprobs_above_zero(root: Path) -> tuple[int, list[str]]:
    """(score files read, ``<file> row <i>: logprob_<side> = <value>`` for each value above 0) under
    ``root/artifacts/scores``."""
    files = sorted((root / "artifacts" / "scores").glob("*/*.parquet"))
    bad = []
    for path in files:
        table = pq.read_table(path, columns=["logprob_more", "logprob_less"]).to_pydict()
        for side in ("more", "less"):
            bad += [
                f"{path.relative_to(root)} row {i}: logprob_{side} = {v!r}"
                for i, v in enumerate(table[f"logprob_{side}"], start=1)
                if v > 0
            ]
    return len(files), bad
