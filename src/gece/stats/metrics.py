"""Calibration metrics for pair scores (docs/metrics.md): pure, vectorized numpy.

Notation: ``p`` is the normalized pair score, the model's confidence that the ``sent_more``
(male, in the shipped benchmarks) variant is the human-preferred one; ``y`` is 1 when it is.
For n pairs and M bins::

    pred    = 1[p > 0.5]            conf = max(p, 1 - p)            correct = 1[pred == y]

Bins are intervals (e_m, e_{m+1}], the lowest one closed at its lower end. Equal-width
edges are e_m = m / M (exactly the authors' ``a, b = m / M, (m + 1) / M``); equal-mass edges
are the linearly interpolated quantiles of the binned values (``np.quantile``, as in
scikit-learn's ``calibration_curve(strategy="quantile")``), so every bin holds about n / M
values. Empty bins contribute nothing.

Every kernel works on a batch: arrays of shape ``(B, n)`` give results of shape ``(B,)``,
which is how the bootstrap evaluates 1000 resamples in one call. The public functions take
1-D arrays and return a float, or ``None`` when the metric is undefined (no pairs, an
empty group); they never return NaN and never a silent 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from gece.catalog import metric_defs
from gece.catalog.metric_defs import FEMALE, GAPS, MALE
from gece.stats import estimators
from gece.stats.bootstrap import bootstrap
from gece.stats.gap import permutation_p
from gece.stats.intervals import bias_corrected_interval, bias_corrected_p

Binning = Literal["equal_width", "equal_mass"]
BINNINGS: tuple[Binning, ...] = ("equal_width", "equal_mass")

# group codes used by the batched kernels
G_MALE, G_FEMALE, G_OTHER, G_TIE = 0, 1, -1, -2


# --------------------------------------------------------------------------- binning
def equal_width_edges(n_bins: int) -> np.ndarray:
    """Edges e_m = m / M, m = 0..M (computed as the authors do, one division per edge).

    Parameters
    ----------
    n_bins : int
        Number of bins M, at least 1.

    Returns
    -------
    edges : ndarray of float64 of shape (n_bins + 1,)
        0, 1/M, ..., 1.
    """
    return np.arange(n_bins + 1, dtype=np.float64) / n_bins


def bin_edges(values: np.ndarray, n_bins: int, binning: Binning = "equal_width") -> np.ndarray:
    """The M + 1 bin edges for 1-D ``values``: e_m = m / M, or the m / M quantile of ``values``.

    Parameters
    ----------
    values : array-like of shape (n,)
        The values to bin (only read by ``"equal_mass"``).
    n_bins : int
        Number of bins M, at least 1.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Equal-width edges m / M, or the linearly interpolated m / M quantiles of ``values``
        (``np.quantile``); anything else raises ``ValueError``.

    Returns
    -------
    edges : ndarray of float64 of shape (n_bins + 1,)
        Non-decreasing edges; all NaN for ``"equal_mass"`` with no values.
    """
    if binning == "equal_width":
        return equal_width_edges(n_bins)
    if binning == "equal_mass":
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return np.full(n_bins + 1, np.nan)
        return np.quantile(values, np.arange(n_bins + 1) / n_bins)
    raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")


def _grouped_quantile_edges(values: np.ndarray, keys: np.ndarray, n_keys: int, n_bins: int) -> np.ndarray:
    """Linear-interpolation quantile edges per key: shape (n_keys, n_bins + 1), NaN for empty keys.

    ``values``/``keys`` are 1-D; e_m = v_(lo) + (h - lo)(v_(lo+1) - v_(lo)) with h = (c - 1) m / M
    over the sorted values v of the key (c of them), as ``np.quantile`` computes it.
    """
    if values.size == 0:
        return np.full((n_keys, n_bins + 1), np.nan)
    order = np.lexsort((values, keys))
    sv, sk = values[order], keys[order]
    counts = np.bincount(sk, minlength=n_keys)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    last = np.maximum(counts, 1) - 1
    h = last[:, None] * (np.arange(n_bins + 1) / n_bins)[None, :]
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, last[:, None])
    a = sv[np.minimum(starts[:, None] + lo, values.size - 1)]
    b = sv[np.minimum(starts[:, None] + hi, values.size - 1)]
    t = h - lo
    # numpy's lerp: a + (b - a) t below t = 1/2, b - (b - a)(1 - t) from there (bit-identical edges)
    edges = np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
    edges[counts == 0] = np.nan
    return edges


def _grouped_searchsorted(inner: np.ndarray, values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each value, how many of its key's inner edges are strictly below it (exact, no offsets).

    ``inner``: (n_keys, k) sorted rows; ``values``/``keys``: 1-D. Equivalent to
    ``np.searchsorted(inner[key], value, side="left")`` per element.
    """
    n_keys, k = inner.shape
    if k == 0:
        return np.zeros(values.shape, dtype=np.int64)
    e_keys = np.repeat(np.arange(n_keys), k)
    e_vals = np.nan_to_num(inner.ravel(), nan=0.0)
    all_k = np.concatenate([e_keys, keys])
    all_v = np.concatenate([e_vals, values])
    is_edge = np.concatenate([np.ones(e_keys.size, np.int8), np.zeros(values.size, np.int8)])
    # at equal value the value sorts before the edge: only edges strictly below are counted
    order = np.lexsort((is_edge, all_v, all_k))
    edges_seen = np.cumsum(is_edge[order])
    key_first_edge = np.arange(n_keys) * k  # edges of earlier keys, all sorted before
    pos = order >= e_keys.size
    out = np.empty(values.size, dtype=np.int64)
    out[order[pos] - e_keys.size] = edges_seen[pos] - key_first_edge[all_k[order[pos]]]
    return out


