"""A benchmark's resampling units for the paired comparisons (the compare stage, the prompt ablation): the pair ids
compared -> each pair's cluster key and the counts reported beside n (docs/metrics.md, "Repeated pairs and
clusters")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gece.pipeline import run_report
from gece.stats import ablation


def describer(pairs: pd.DataFrame | None) -> ablation.Describe | None:
    """The pair ids compared -> their cluster keys and counts (``n_distinct``, ``n_clusters``), from the prepared
    ``pairs`` indexed by pair_id; None without them (pairs are the unit, no counts)."""
    if pairs is None:
        return None

    def describe(ids: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
        mine = pairs.loc[ids]
        return mine["cluster"].to_numpy(object), run_report.pair_counts(mine).iloc[0].astype(int).to_dict()

    return describe
