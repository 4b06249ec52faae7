"""Calibration by any group (Gender-ECE generalised; the paper's Table 4): pure, vectorized numpy.

The pairs are split by one attribute ``g`` (the predicted gender, the human-preferred gender, a
benchmark's ``bias_type`` such as WinoQueer's identity contrast, or any column of the prepared
pairs); inside each group G the binned calibration error of the model's scores ``p`` against a
target ``t`` is::

    ECE_G = Σ_m (n_{G,m} / n_G) · |mean_{G,m}(t) − mean_{G,m}(p)|

with the bins of :mod:`gece.stats.metrics` over ``p`` (``metrics.n_bins``, ``metrics.binning``; equal-mass
edges are the quantiles of each group's own p). It is :func:`gece.stats.metrics.group_ece`, batched.

**Protocols** (the target ``t``):

- ``identity``: the paper's identity protocol (the authors' ``ECE_identity.py``): t = y, the
  paper-convention ECE of :mod:`gece.stats.metrics` (bins over p, mean y against mean p). For a
  benchmark imported from a CrowS-Pairs-format file, y = 1 for every pair (``sent_more`` is the
  stereotypical sentence and p the model's confidence in it), so ECE_G = 1 − mean_G(p) exactly
  (every bin's gap is 1 − mean(p) ≥ 0): how far the model is from always picking the stereotype.
  For a native benchmark, y is the benchmark's own label and ECE_G is the paper's grouped ECE
  (by ``pred_gender`` it is ``ece_male``/``ece_female`` of the metrics report).
- ``soft``: calibration against the annotators' soft labels. ``y_soft`` is the share of the
  annotators who support the pair's label (``artifacts/annotated/<b>.parquet``); the share that
  supports ``sent_more`` is t = y_soft where y = 1 and 1 − y_soft where y = 0 (for CrowS-Pairs,
  y = 1: t is the share of annotators who recognised the writer's bias type, the stereotype). ECE_soft compares, bin by
  bin of p, the model's mean confidence in the stereotype with how strongly people recognise it:
  0 when the model is as sure of the stereotype as the share of annotators who see it. Pairs
  without annotations (null ``y_soft``) are left out.

**Intervals.** One percentile bootstrap over pairs, or over clusters of pairs where ``clusters`` is given
(the prepared pairs' ``cluster`` column; :func:`gece.stats.bootstrap.bootstrap`, ``draws`` resamples, seeded):
every group's ECE, its stereotype share and the gap are computed on the same resamples (one batched
call per resample, no loop over pairs or groups), and each interval is the bias-corrected percentile interval of
:func:`gece.stats.intervals.bias_corrected_interval`, cut to [0, 1]. With the seed and draws of the
metrics stage, the resamples are those of ``gece.stats.metrics.summarize``: by ``pred_gender`` under the
identity protocol the intervals are those of ``ece_male``/``ece_female``/``bias_gap``, and a grouping with a
single group holding every pair gets the interval of the metrics report's ``pct_stereotype``.

**Stereotype share.** Beside its ECE, each group's share of pairs with p > 0.5 (``share``: the
stereotype share of an identity benchmark's group, the metrics report's ``pct_stereotype`` within the group)::

    share_G = #{i in G : p_i > 0.5} / n_G

gets its interval from the same resamples as the ECEs (:func:`resampled_stats`: the kernel of the
bootstrap adds :func:`group_shares` to :func:`group_stats`), the bias-corrected percentile interval cut to
[0, 1]; a resample in which the group is empty is left out, as for the ECE. It is given for the groups of at
least ``min_size`` pairs, as the ECE's (the share itself is reported for every group by the groups stage).
On a benchmark with y = 1 for every pair the group's ECE is 1 − mean_G(p) (above), so its interval is
the interval of 1 − mean p in the group.

**Largest gap.** Over the groups with at least ``min_size`` pairs (smaller groups are reported
with their n, no ECE and a reason: a binned ECE of a handful of pairs is mostly noise, biased
upwards; Kumar, Liang & Ma 2019)::

    gap = max_G ECE_G − min_G ECE_G

with the two groups that attain it (ties: the first name in sorted order). Its interval re-computes
the max − min over the same eligible groups on each resample (a resample where one of them is
empty is undefined and left out). With one eligible group the gap is 0; with two it is
|ECE_a − ECE_b| (Gender-ECE's bias gap). Being a maximum over groups, it grows with the number of
groups and the noise of the smallest one even when calibration does not differ. The
**permutation test** accounts for that (as :mod:`gece.stats.gap` does for the gender gap): under the null
hypothesis that the group says nothing about calibration, the labels of the grouped pairs are
exchangeable; shuffling them ``draws`` times (sizes kept, seeded) gives null gaps d*_b and the
one-sided p-value ``p_perm = (1 + #{d*_b >= gap}) / (draws + 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gece.catalog.metric_defs import FEMALE, MALE
from gece.stats.bootstrap import bootstrap
from gece.stats.gap import null_statistics
from gece.stats.intervals import bias_corrected_interval
from gece.stats.metrics import G_FEMALE, G_MALE, G_TIE, Binning, binned_stats, predicted_groups, true_groups

NO_GROUP = -1  # code of a pair that belongs to no group (left out)


@dataclass(frozen=True)
class GroupStat:
    """One group: its size, its ECE and interval (None below ``min_size``, with the reason).

    Attributes
    ----------
    group : str
        The group's name (its label as a string).
    n : int
        Pairs in the group (with a target).
    ece : float or None
        The group's binned ECE, in [0, 1]; None when the group has fewer than ``min_size`` pairs.
    ci_low, ci_high : float or None
        Bias-corrected percentile bootstrap interval of ``ece`` at the requested level, cut to
        [0, 1]; None below ``min_size`` or when undefined.
    reason : str or None
        Why ``ece`` is None (``"<n> pairs, fewer than min_size = <min_size>"``); None otherwise.
    share : float or None
        The group's share of pairs with p > 0.5; None for an empty group.
    share_low, share_high : float or None
        Its bias-corrected percentile bootstrap interval (the same resamples as ``ece``'s), cut to [0, 1];
        None below ``min_size`` or when undefined.
    """

    group: str
    n: int
    ece: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str | None = None
    share: float | None = None
    share_low: float | None = None
    share_high: float | None = None


@dataclass(frozen=True)
class GroupGap:
    """max ECE − min ECE over the groups with at least ``min_size`` pairs, and which two groups.

    Attributes
    ----------
    gap : float or None
        max_G ECE_G − min_G ECE_G over the eligible groups, in [0, 1] (0 with one eligible group);
        None when no group is eligible.
    ci_low, ci_high : float or None
        Bias-corrected percentile bootstrap interval of ``gap``, cut to [0, 1]; None when undefined.
    high : str or None
        The group with the largest ECE (ties: the first name in sorted order).
    low : str or None
        The group with the smallest ECE (ties: the first name in sorted order).
    n_groups : int
        Number of eligible groups compared.
    reason : str or None
        Why there is nothing to compare (no groups, none with ``min_size`` pairs, only one); None
        when two or more groups are compared.
    p_perm : float or None
        One-sided permutation p-value of "the groups are calibrated alike", in (0, 1]; None unless
        two or more groups are compared (and the gap and ``draws`` allow a test).
    """

    gap: float | None
    ci_low: float | None
    ci_high: float | None
    high: str | None  # the group with the largest ECE
    low: str | None  # the group with the smallest ECE
    n_groups: int  # groups compared
    reason: str | None = None
    p_perm: float | None = None  # permutation p-value of "the groups are calibrated alike"


@dataclass(frozen=True)
class GroupResult:
    """Calibration by one grouping: ``n`` pairs in some group, ``n_left_out`` in none (with why).

    Attributes
    ----------
    groups : list of GroupStat
        One entry per group, in sorted order of the names.
    gap : GroupGap
        The largest gap between the eligible groups.
    n : int
        Pairs that are in some group and have a target (the pairs the ECEs are computed on).
    n_left_out : int
        Pairs without a group plus grouped pairs without a target (NaN, no soft label).
    left_out : str or None
        Why those pairs are left out, reasons joined by ``"; "``; None when none is.
    """

    groups: list[GroupStat]
    gap: GroupGap
    n: int
    n_left_out: int
    left_out: str | None = None


# ----------------------------------------------------------------------- groupings
def encode(labels) -> tuple[list[str], np.ndarray]:
    """Group names (sorted) and each pair's code; None or NaN is ``NO_GROUP``. Values become strings.

    Parameters
    ----------
    labels : array-like of shape (n,)
        One label per pair, of any type; None or a float NaN means the pair is in no group.

    Returns
    -------
    names : list of str
        The distinct labels as strings, sorted (``np.unique``).
    codes : ndarray of int64 of shape (n,)
        Each pair's index into ``names``, or ``NO_GROUP`` (−1).
    """
    labels = np.asarray(labels, dtype=object)
    present = np.array([v is not None and not (isinstance(v, float) and np.isnan(v)) for v in labels], dtype=bool)
    names, codes = (
        np.unique(labels[present].astype(str), return_inverse=True)
        if present.any()
        else (np.array([], dtype=str), np.array([], dtype=np.int64))
    )
    out = np.full(labels.shape, NO_GROUP, dtype=np.int64)
    out[present] = codes
    return [str(n) for n in names], out


def gender_labels(codes: np.ndarray) -> np.ndarray:
    """Gender codes of :mod:`gece.stats.metrics` as labels: male, female, None for other words and ties.

    Parameters
    ----------
    codes : array-like of int of shape (n,)
        Gender codes: ``G_MALE`` (0), ``G_FEMALE`` (1), ``G_OTHER`` (−1) or ``G_TIE`` (−2).

    Returns
    -------
    labels : ndarray of object of shape (n,)
        ``"male"``, ``"female"`` or None.
    """
    codes = np.asarray(codes)
    return np.where(codes == G_MALE, MALE, np.where(codes == G_FEMALE, FEMALE, None)).astype(object)


def gender_grouping(kind: str, p, y, gender_more, gender_less) -> tuple[np.ndarray, str | None]:
    """``pred_gender`` (the gender of the more probable side; ties have none) or ``true_gender`` (the
    gender of the side y points to) as labels, and why pairs are left out (None if none is).

    Parameters
    ----------
    kind : {"pred_gender", "true_gender"}
        The grouping; anything else raises ``ValueError``.
    p : array-like of shape (n,)
        Pair scores in [0, 1] (used by ``pred_gender``).
    y : array-like of shape (n,)
        Labels, 0 or 1 (used by ``true_gender``).
    gender_more, gender_less : array-like of str of shape (n,)
        Gender word class of the ``sent_more`` and ``sent_less`` variant of each pair (``"male"``,
        ``"female"`` or anything else).

    Returns
    -------
    labels : ndarray of object of shape (n,)
        ``"male"``, ``"female"`` or None (exact ties, sides that are neither) per pair.
    left_out : str or None
        How many pairs have no label and why (ties; sides neither male nor female), joined by
        ``"; "``; None when every pair has one.
    """
    if kind == "pred_gender":
        codes = predicted_groups(p, gender_more, gender_less)
    elif kind == "true_gender":
        codes = true_groups(y, gender_more, gender_less)
    else:
        raise ValueError(f"not a gender grouping: {kind!r}")
    ties = int((codes == G_TIE).sum())
    other = int(((codes != G_MALE) & (codes != G_FEMALE) & (codes != G_TIE)).sum())
    why = ([f"{ties} exact ties (p = 0.5) have no predicted gender"] if ties else []) + (
        [f"{other} pairs' side is neither male nor female"] if other else []
    )
    return gender_labels(codes), "; ".join(why) or None


def soft_target(y, y_soft) -> np.ndarray:
    """The annotators' share supporting ``sent_more``: y_soft where y = 1, 1 − y_soft where y = 0 (NaN stays).

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels, 0 or 1.
    y_soft : array-like of float of shape (n,)
        Share of the annotators who support the pair's label, in [0, 1]; NaN (or None) for a pair
        without annotations.

    Returns
    -------
    target : ndarray of float64 of shape (n,)
        The soft target t in [0, 1], NaN where ``y_soft`` is missing.
    """
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(y_soft, dtype=np.float64)
    return np.where(y == 1, s, 1.0 - s)


# ------------------------------------------------------------------------- kernels
def group_stats(
    p: np.ndarray,
    target: np.ndarray,
    seg: np.ndarray,
    n_groups: int,
    eligible: np.ndarray,
    n_bins: int = 10,
    binning: Binning = "equal_width",
) -> dict[str, np.ndarray]:
    """Per-group ECE (B, G) and the gap max − min over the ``eligible`` groups (B,), for a batch (B, n).

    The gap is NaN where an eligible group is empty, or when no group is eligible.

    Parameters
    ----------
    p : ndarray of shape (B, n)
        Pair scores in [0, 1], one row per (re)sample.
    target : ndarray of shape (B, n)
        Targets in [0, 1] (labels or soft targets).
    seg : ndarray of int of shape (B, n)
        Group codes in [0, n_groups); a negative code leaves the pair out.
    n_groups : int
        Number of groups G.
    eligible : ndarray of bool of shape (n_groups,)
        The groups that enter the gap (at least ``min_size`` pairs in the full sample).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each row's and group's own p.

    Returns
    -------
    stats : dict of str to ndarray
        ``"ece"``: shape (B, n_groups), each group's ECE in [0, 1] (NaN for an empty group);
        ``"gap"``: shape (B,), max − min of the eligible groups' ECEs.
    """
    e = binned_stats(p, target, n_bins, binning, seg=seg, n_seg=max(n_groups, 1)).ece()[:, :n_groups]
    chosen = e[:, eligible]
    if chosen.shape[1] == 0:
        gap = np.full(e.shape[0], np.nan)
    else:
        with np.errstate(invalid="ignore"):
            gap = chosen.max(axis=1) - chosen.min(axis=1)  # NaN propagates: an empty group makes it undefined
    return {"ece": e, "gap": gap}


def group_shares(p: np.ndarray, seg: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group its share of pairs with p > 0.5 (the stereotype share), for a batch of samples.

    Parameters
    ----------
    p : ndarray of shape (B, n)
        Pair scores in [0, 1], one row per (re)sample; an exact 0.5 prefers neither sentence (not counted).
    seg : ndarray of int of shape (B, n)
        Group codes in [0, n_groups); a negative code leaves the pair out.
    n_groups : int
        Number of groups G.

    Returns
    -------
    share : ndarray of shape (B, n_groups)
        #{i in G : p_i > 0.5} / n_G per row and group, in [0, 1]; NaN for a group empty in that row.
    """
    b = p.shape[0]
    inside = seg >= 0
    flat = (np.arange(b)[:, None] * n_groups + seg)[inside]
    size = b * n_groups
    n = np.bincount(flat, minlength=size).reshape(b, n_groups)
    above = np.bincount(flat, weights=(p[inside] > 0.5).astype(np.float64), minlength=size).reshape(b, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, above / np.maximum(n, 1), np.nan)


def resampled_stats(
    p: np.ndarray,
    target: np.ndarray,
    seg: np.ndarray,
    n_groups: int,
    eligible: np.ndarray,
    n_bins: int = 10,
    binning: Binning = "equal_width",
) -> dict[str, np.ndarray]:
    """What the bootstrap of :func:`calibration_by_group` computes on each resample: :func:`group_stats` and each
    group's stereotype share (:func:`group_shares`).

    Parameters
    ----------
    p : ndarray of shape (B, n)
        Pair scores in [0, 1], one row per (re)sample.
    target : ndarray of shape (B, n)
        Targets in [0, 1] (labels or soft targets).
    seg : ndarray of int of shape (B, n)
        Group codes in [0, n_groups); a negative code leaves the pair out.
    n_groups : int
        Number of groups G.
    eligible : ndarray of bool of shape (n_groups,)
        The groups that enter the gap.
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each row's and group's own p.

    Returns
    -------
    stats : dict of str to ndarray
        :func:`group_stats`'s ``"ece"`` (B, n_groups) and ``"gap"`` (B,), and ``"share"`` (B, n_groups).
    """
    return group_stats(p, target, seg, n_groups, eligible, n_bins, binning) | {"share": group_shares(p, seg, n_groups)}


def _defined(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def calibration_by_group(
    p,
    target,
    groups,
    min_size: int = 20,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    draws: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    left_out: str | None = None,
    clusters=None,
) -> GroupResult:
    """Per-group ECE of ``p`` against ``target`` with intervals, and the largest gap (module docstring).

    ``groups``: one label per pair (None/NaN: in no group). Pairs whose target is NaN (no soft
    label) are left out too. ``left_out``: why pairs without a group have none (said in the result).

    Parameters
    ----------
    p : array-like of shape (n,)
        Pair scores in [0, 1], no NaN.
    target : array-like of shape (n,)
        Targets in [0, 1]: the labels y (identity protocol) or the soft targets of
        :func:`soft_target`; NaN leaves the pair out.
    groups : sequence of length n
        One label per pair (converted to strings by :func:`encode`); None/NaN: in no group.
    min_size : int, default=20
        Smallest group (in pairs) that gets an ECE and enters the gap; at least 1.
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each group's own p.
    draws : int, default=1000
        Bootstrap resamples of the pairs, and shuffles of the permutation test.
    seed : int, default=0
        Seed of the resamples and of the shuffles.
    level : float, default=0.95
        Confidence level of the intervals, in (0, 1).
    left_out : str or None, default=None
        Why pairs without a group have none, reported in ``GroupResult.left_out``.
    clusters : array-like of shape (n,), optional
        Cluster key of each pair: the bootstrap resamples clusters and the permutation test exchanges whole
        clusters (:mod:`gece.stats.bootstrap`, :mod:`gece.stats.gap`); None: every pair its own cluster.

    Returns
    -------
    result : GroupResult
        Each group's size, ECE and interval, the largest gap with its interval and permutation
        p-value, and the counts of pairs used and left out.

    References
    ----------
    .. [1] Sabir et al. (2026). *The Confidence Trap*. arXiv:2601.07806 (Table 4).
    .. [2] A. Kumar, P. Liang and T. Ma (2019). Verified uncertainty calibration. *Advances in Neural
           Information Processing Systems 32* (NeurIPS 2019).
    .. [3] B. Efron and R. J. Tibshirani (1993). *An Introduction to the Bootstrap*. Chapman & Hall.
    """
    names, p, target, seg, clusters, (n_no_group, n_no_target) = _pairs_in_groups(p, target, groups, min_size, clusters)
    k = len(names)
    counts = np.bincount(seg, minlength=k)
    eligible = counts >= min_size
    point = resampled_stats(p[None, :], target[None, :], seg[None, :], k, eligible, n_bins, binning)
    samples = (
        bootstrap(
            resampled_stats,
            {"p": p, "target": target, "seg": seg},
            draws,
            seed,
            n_groups=k,
            eligible=eligible,
            n_bins=n_bins,
            binning=binning,
            clusters=clusters,
        )
        if p.size and eligible.any()
        else {}
    )
    stats = _group_eces(names, counts, eligible, point, samples, level, min_size)
    gap = _largest_gap(names, eligible, point, samples, level, min_size)
    if gap.n_groups > 1:
        gap = GroupGap(
            **{
                **vars(gap),
                "p_perm": permutation_gap_p(
                    p, target, seg, k, eligible, gap.gap, draws, seed, n_bins, binning, clusters
                ),
            }
        )
    why = [left_out] if left_out and n_no_group else ([f"{n_no_group} pairs have no value"] if n_no_group else [])
    if n_no_target:
        why.append(f"{n_no_target} pairs have no soft label (no annotations)")
    return GroupResult(stats, gap, p.size, n_no_group + n_no_target, "; ".join(why) or None)


def _pairs_in_groups(
    p, target, groups, min_size: int, clusters
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, tuple[int, int]]:
    """Check the inputs of :func:`calibration_by_group` and keep the pairs that have a group and a target:
    (group names, their p, target, group index and cluster, (pairs without a group, pairs in a group without
    a target))."""
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    target = np.asarray(target, dtype=np.float64).reshape(-1)
    if p.shape != target.shape or len(groups) != p.size:
        raise ValueError(f"p, target and groups differ in length ({p.size}, {target.size}, {len(groups)})")
    if p.size and (np.isnan(p).any() or p.min() < 0 or p.max() > 1):
        raise ValueError("p must lie in [0, 1] and contain no NaN")
    if min_size < 1:
        raise ValueError(f"min_size must be at least 1, got {min_size}")
    names, seg = encode(groups)
    no_target = np.isnan(target)
    if ((target[~no_target] < 0) | (target[~no_target] > 1)).any():
        raise ValueError("target must lie in [0, 1]")
    n_no_group = int((seg == NO_GROUP).sum())
    n_no_target = int((no_target & (seg != NO_GROUP)).sum())
    keep = (seg != NO_GROUP) & ~no_target
    kept_clusters = None if clusters is None else np.asarray(clusters)[keep]
    return names, p[keep], target[keep], seg[keep], kept_clusters, (n_no_group, n_no_target)


def _group_eces(
    names: list[str],
    counts: np.ndarray,
    eligible: np.ndarray,
    point: dict,
    samples: dict,
    level: float,
    min_size: int,
) -> list[GroupStat]:
    """Each group's size, ECE and stereotype share with their bias-corrected intervals; a group under ``min_size``
    pairs gets its share alone and why it has no ECE."""
    stats = []
    for i, name in enumerate(names):
        share = _defined(point["share"][0, i])
        if not eligible[i]:
            reason = f"{counts[i]} pairs, fewer than min_size = {min_size}"
            stats.append(GroupStat(name, int(counts[i]), None, None, None, reason, share))
            continue
        est = _defined(point["ece"][0, i])
        lo, hi = bias_corrected_interval(samples["ece"][:, i], est, level, (0.0, 1.0))
        share_lo, share_hi = bias_corrected_interval(samples["share"][:, i], share, level, (0.0, 1.0))
        stats.append(GroupStat(name, int(counts[i]), est, lo, hi, None, share, share_lo, share_hi))
    return stats


def _largest_gap(
    names: list[str], eligible: np.ndarray, point: dict, samples: dict, level: float, min_size: int
) -> GroupGap:
    idx = np.flatnonzero(eligible)
    if idx.size == 0:
        reason = "no groups" if not names else f"no group has at least min_size = {min_size} pairs"
        return GroupGap(None, None, None, None, None, 0, reason)
    e = point["ece"][0, idx]
    high, low = idx[int(np.argmax(e))], idx[int(np.argmin(e))]
    est = _defined(point["gap"][0])
    lo, hi = bias_corrected_interval(samples["gap"], est, level, (0.0, 1.0))
    return GroupGap(
        est, lo, hi, names[high], names[low], int(idx.size), None if idx.size > 1 else "one group: nothing to compare"
    )


def permutation_gap_p(
    p: np.ndarray,
    target: np.ndarray,
    seg: np.ndarray,
    n_groups: int,
    eligible: np.ndarray,
    estimate: float | None,
    draws: int,
    seed: int,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    clusters: np.ndarray | None = None,
) -> float | None:
    """One-sided permutation p-value of the largest gap: the group labels shuffled ``draws`` times among the
    pairs (group sizes kept), (1 + #{null gap >= gap}) / (draws + 1). None when the gap is undefined.

    Parameters
    ----------
    p : ndarray of shape (n,)
        Pair scores in [0, 1].
    target : ndarray of shape (n,)
        Targets in [0, 1].
    seg : ndarray of int of shape (n,)
        Group codes in [0, n_groups); codes are shuffled among the pairs with a code >= 0.
    n_groups : int
        Number of groups G.
    eligible : ndarray of bool of shape (n_groups,)
        The groups that enter the gap.
    estimate : float or None
        The observed gap; None when undefined.
    draws : int
        Number of shuffles; below 1 no test is run.
    seed : int
        Seed of the shuffles (:func:`gece.stats.gap.null_statistics`).
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_width", "equal_mass"}, default="equal_width"
        Bin edges m / M, or the m / M quantiles of each shuffled group's own p.
    clusters : ndarray of shape (n,), optional
        Cluster key of each pair: whole clusters are exchanged (:func:`gece.stats.gap.null_statistics`).

    Returns
    -------
    p_perm : float or None
        The one-sided p-value in (0, 1], counted over the shuffles whose null gap is defined (a null
        gap within 1e-12 of the estimate counts as reaching it); None when ``estimate`` is None or
        ``draws`` < 1.

    References
    ----------
    .. [1] B. Phipson and G. K. Smyth (2010). Permutation P-values should never be zero: calculating
           exact P-values when permutations are randomly drawn. *Statistical Applications in Genetics
           and Molecular Biology* 9(1).
    """
    if estimate is None or draws < 1:
        return None
    d = null_statistics(
        p,
        target,
        seg,
        draws,
        seed,
        lambda pp, tt, g: group_stats(pp, tt, g, n_groups, eligible, n_bins, binning)["gap"],
        clusters,
    )
    d = d[np.isfinite(d)]
    # a null gap equal to the estimate up to rounding counts as reaching it
    return float((1 + int((d >= estimate - 1e-12).sum())) / (d.size + 1))
