"""A run's metrics report and the pair counts beside it: the report (``MetricsReport``) that the metrics and calibrate
stages write for a run's scores, and the distinct pairs and clusters that the metrics, compare and groups reports
count beside n. Which runs a benchmark has and their scores are :mod:`gece.pipeline.runs`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gece.io.schemas.metric_reports import MetricsReport
from gece.io.settings.sections import MetricsParams
from gece.stats import metrics


def metrics_report(
    p: np.ndarray,
    y: np.ndarray,
    gender_more: np.ndarray,
    gender_less: np.ndarray,
    settings: MetricsParams,
    clusters: np.ndarray | None = None,
    gap_draws: dict | None = None,
) -> dict:
    """The metrics report (``MetricsReport``) of scores p against y with the ``metrics`` settings; ``clusters``
    (each pair's cluster key) makes the intervals and tests resample clusters; ``gap_draws`` is filled with the
    gender gaps' draws (:func:`gece.stats.metrics.summarize`)."""
    report = metrics.summarize(
        p,
        y,
        gender_more,
        gender_less,
        n_bins=settings.n_bins,
        binning=settings.binning,
        draws=settings.bootstrap,
        seed=settings.seed,
        level=settings.ci,
        clusters=clusters,
        gap_draws=gap_draws,
    )
    return MetricsReport.model_validate(report).model_dump()


def pair_counts(rows: pd.DataFrame, codes: np.ndarray | None = None) -> pd.DataFrame:
    """Distinct (sent_more, sent_less) pairs and clusters among prepared ``rows`` (columns sent_more, sent_less,
    cluster), per value of ``codes`` (one integer per row; None: all rows as group 0): a frame indexed by the code
    with the columns ``n_distinct`` and ``n_clusters``. The one count of "distinct" and "clusters" that the metrics
    and groups reports give beside n."""
    keyed = rows[["sent_more", "sent_less", "cluster"]].assign(
        _code=np.zeros(len(rows), np.int64) if codes is None else codes
    )
    return pd.DataFrame(
        {
            "n_distinct": keyed.drop_duplicates(["_code", "sent_more", "sent_less"]).groupby("_code").size(),
            "n_clusters": keyed.drop_duplicates(["_code", "cluster"]).groupby("_code").size(),
        }
    )