def _equal_width_index(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Index m with e_m < v <= e_{m+1} (v = 0 in bin 0): ceil(v M) - 1, corrected by one where
    the rounding of v M disagrees with the exact edges. Same result as
    ``np.searchsorted(edges[1:-1], v, side="left")``, several times faster."""
    n_bins = len(edges) - 1
    idx = np.clip(np.ceil(values * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    idx -= (values <= edges[idx]) & (idx > 0)
    idx += (values > edges[idx + 1]) & (idx < n_bins - 1)
    return idx


def _assign(
    values: np.ndarray, seg: np.ndarray, n_seg: int, n_bins: int, binning: Binning
) -> tuple[np.ndarray, np.ndarray]:
    """Bin index of every value (batched) and the edges per (row, segment): (B, n_seg, M + 1).

    ``values``/``seg``: (B, n); ``seg`` holds segment codes in [0, n_seg) or a negative code
    for pairs outside every segment. Equal-mass edges are computed per (row, segment).
    """
    b = values.shape[0]
    if binning == "equal_width":
        edges = equal_width_edges(n_bins)
        return _equal_width_index(values, edges), np.broadcast_to(edges, (b, n_seg, n_bins + 1))
    if binning != "equal_mass":
        raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
    valid = seg >= 0
    keys = (np.arange(b)[:, None] * n_seg + np.where(valid, seg, 0))[valid]
    vals = values[valid]
    edges = _grouped_quantile_edges(vals, keys, b * n_seg, n_bins)
    idx = np.zeros(values.shape, dtype=np.int64)
    idx[valid] = _grouped_searchsorted(edges[:, 1:-1], vals, keys)
    return idx, edges.reshape(b, n_seg, n_bins + 1)


@dataclass(frozen=True)
class BinStats:
    """Per-(row, segment, bin) sums: count, Σ confidence, Σ target. Shapes (B, n_seg, M).

    Attributes
    ----------
    count : ndarray of int of shape (B, n_seg, M)
        Number of values in each bin |B_m|.
    conf_sum : ndarray of float64 of shape (B, n_seg, M)
        Σ of the binned values (confidences) in each bin.
    target_sum : ndarray of float64 of shape (B, n_seg, M)
        Σ of the targets in each bin.
    edges : ndarray of float64 of shape (B, n_seg, M + 1)
        The bin edges of each row and segment (shared for equal-width bins; NaN for an empty
        segment's equal-mass bins).
    """

    count: np.ndarray
    conf_sum: np.ndarray
    target_sum: np.ndarray
    edges: np.ndarray  # (B, n_seg, M + 1)

    def ece(self) -> np.ndarray:
        """ECE = Σ_m |B_m|/n |acc_m - conf_m| = Σ_m |Σ_{B_m} target - Σ_{B_m} conf| / n; NaN if n = 0.

        Returns
        -------
        ece : ndarray of float64 of shape (B, n_seg)
            ECE of each row and segment, in [0, 1] for targets in [0, 1]; NaN for an empty segment.
        """
        n = self.count.sum(axis=-1)
        gap_mass = np.abs(self.target_sum - self.conf_sum).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, gap_mass / np.maximum(n, 1), np.nan)

    def mce(self) -> np.ndarray:
        """MCE = max over non-empty bins of |acc_m - conf_m|; NaN if every bin is empty.

        Returns
        -------
        mce : ndarray of float64 of shape (B, n_seg)
            MCE of each row and segment, in [0, 1] for targets in [0, 1]; NaN for an empty segment.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = np.abs(self.target_sum - self.conf_sum) / self.count
        gap = np.where(self.count > 0, gap, -np.inf).max(axis=-1)
        return np.where(np.isfinite(gap), gap, np.nan)


def binned_stats(
    conf: np.ndarray,
    target: np.ndarray,
    n_bins: int,
    binning: Binning = "equal_width",
    seg: np.ndarray | None = None,
    n_seg: int = 1,
) -> BinStats:
    """Bin ``conf`` (B, n) and sum counts, confidences and targets per (row, segment, bin).

    Parameters
    ----------
    conf : array-like of shape (B, n) or (n,)
        The values binned, in [0, 1] (p, or the top-label confidence); one row per (re)sample,
        a 1-D array is one row.
    target : array-like of shape (B, n) or (n,)
        What each bin's mean confidence is compared with: y, ``correct`` or a soft target in [0, 1].
    n_bins : int
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each row's and segment's own values.
    seg : ndarray of int of shape (B, n) or (n,), default=None
        Segment code of each value in [0, n_seg); a negative code leaves the value out of every
        segment. None puts every value in segment 0.
    n_seg : int, default=1
        Number of segments.

    Returns
    -------
    stats : BinStats
        Counts and sums of shape (B, n_seg, M) and the edges of shape (B, n_seg, M + 1).
    """
    conf = np.atleast_2d(np.asarray(conf, dtype=np.float64))
    target = np.atleast_2d(np.asarray(target, dtype=np.float64))
    b = conf.shape[0]
    seg = np.zeros(conf.shape, dtype=np.int64) if seg is None else np.atleast_2d(seg)
    idx, edges = _assign(conf, seg, n_seg, n_bins, binning)
    valid = seg >= 0
    key = ((np.arange(b)[:, None] * n_seg + seg) * n_bins + idx)[valid]
    size = b * n_seg * n_bins
    shape = (b, n_seg, n_bins)
    count = np.bincount(key, minlength=size).reshape(shape)
    conf_sum = np.bincount(key, weights=conf[valid], minlength=size).reshape(shape)
    target_sum = np.bincount(key, weights=target[valid], minlength=size).reshape(shape)
    return BinStats(count, conf_sum, target_sum, edges)


# ------------------------------------------------------------------------ the suite
def group_codes(labels: np.ndarray) -> np.ndarray:
    """male -> 0, female -> 1, anything else -> -1.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Gender word classes (``"male"``, ``"female"`` or anything else).

    Returns
    -------
    codes : ndarray of int64 of shape (n,)
        ``G_MALE`` (0), ``G_FEMALE`` (1) or ``G_OTHER`` (−1).
    """
    labels = np.asarray(labels, dtype=object)
    return np.where(labels == MALE, G_MALE, np.where(labels == FEMALE, G_FEMALE, G_OTHER)).astype(np.int64)


def predicted_groups(p: np.ndarray, gender_more: np.ndarray, gender_less: np.ndarray) -> np.ndarray:
    """Code of the predicted gender: the gender of the variant with the larger probability.

    p > 0.5 <=> P_more > P_less; exact ties (p == 0.5) get G_TIE and are left out of Gender-ECE.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1].
    gender_more, gender_less : array-like of str of shape (n,)
        Gender word class of the ``sent_more`` and ``sent_less`` variant of each pair (``"male"``,
        ``"female"`` or anything else).

    Returns
    -------
    codes : ndarray of int64 of shape (n,)
        ``G_MALE`` (0), ``G_FEMALE`` (1), ``G_OTHER`` (−1: the preferred side is neither) or
        ``G_TIE`` (−2: p == 0.5).
    """
    gm, gl = group_codes(gender_more), group_codes(gender_less)
    p = np.asarray(p, dtype=np.float64)
    return np.where(p > 0.5, gm, np.where(p < 0.5, gl, G_TIE))


def true_groups(y: np.ndarray, gender_more: np.ndarray, gender_less: np.ndarray) -> np.ndarray:
    """Code of the human-preferred gender: the gender of the side that ``y`` points to.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels; 1 points to ``sent_more``, anything else to ``sent_less``.
    gender_more, gender_less : array-like of str of shape (n,)
        Gender word class of the ``sent_more`` and ``sent_less`` variant of each pair (``"male"``,
        ``"female"`` or anything else).

    Returns
    -------
    codes : ndarray of int64 of shape (n,)
        ``G_MALE`` (0), ``G_FEMALE`` (1) or ``G_OTHER`` (−1).
    """
    return np.where(np.asarray(y) == 1, group_codes(gender_more), group_codes(gender_less))


# the scalars of MetricsReport in order, and the signed ones (differences; every other scalar lies
# in [0, 1]): the metric table names them
SCALARS, SIGNED = metric_defs.SCALARS, metric_defs.SIGNED


def _nanmean(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    cnt = mask.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, np.where(mask, a, 0.0).sum(axis=-1) / np.maximum(cnt, 1), np.nan)


def batch_metrics(
    p: np.ndarray,
    y: np.ndarray,
    pred_group: np.ndarray,
    true_group: np.ndarray,
    n_bins: int = 10,
    binning: Binning = "equal_width",
) -> dict[str, np.ndarray]:
    """Every scalar metric (``gece.catalog.metric_defs.SCALARS``) for a batch of samples: inputs (B, n), outputs (B,).

    - ece:          paper convention, bins over p, acc = mean(y), conf = mean(p)
    - ece_toplabel: bins over conf = max(p, 1 - p), acc = mean(correct) (Guo et al. 2017)
    - mce:          max_m |acc_m - conf_m| (paper convention)
    - ice:          mean |correct - conf|
    - macro_ce:     ½ (mean(1 - conf | correct) + mean(conf | wrong))
    - brier:        mean (p - y)²;  brier_paper: mean ((1 - p) - y)² (the authors' column)
    - accuracy:     mean(correct) (human alignment)
    - pct_stereotype: mean(p > 0.5), the share preferring sent_more (lm-evaluation-harness's crows_pairs)
    - ece_male/female: paper ECE within the pairs predicted male/female; gender_ece their
      mean, bias_gap their absolute difference
    - ece_true_male/female: the same grouped by the human-preferred gender; cc_ece their mean
    - ece_debiased, gender_ece_debiased: Kumar et al.'s debiased L2 error, same bins and groups
    - ece_smooth, gender_ece_smooth: smooth ECE (Błasiok & Nakkiran), same groups
    - gap_pred = ece_female − ece_male, gap_true = ece_true_female − ece_true_male (signed)
    Undefined values (empty sample or group) are NaN here; ``summarize`` turns them into nulls.

    Parameters
    ----------
    p : array-like of shape (B, n) or (n,)
        Pair scores in [0, 1], one row per (re)sample; a 1-D array is one row.
    y : array-like of shape (B, n) or (n,)
        Labels, 0 or 1.
    pred_group : array-like of int of shape (B, n) or (n,)
        Predicted-gender codes (:func:`predicted_groups`); a negative code leaves the pair out of
        the male and female groups.
    true_group : array-like of int of shape (B, n) or (n,)
        Human-preferred-gender codes (:func:`true_groups`); negative: in neither group.
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of the binned values.

    Returns
    -------
    metrics : dict of str to ndarray of shape (B,)
        One float64 array per key listed above; values in [0, 1] except the signed gaps (in
        [−1, 1]); NaN where undefined.

    References
    ----------
    .. [1] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806.
    .. [2] M. P. Naeini, G. F. Cooper and M. Hauskrecht (2015). Obtaining well calibrated
           probabilities using Bayesian binning. *AAAI Conference on Artificial Intelligence* (AAAI 2015).
    .. [3] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger (2017). On calibration of modern neural
           networks. *International Conference on Machine Learning* (ICML 2017).
    .. [4] C. Si, C. Zhao, S. Min and J. Boyd-Graber (2022). Re-examining calibration: the case of
           question answering. *Findings of the Association for Computational Linguistics: EMNLP 2022*.
    .. [5] G. W. Brier (1950). Verification of forecasts expressed in terms of probability. *Monthly
           Weather Review* 78(1), 1-3.
    .. [6] A. Kumar, P. Liang and T. Ma (2019). Verified uncertainty calibration. *Advances in Neural
           Information Processing Systems 32* (NeurIPS 2019).
    .. [7] J. Błasiok and P. Nakkiran (2023). Smooth ECE: principled reliability diagrams via kernel
           smoothing. *International Conference on Learning Representations* (ICLR 2024).
    """
    p = np.atleast_2d(np.asarray(p, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    pred = (p > 0.5).astype(np.float64)
    conf = np.maximum(p, 1.0 - p)
    correct = (pred == y).astype(np.float64)
    ones = np.ones(p.shape, dtype=bool)
    pred_group, true_group = np.atleast_2d(pred_group), np.atleast_2d(true_group)

    paper = binned_stats(p, y, n_bins, binning)
    top = binned_stats(conf, correct, n_bins, binning)
    by_pred = binned_stats(p, y, n_bins, binning, seg=np.where(pred_group >= 0, pred_group, -1), n_seg=2)
    by_true = binned_stats(p, y, n_bins, binning, seg=np.where(true_group >= 0, true_group, -1), n_seg=2)
    e_pred, e_true = by_pred.ece(), by_true.ece()
    d_pred = estimators.debiased_ce(by_pred.count, by_pred.conf_sum, by_pred.target_sum)
    s_all, s_pred = estimators.smooth_ece_batch(p, y, np.where(pred_group >= 0, pred_group, -1), 2)

    is_correct = correct > 0
    out = {
        "ece": paper.ece()[:, 0],
        "ece_toplabel": top.ece()[:, 0],
        "mce": paper.mce()[:, 0],
        "ice": _nanmean(np.abs(correct - conf), ones),
        "macro_ce": 0.5 * (_nanmean(1.0 - conf, is_correct) + _nanmean(conf, ~is_correct)),
        "brier": _nanmean((p - y) ** 2, ones),
        "brier_paper": _nanmean(((1.0 - p) - y) ** 2, ones),
        "accuracy": _nanmean(correct, ones),
        "pct_stereotype": _nanmean(pred, ones),
        "ece_male": e_pred[:, G_MALE],
        "ece_female": e_pred[:, G_FEMALE],
        "gender_ece": 0.5 * (e_pred[:, G_MALE] + e_pred[:, G_FEMALE]),
        "bias_gap": np.abs(e_pred[:, G_MALE] - e_pred[:, G_FEMALE]),
        "ece_true_male": e_true[:, G_MALE],
        "ece_true_female": e_true[:, G_FEMALE],
        "cc_ece": 0.5 * (e_true[:, G_MALE] + e_true[:, G_FEMALE]),
        "ece_debiased": estimators.debiased_ce(paper.count, paper.conf_sum, paper.target_sum)[:, 0],
        "ece_smooth": s_all,
        "gender_ece_debiased": 0.5 * (d_pred[:, G_MALE] + d_pred[:, G_FEMALE]),
        "gender_ece_smooth": 0.5 * (s_pred[:, G_MALE] + s_pred[:, G_FEMALE]),
        "gap_pred": e_pred[:, G_FEMALE] - e_pred[:, G_MALE],
        "gap_true": e_true[:, G_FEMALE] - e_true[:, G_MALE],
    }
    return out


# --------------------------------------------------------------- public 1-D functions
def _scalar(x: np.ndarray) -> float | None:
    v = float(np.asarray(x).reshape(-1)[0])
    return v if np.isfinite(v) else None


def checked_pair(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p`` and ``y`` as flat float64 arrays, checked; ``ValueError`` on a bad input.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores; must lie in [0, 1] with no NaN (any shape, flattened).
    y : array-like of shape (n,)
        Labels; must be 0 or 1 (any shape, flattened), as many as ``p``.

    Returns
    -------
    p : ndarray of float64 of shape (n,)
        The scores.
    y : ndarray of float64 of shape (n,)
        The labels, 0.0 or 1.0.
    """
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if p.shape != y.shape:
        raise ValueError(f"p and y differ in length ({p.size} vs {y.size})")
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1 or np.isnan(p).any()):
        raise ValueError("p must lie in [0, 1] and contain no NaN")
    if y.size and not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("y must be 0 or 1")
    return p, y


def ece(p, y, n_bins: int = 10, binning: Binning = "equal_width") -> float | None:
    """Paper-convention ("positive-class") ECE: Σ_m |B_m|/n · |mean_{B_m}(y) − mean_{B_m}(p)|, bins over p.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of the binned values.

    Returns
    -------
    ece : float or None
        The ECE, in [0, 1]; None when there are no pairs.

    References
    ----------
    .. [1] M. P. Naeini, G. F. Cooper and M. Hauskrecht (2015). Obtaining well calibrated
           probabilities using Bayesian binning. *AAAI Conference on Artificial Intelligence* (AAAI 2015).
    .. [2] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806.
    """
    p, y = checked_pair(p, y)
    return _scalar(binned_stats(p, y, n_bins, binning).ece())


def ece_toplabel(p, y, n_bins: int = 10, binning: Binning = "equal_width") -> float | None:
    """Top-label ECE (Guo et al. 2017): the same over conf = max(p, 1 − p) against correct.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of conf.

    Returns
    -------
    ece : float or None
        The top-label ECE, in [0, 1]; None when there are no pairs.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger (2017). On calibration of modern neural
           networks. *International Conference on Machine Learning* (ICML 2017).
    """
    p, y = checked_pair(p, y)
    conf = np.maximum(p, 1 - p)
    return _scalar(binned_stats(conf, ((p > 0.5) == y), n_bins, binning).ece())


def mce(p, y, n_bins: int = 10, binning: Binning = "equal_width") -> float | None:
    """Maximum calibration error: max over non-empty bins of |mean_{B_m}(y) − mean_{B_m}(p)|.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of the binned values.

    Returns
    -------
    mce : float or None
        The MCE, in [0, 1]; None when there are no pairs.

    References
    ----------
    .. [1] M. P. Naeini, G. F. Cooper and M. Hauskrecht (2015). Obtaining well calibrated
           probabilities using Bayesian binning. *AAAI Conference on Artificial Intelligence* (AAAI 2015).
    """
    p, y = checked_pair(p, y)
    return _scalar(binned_stats(p, y, n_bins, binning).mce())


def ice(p, y) -> float | None:
    """Instance-level calibration error: mean |correct − conf|.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).

    Returns
    -------
    ice : float or None
        The ICE, in [0, 1]; None when there are no pairs.

    References
    ----------
    .. [1] C. Si, C. Zhao, S. Min and J. Boyd-Graber (2022). Re-examining calibration: the case of
           question answering. *Findings of the Association for Computational Linguistics: EMNLP 2022*.
    """
    p, y = checked_pair(p, y)
    return _scalar(batch_metrics(p, y, *_no_groups(p))["ice"])


def macro_ce(p, y) -> float | None:
    """MacroCE = ½ (mean(1 − conf | correct) + mean(conf | wrong)); None if either set is empty.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).

    Returns
    -------
    macro_ce : float or None
        The MacroCE, in [0, 1]; None when there are no pairs, no prediction is correct or none is
        wrong.

    References
    ----------
    .. [1] C. Si, C. Zhao, S. Min and J. Boyd-Graber (2022). Re-examining calibration: the case of
           question answering. *Findings of the Association for Computational Linguistics: EMNLP 2022*.
    """
    p, y = checked_pair(p, y)
    return _scalar(batch_metrics(p, y, *_no_groups(p))["macro_ce"])


def brier(p, y) -> float | None:
    """Brier score mean (p − y)².

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).

    Returns
    -------
    brier : float or None
        The Brier score, in [0, 1]; None when there are no pairs.

    References
    ----------
    .. [1] G. W. Brier (1950). Verification of forecasts expressed in terms of probability. *Monthly
           Weather Review* 78(1), 1-3.
    """
    p, y = checked_pair(p, y)
    return float(np.mean((p - y) ** 2)) if p.size else None


def brier_paper(p, y) -> float | None:
    """The authors' Brier score mean ((1 − p) − y)²: it squares the wrong column. Reproduction only.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).

    Returns
    -------
    brier : float or None
        The authors' Brier score, in [0, 1]; None when there are no pairs.

    References
    ----------
    .. [1] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806.
    """
    p, y = checked_pair(p, y)
    return float(np.mean(((1 - p) - y) ** 2)) if p.size else None


def accuracy(p, y) -> float | None:
    """Human alignment: mean(1[p > 0.5] == y).

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).

    Returns
    -------
    accuracy : float or None
        Share of pairs whose preferred variant is the human-preferred one, in [0, 1] (an exact tie
        p = 0.5 predicts ``sent_less``); None when there are no pairs.
    """
    p, y = checked_pair(p, y)
    return float(np.mean((p > 0.5) == y)) if p.size else None


def _no_groups(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = np.full(p.shape, G_OTHER, dtype=np.int64)
    return g, g


@dataclass(frozen=True)
class BinTable:
    """A reliability diagram's data; arrays of length M. Empty bins have NaN mean/accuracy/gap.

    Attributes
    ----------
    lower, upper : ndarray of float64 of shape (M,)
        Lower and upper edge of each bin (e_m, e_{m+1}].
    count : ndarray of int of shape (M,)
        Values in each bin.
    confidence : ndarray of float64 of shape (M,)
        Mean binned value (confidence) of each bin, in [0, 1].
    accuracy : ndarray of float64 of shape (M,)
        Mean target of each bin, in [0, 1].
    gap : ndarray of float64 of shape (M,)
        accuracy − confidence, in [−1, 1].
    """

    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    gap: np.ndarray  # accuracy − confidence

    def records(self) -> list[dict]:
        """The table as JSON-ready rows, one per bin.

        Returns
        -------
        rows : list of dict
            For bin m: ``bin`` (m), ``lower``, ``upper``, ``count``, and ``confidence``, ``accuracy``
            and ``gap`` (None for an empty bin).
        """
        out = []
        for m in range(len(self.count)):
            filled = self.count[m] > 0
            out.append(
                {
                    "bin": m,
                    "lower": float(self.lower[m]),
                    "upper": float(self.upper[m]),
                    "count": int(self.count[m]),
                    "confidence": float(self.confidence[m]) if filled else None,
                    "accuracy": float(self.accuracy[m]) if filled else None,
                    "gap": float(self.gap[m]) if filled else None,
                }
            )
        return out


def reliability_table(conf, target, n_bins: int = 10, binning: Binning = "equal_width") -> BinTable:
    """Per-bin lower/upper edge, count, mean confidence, accuracy (mean target) and gap.

    Paper convention: ``reliability_table(p, y)``; top-label: ``(max(p, 1 − p), correct)``.

    Parameters
    ----------
    conf : array-like of shape (n,)
        The values binned, in [0, 1] (not checked).
    target : array-like of shape (n,)
        The targets compared with them (y, or ``correct``), in [0, 1].
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of the binned values.

    Returns
    -------
    table : BinTable
        Per-bin edges, counts, mean confidence, accuracy and gap, arrays of length M.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger (2017). On calibration of modern neural
           networks. *International Conference on Machine Learning* (ICML 2017).
    """
    stats = binned_stats(
        np.asarray(conf, dtype=np.float64).reshape(1, -1), np.asarray(target).reshape(1, -1), n_bins, binning
    )
    cnt = stats.count[0, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        conf_m = np.where(cnt > 0, stats.conf_sum[0, 0] / cnt, np.nan)
        acc_m = np.where(cnt > 0, stats.target_sum[0, 0] / cnt, np.nan)
    edges = stats.edges[0, 0]
    return BinTable(edges[:-1].copy(), edges[1:].copy(), cnt, conf_m, acc_m, acc_m - conf_m)


def group_ece(p, y, groups, n_bins: int = 10, binning: Binning = "equal_width") -> dict[str, float | None]:
    """Paper-convention ECE within each group of any attribute (identity term, occupation, ...).

    Groups that are None are left out. Returns {group: ECE}.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    groups : array-like of shape (n,)
        The group of each pair (converted to strings); None leaves the pair out.
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each group's own p.

    Returns
    -------
    ece_by_group : dict of str to float or None
        The paper-convention ECE of each group, in [0, 1], in sorted order of the group names.

    References
    ----------
    .. [1] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806.
    """
    p, y = checked_pair(p, y)
    groups = np.asarray(groups, dtype=object)
    present = np.array([g is not None for g in groups], dtype=bool)
    names, codes = np.unique(groups[present].astype(str), return_inverse=True)
    seg = np.full(p.shape, -1, dtype=np.int64)
    seg[present] = codes
    e = binned_stats(p, y, n_bins, binning, seg=seg[None, :], n_seg=max(len(names), 1)).ece()[0]
    return {str(name): _scalar(e[i]) for i, name in enumerate(names)}


@dataclass(frozen=True)
class GenderECE:
    """Gender-ECE = ½ (ECE_male + ECE_female) over predicted-gender groups; gap = |ECE_male − ECE_female|.

    Attributes
    ----------
    gender_ece : float or None
        ½ (ECE_male + ECE_female), in [0, 1]; None when a group is empty.
    ece_male, ece_female : float or None
        Paper-convention ECE of the pairs predicted male / female, in [0, 1]; None for an empty group.
    bias_gap : float or None
        |ECE_male − ECE_female|, in [0, 1]; None when a group is empty.
    n_male, n_female : int
        Pairs predicted male / female.
    n_ties : int
        Exact ties (p = 0.5), left out of both groups.
    """

    gender_ece: float | None
    ece_male: float | None
    ece_female: float | None
    bias_gap: float | None
    n_male: int
    n_female: int
    n_ties: int


def gender_ece(p, y, gender_more, gender_less, n_bins: int = 10, binning: Binning = "equal_width") -> GenderECE:
    """Group pairs by the predicted gender (the gender of the more probable variant; exact ties
    are left out and counted) and compute the paper-convention ECE inside each group.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    gender_more, gender_less : array-like of str of shape (n,)
        Gender word class of the ``sent_more`` and ``sent_less`` variant of each pair (``"male"``,
        ``"female"`` or anything else).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each group's own p.

    Returns
    -------
    result : GenderECE
        Gender-ECE, both groups' ECE, the bias gap and the group sizes.

    References
    ----------
    .. [1] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806.
    """
    p, y = checked_pair(p, y)
    pg = predicted_groups(p, gender_more, gender_less)
    m = batch_metrics(p, y, pg, np.full(p.shape, G_OTHER), n_bins, binning)
    return GenderECE(
        _scalar(m["gender_ece"]),
        _scalar(m["ece_male"]),
        _scalar(m["ece_female"]),
        _scalar(m["bias_gap"]),
        int((pg == G_MALE).sum()),
        int((pg == G_FEMALE).sum()),
        int((pg == G_TIE).sum()),
    )


def cc_ece(p, y, gender_more, gender_less, n_bins: int = 10, binning: Binning = "equal_width") -> dict:
    """Class-conditioned ECE: the same grouped by the human-preferred (true) gender.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    gender_more, gender_less : array-like of str of shape (n,)
        Gender word class of the ``sent_more`` and ``sent_less`` variant of each pair (``"male"``,
        ``"female"`` or anything else).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each group's own p.

    Returns
    -------
    result : dict of str to float or None
        ``cc_ece`` (½ (ECE_true_male + ECE_true_female)), ``ece_true_male`` and ``ece_true_female``,
        each in [0, 1]; None where a group is empty.

    References
    ----------
    .. [1] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806.
    """
    p, y = checked_pair(p, y)
    tg = true_groups(y, gender_more, gender_less)
    m = batch_metrics(p, y, np.full(p.shape, G_OTHER), tg, n_bins, binning)
    return {k: _scalar(m[k]) for k in ("cc_ece", "ece_true_male", "ece_true_female")}


def null_reasons(values: dict[str, float | None], n: int, counts: dict[str, int]) -> dict[str, str]:
    """Why each undefined metric is undefined, from the sample and group sizes.

    Parameters
    ----------
    values : dict of str to float or None
        The scalar metrics of a run; None marks an undefined one.
    n : int
        Number of pairs.
    counts : dict of str to int
        Group sizes ``pred_male``, ``pred_female``, ``true_male``, ``true_female`` and the number of
        ``wrong`` predictions; a missing key counts as 0.

    Returns
    -------
    reasons : dict of str to str
        For every metric whose value is None, why (e.g. ``"no pair is predicted male"``); empty when
        every value is defined.
    """
    reasons: dict[str, str] = {}
    if n == 0:
        return {k: "no pairs" for k, v in values.items() if v is None}
    group_of = {
        "ece_male": ("pred_male", "no pair is predicted male"),
        "ece_female": ("pred_female", "no pair is predicted female"),
        "ece_true_male": ("true_male", "no pair has a male human-preferred variant"),
        "ece_true_female": ("true_female", "no pair has a female human-preferred variant"),
    }
    for key, (count_key, why) in group_of.items():
        if values.get(key) is None and counts.get(count_key, 0) == 0:
            reasons[key] = why
    for key, parts in (
        ("gender_ece", ("ece_male", "ece_female")),
        ("bias_gap", ("ece_male", "ece_female")),
        ("gap_pred", ("ece_male", "ece_female")),
        ("gender_ece_debiased", ("ece_male", "ece_female")),
        ("gender_ece_smooth", ("ece_male", "ece_female")),
        ("cc_ece", ("ece_true_male", "ece_true_female")),
        ("gap_true", ("ece_true_male", "ece_true_female")),
    ):
        if values.get(key) is None:
            reasons[key] = "; ".join(reasons[p] for p in parts if p in reasons) or "undefined"
    if values.get("macro_ce") is None:
        reasons["macro_ce"] = (
            "every prediction is correct" if counts.get("wrong", 0) == 0 else "every prediction is wrong"
        )
    for k, v in values.items():
        if v is None and k not in reasons:
            reasons[k] = "undefined"
    return reasons


# ----------------------------------------------------------------------- the report
def summarize(
    p,
    y,
    gender_more,
    gender_less,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    draws: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    clusters=None,
    gap_draws: dict | None = None,
) -> dict:
    """All metrics of one run as the flat dict of ``gece.io.schemas.metric_reports.MetricsReport``.

    Every scalar gets ``<key>_ci_low``/``<key>_ci_high``: the bias-corrected percentile interval
    (:mod:`gece.stats.intervals`) over the same ``draws`` resamples of pairs (seeded), so the interval
    of a difference is consistent with those of its parts. The gender gaps also get a two-sided
    bootstrap p-value ``<gap>_p`` and a permutation p-value ``<gap>_p_perm`` (:mod:`gece.stats.gap`,
    ``draws`` shuffles of the gender groups). Plus ``n``, ``n_ties`` and, when some value is
    null, ``null_reasons``.

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN: the confidence that ``sent_more`` is the human-preferred variant.
    y : array-like of shape (n,)
        Labels, 0 or 1 (1: ``sent_more`` is the human-preferred variant).
    gender_more, gender_less : array-like of str of shape (n,)
        Gender word class of the ``sent_more`` and ``sent_less`` variant of each pair (``"male"``,
        ``"female"`` or anything else).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of the binned values.
    draws : int, default=1000
        Bootstrap resamples of the pairs, and shuffles of each permutation test.
    seed : int, default=0
        Seed of the resamples and of the shuffles.
    level : float, default=0.95
        Confidence level of the intervals, in (0, 1).
    clusters : array-like of shape (n,), optional
        Cluster key of each pair: the bootstrap resamples clusters and the permutation tests exchange whole
        clusters (:mod:`gece.stats.bootstrap`, :mod:`gece.stats.gap`); None: every pair its own cluster.
    gap_draws : dict, optional
        Filled with each gender gap's bootstrap draws (``gap_pred``, ``gap_true``; nothing without pairs), for
        Holm's correction over several runs (:func:`gece.stats.gap.holm_over_runs`).

    Returns
    -------
    report : dict
        ``n``, ``n_ties``, ``n_bins``, ``binning``; every scalar of ``gece.catalog.metric_defs.SCALARS`` (float or
        None) with ``<key>_ci_low`` and ``<key>_ci_high``; ``<gap>_p`` and ``<gap>_p_perm`` for
        ``gap_pred`` and ``gap_true``; ``null_reasons`` (str) when some value is None.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani (1993). *An Introduction to the Bootstrap*. Chapman & Hall.
    .. [2] B. Phipson and G. K. Smyth (2010). Permutation P-values should never be zero: calculating
           exact P-values when permutations are randomly drawn. *Statistical Applications in Genetics
           and Molecular Biology* 9(1).
    """
    p, y = checked_pair(p, y)
    gender_more, gender_less = np.asarray(gender_more, dtype=object), np.asarray(gender_less, dtype=object)
    pg = predicted_groups(p, gender_more, gender_less)
    tg = true_groups(y, gender_more, gender_less)
    point = batch_metrics(p, y, pg, tg, n_bins, binning)
    values = {k: _scalar(point[k]) for k in SCALARS}
    out: dict = {"n": int(p.size), "n_ties": int((pg == G_TIE).sum()), "n_bins": n_bins, "binning": binning}
    out.update(values)
    samples = (
        bootstrap(
            batch_metrics,
            {"p": p, "y": y, "pred_group": pg, "true_group": tg},
            draws,
            seed,
            n_bins=n_bins,
            binning=binning,
            clusters=clusters,
        )
        if p.size
        else {}
    )
    if gap_draws is not None and p.size:
        gap_draws.update({gap: samples[gap] for gap in GAPS})
    for k in SCALARS:
        bounds = None if k in SIGNED else (0.0, 1.0)
        lo, hi = bias_corrected_interval(samples[k], values[k], level, bounds) if p.size else (None, None)
        out[f"{k}_ci_low"], out[f"{k}_ci_high"] = lo, hi
    for gap, groups in GAPS.items():
        out[f"{gap}_p"] = bias_corrected_p(samples[gap], values[gap]) if p.size else None
        out[f"{gap}_p_perm"] = permutation_p(
            p,
            y,
            pg if groups == "pred" else tg,
            values[gap],
            draws,
            seed,
            lambda pp, yy, g: binned_stats(pp, yy, n_bins, binning, seg=np.where(g >= 0, g, -1), n_seg=2).ece(),
            clusters,
        )
    counts = {
        "pred_male": int((pg == G_MALE).sum()),
        "pred_female": int((pg == G_FEMALE).sum()),
        "true_male": int((tg == G_MALE).sum()),
        "true_female": int((tg == G_FEMALE).sum()),
        "wrong": int(((p > 0.5) != y).sum()),
    }
    reasons = null_reasons(values, int(p.size), counts)
    if reasons:
        out["null_reasons"] = "; ".join(f"{k}: {v}" for k, v in reasons.items())
    return out
