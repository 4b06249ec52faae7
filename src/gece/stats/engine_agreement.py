"""Engine agreement: one model scored twice (gece's exact engine and lm-eval, or two lm-eval settings).

For two runs on the pairs both score (:func:`gece.stats.ablation.paired`), with ``d = logprob_more −
logprob_less`` each pair's log-likelihood difference (``p = σ(d)`` for a one-target side):

- ``max_abs_lld_diff = max_i |d_a,i − d_b,i|``: the largest change of one pair's score;
- ``flips = #{i : (p_a,i > 0.5) ≠ (p_b,i > 0.5)}``: the pairs whose verdict (which sentence the model
  prefers) changes;
- ``diff = M(a) − M(b)`` with M the paper's ECE where the label y varies, or the stereotype share
  ``mean(p > 0.5)`` where every pair has the same label (CrowS-Pairs, WinoQueer: an ECE of one label is
  1 − mean p, no calibration; :mod:`gece.report.identity`), with its bias-corrected percentile interval and
  two-sided p-value from a paired bootstrap: both runs are resampled with the same indices (pairs, or the
  benchmark's clusters), the same draws as :func:`gece.stats.ablation.compare`'s.

Zero on all three means the engines agree on every conclusion the report draws from the pairs.
"""

from __future__ import annotations

import numpy as np

from gece.stats import metrics
from gece.stats.ablation import Run
from gece.stats.bootstrap import bootstrap
from gece.stats.intervals import bias_corrected_interval, bias_corrected_p
from gece.stats.metrics import Binning

# the metric compared -> the metrics kernel's key: ECE where y varies, the stereotype share where it is constant
MEASURED = {"ece": "ece", "stereotype_share": "pct_stereotype"}


def _difference(key: str, n_bins: int, binning: Binning, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    """``key`` of run a minus run b on the same (re)sampled pairs: arrays (B, n) -> {"diff": (B,)}."""
    a, b = (
        metrics.batch_metrics(
            arrays[f"p_{side}"], arrays["y"], arrays[f"pred_{side}"], arrays["true"], n_bins=n_bins, binning=binning
        )[key]
        for side in "ab"
    )
    return {"diff": a - b}


def agreement(
    a: Run,
    b: Run,
    lld_a: np.ndarray,
    lld_b: np.ndarray,
    draws: int,
    seed: int,
    level: float = 0.95,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    clusters: np.ndarray | None = None,
) -> dict:
    """The agreement of run ``a`` with run ``b`` (the same pairs in the same order, the same labels: as
    :func:`gece.stats.ablation.paired` returns them); ``lld_*`` each pair's log-likelihood difference in that
    order, ``clusters`` each pair's cluster key (None: pairs are the unit resampled)."""
    if len(a.pair_id) != len(b.pair_id) or not (a.pair_id == b.pair_id).all() or not (a.y == b.y).all():
        raise ValueError("agreement needs two runs on the same pairs, in the same order, with the same labels")
    name = "stereotype_share" if (a.y == a.y[0]).all() else "ece"
    key = MEASURED[name]
    arrays = {
        "p_a": a.p,
        "p_b": b.p,
        "y": a.y,
        "true": metrics.true_groups(a.y, a.gender_more, a.gender_less),
        "pred_a": metrics.predicted_groups(a.p, a.gender_more, a.gender_less),
        "pred_b": metrics.predicted_groups(b.p, b.gender_more, b.gender_less),
    }
    point = _difference(key, n_bins, binning, **arrays)["diff"][0]
    diff = float(point) if np.isfinite(point) else None
    drawn = bootstrap(_difference, arrays, draws, seed, clusters=clusters, key=key, n_bins=n_bins, binning=binning)
    lo, hi = bias_corrected_interval(drawn["diff"], diff, level)
    return {
        "n": len(a.pair_id),
        "max_abs_lld_diff": float(np.max(np.abs(np.asarray(lld_a) - np.asarray(lld_b)))),
        "flips": int(np.count_nonzero((a.p > 0.5) != (b.p > 0.5))),
        "metric": name,
        "diff": diff,
        "ci_low": lo,
        "ci_high": hi,
        "p_value": bias_corrected_p(drawn["diff"], diff),
    }
