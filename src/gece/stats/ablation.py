"""The ablations (docs/metrics.md, "Ablations") and paired model comparison; they compose metrics and bootstrap.

All functions take per-pair arrays (``p``, ``y`` and each side's gender) and return plain
dicts shaped like the JSON files the stages write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np

from gece.catalog.metric_defs import ESTIMATORS
from gece.stats import metrics
from gece.stats.bootstrap import bootstrap, subsample
from gece.stats.intervals import (
    bias_corrected_interval,
    bias_corrected_p,
    detectable_difference,
    holm_intervals,
)
from gece.stats.metrics import Binning


@dataclass(frozen=True)
class Run:
    """One model's scores on one benchmark, as arrays aligned by pair."""

    pair_id: np.ndarray
    p: np.ndarray
    y: np.ndarray
    gender_more: np.ndarray
    gender_less: np.ndarray

    def kernel_inputs(self) -> dict[str, np.ndarray]:
        """The arrays ``metrics.batch_metrics`` takes, with the group codes precomputed."""
        return {
            "p": self.p,
            "y": self.y,
            "pred_group": metrics.predicted_groups(self.p, self.gender_more, self.gender_less),
            "true_group": metrics.true_groups(self.y, self.gender_more, self.gender_less),
        }


def _value(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


# ----------------------------------------------------------------------- sample size
# the estimators of the sample-size ablation: binned, debiased and smooth, ungrouped and by gender


def sample_size(
    run: Run,
    sizes: Sequence[int],
    draws: int,
    seed: int,
    n_bins: int = 10,
    binning: Binning = "equal_width",
) -> dict:
    """Every estimator of ``ESTIMATORS`` on random subsets: for each N <= n, ``draws`` subsets of
    N pairs without replacement (seeded per N); over the subsets the mean, std (ddof=0), bias
    (mean − the estimator's own value on all pairs) and RMSE = √(mean (value − full)²) = √(bias² + std²).

    A grouped estimator is undefined on a subset where no pair is predicted male or none female;
    such subsets are left out of its statistics and counted in ``<key>_defined``.
    """
    inputs = run.kernel_inputs()
    full = metrics.batch_metrics(**inputs, n_bins=n_bins, binning=binning)
    full_values = {k: _value(full[k][0]) for k in ESTIMATORS}
    n = len(run.p)
    rows = []
    for k, size in enumerate(s for s in sizes if s <= n):
        vals = subsample(metrics.batch_metrics, inputs, size, draws, seed + k, n_bins=n_bins, binning=binning)
        row: dict = {"n": int(size), "draws": int(draws)}
        for key in ESTIMATORS:
            v = vals[key]
            defined = np.isfinite(v)
            v = v[defined]
            ref = full_values[key]
            row[f"{key}_mean"] = _value(v.mean()) if v.size else None
            row[f"{key}_std"] = _value(v.std(ddof=0)) if v.size else None
            row[f"{key}_bias"] = _value(v.mean() - ref) if v.size and ref is not None else None
            row[f"{key}_rmse"] = _value(np.sqrt(np.mean((v - ref) ** 2))) if v.size and ref is not None else None
            row[f"{key}_defined"] = int(defined.sum())
        rows.append(row)
    return {"full": {"n": n, **full_values}, "sizes": rows}


# --------------------------------------------------------------------------- binning
def binning_grid(run: Run, bins: Sequence[int], binnings: Sequence[Binning] = metrics.BINNINGS) -> dict:
    """ECE and Gender-ECE for every number of bins and binning scheme:
    ``{binning: {str(M): {"ece": .., "gender_ece": .., "ece_male": .., "ece_female": ..}}}``."""
    inputs = run.kernel_inputs()
    out: dict = {}
    for binning in binnings:
        out[binning] = {}
        for m in bins:
            v = metrics.batch_metrics(**inputs, n_bins=int(m), binning=binning)
            out[binning][str(m)] = {k: _value(v[k][0]) for k in ("ece", "gender_ece", "ece_male", "ece_female")}
    return out


# ------------------------------------------------------------------- confidence shape
def confidence_profile(p: np.ndarray, threshold: float = 0.9) -> dict:
    """Mean confidence max(p, 1 − p) and the share of pairs with confidence above ``threshold``."""
    conf = np.maximum(p, 1.0 - p)
    if conf.size == 0:
        return {"mean_confidence": None, "share_confidence_over_0_9": None}
    return {
        "mean_confidence": float(conf.mean()),
        "share_confidence_over_0_9": float((conf > threshold).mean()),
    }


# --------------------------------------------------------------------------- compare
COMPARED = ("ece", "gender_ece", "brier", "accuracy")


def pair_ranks(runs: Mapping[str, Run]) -> dict[str, int]:
    """Every pair id any run scores -> its place: the first run's order, then each later run's new pairs in its
    order. Raises ValueError when a run scores a pair twice."""
    rank: dict[str, int] = {}
    for name, r in runs.items():
        if len(set(r.pair_id)) != len(r.pair_id):
            raise ValueError(f"{name} scores a pair twice")
        for pid in r.pair_id:
            rank.setdefault(pid, len(rank))
    return rank


def shared_ids(a: Run, b: Run, rank: Mapping[str, int]) -> np.ndarray:
    """The pair ids both runs score, in ``rank`` order (:func:`pair_ranks`)."""
    return np.array(sorted(set(a.pair_id) & set(b.pair_id), key=rank.__getitem__), dtype=object)


def restrict(run: Run, ids: np.ndarray) -> Run:
    """``run`` on the pairs ``ids`` (each scored by it), in that order."""
    where = {pid: i for i, pid in enumerate(run.pair_id)}
    idx = np.array([where[pid] for pid in ids], dtype=np.int64)
    return Run(run.pair_id[idx], run.p[idx], run.y[idx], run.gender_more[idx], run.gender_less[idx])


def paired(names: tuple[str, str], a: Run, b: Run, rank: Mapping[str, int]) -> tuple[Run, Run]:
    """Two runs on the pairs both score (:func:`shared_ids`), checked to agree on the human labels. Raises
    ValueError when they share no pair or disagree on a label."""
    ids = shared_ids(a, b, rank)
    if not len(ids):
        raise ValueError(f"{names[0]} and {names[1]} share no pair")
    a, b = restrict(a, ids), restrict(b, ids)
    if not (a.y == b.y).all():
        raise ValueError(f"{names[1]} and {names[0]} disagree on the human labels")
    return a, b


# a benchmark's pairs -> (each pair's cluster key, or None: every pair its own; the counts beside n)
Describe = Callable[[np.ndarray], tuple[np.ndarray | None, dict[str, int]]]
# a run on the pairs two runs share, and their cluster keys -> (its numbers, {key: (1,) array}, and their bootstrap
# draws, {key: (draws,) array}); the draws of two runs must resample the same units with the same indices
Measure = Callable[[Run, np.ndarray | None], tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]]


def metrics_measure(draws: int, seed: int, n_bins: int = 10, binning: Binning = "equal_width") -> Measure:
    """The comparison's default :data:`Measure`: the metrics of :func:`gece.stats.metrics.batch_metrics` and their
    bootstrap draws, resampling the clusters (every run with the same seed and clusters: the same indices)."""

    def measure(run: Run, clusters: np.ndarray | None) -> tuple[dict, dict]:
        inputs = run.kernel_inputs()
        kw = {"n_bins": n_bins, "binning": binning}
        return metrics.batch_metrics(**inputs, **kw), bootstrap(
            metrics.batch_metrics, inputs, draws, seed, clusters=clusters, **kw
        )

    return measure


def compare(
    runs: Mapping[str, Run],
    draws: int,
    seed: int,
    level: float = 0.95,
    alpha: float = 0.05,
    n_bins: int = 10,
    binning: Binning = "equal_width",
    keys: Sequence[str] = COMPARED,
    power: float = 0.8,
    power_runs: Sequence[str] | None = None,
    power_of: Literal["paper", "all"] = "paper",
    describe: Describe | None = None,
    measure: Measure | None = None,
) -> dict:
    """Paired bootstrap comparison of every pair of runs on the same benchmark.

    Each pair of runs is compared on the pairs both score (:func:`paired`), its ``n`` beside it: a partial
    run (a smoke run, an lm-eval import with excluded pairs) changes only its own comparisons. ``describe``
    (the pair ids compared -> their cluster keys and counts): the draws resample clusters
    (:func:`gece.stats.bootstrap.bootstrap`), the same clusters for every run, and each pair of runs carries
    the counts (``n_distinct``, ``n_clusters``) beside its ``n``.

    Every run is resampled with the same pair indices (same seed, same pairs), so draw b of
    model A and draw b of model B see the same pairs; the difference A − B per draw gives a
    bias-corrected percentile interval and a two-sided p-value (:mod:`gece.stats.intervals`), and
    ``mde``, the smallest difference the test detects with ``power`` at ``alpha``
    (``intervals.detectable_difference``). Runs that score the same pairs are bootstrapped once.
    ``power`` summarizes ``mde`` per metric over the pairs of ``power_runs`` (``power_of`` says which:
    ``paper``, the paper runs where the benchmark has them; ``all``, every run that is no check), or over every
    pair when fewer than two are given: median, min and max. ``p_holm``
    adjusts the p-values of the metrics compared for one pair of models (Holm–Bonferroni over
    ``keys``), and ``ci_low_holm``/``ci_high_holm`` is the interval at the level Holm tests that
    metric at (``level_holm``, :func:`gece.stats.intervals.holm_alpha`), built to exclude 0 exactly
    when ``significant_holm`` (:func:`gece.stats.intervals.rejection_interval`). ``identical``: the
    two runs give every pair they share the same p (one run scored twice; its pairs are left out of the
    power summary). ``n`` (top level): the pairs any run scores. Across many pairs, mind that a bootstrap
    p-value cannot fall below 2/(draws + 1).

    ``measure`` (:data:`Measure`; default :func:`metrics_measure`) computes what is compared, ``keys``: a protocol's
    numbers on its own units (:attr:`gece.report.protocol.Protocol.comparer`) instead of the metrics of p.
    """
    rank = pair_ranks(runs)
    described: dict[tuple, tuple[np.ndarray | None, dict[str, int]]] = {}
    measured: dict[tuple, tuple[Mapping, Mapping]] = {}
    measure = measure or metrics_measure(draws, seed, n_bins, binning)

    def measured_on(name: str, run: Run, key: tuple) -> tuple[Mapping, Mapping]:
        if (name, key) not in measured:
            measured[(name, key)] = measure(run, described[key][0])
        return measured[(name, key)]

    pairs = []
    for a, b in combinations(runs, 2):
        run_a, run_b = paired((a, b), runs[a], runs[b], rank)
        key = tuple(run_a.pair_id)
        if key not in described:
            described[key] = describe(run_a.pair_id) if describe is not None else (None, {})
        (point_a, drawn_a), (point_b, drawn_b) = measured_on(a, run_a, key), measured_on(b, run_b, key)
        same = bool(np.array_equal(run_a.p, run_b.p))
        entry = {"a": a, "b": b, "n": len(key), **described[key][1], "identical": same, "metrics": {}}
        diffs = {}
        for k in keys:
            va, vb = _value(point_a[k][0]), _value(point_b[k][0])
            diffs[k] = d = drawn_a[k] - drawn_b[k]
            diff = None if va is None or vb is None else va - vb
            lo, hi = bias_corrected_interval(d, diff, level)
            entry["metrics"][k] = {
                "a": va,
                "b": vb,
                "diff": diff,
                "ci_low": lo,
                "ci_high": hi,
                "p_value": bias_corrected_p(d, diff),
                "mde": detectable_difference(d, alpha, power),
            }
        # Holm's family: the metrics compared for one pair of models
        cells = entry["metrics"]
        family = holm_intervals(
            [cells[k]["p_value"] for k in keys], [cells[k]["diff"] for k in keys], [diffs[k] for k in keys], alpha
        )
        for k, (adj, held_level, low, high) in zip(keys, family, strict=True):
            m = cells[k]
            m["p_holm"] = adj
            m["significant"] = m["p_value"] is not None and m["p_value"] < alpha
            m["significant_holm"] = adj is not None and adj < alpha
            m["level_holm"], m["ci_low_holm"], m["ci_high_holm"] = held_level, low, high
        pairs.append(entry)
    n = len(rank)
    chosen = [r for r in (power_runs or []) if r in runs]
    power_pairs = [e for e in pairs if e["a"] in chosen and e["b"] in chosen] if len(chosen) > 1 else pairs
    power_pairs = [e for e in power_pairs if not e["identical"]]  # one run scored twice has no spread to tell
    summary = {}
    for k in keys:
        mdes = [e["metrics"][k]["mde"] for e in power_pairs if e["metrics"][k]["mde"] is not None]
        summary[k] = {
            "median": float(np.median(mdes)) if mdes else None,
            "min": min(mdes, default=None),
            "max": max(mdes, default=None),
        }
    return {
        "n": n,
        "draws": draws,
        "seed": seed,
        "level": level,
        "alpha": alpha,
        "n_bins": n_bins,
        "binning": binning,
        "pairs": pairs,
        "power": {
            "level": power,
            "runs": power_of if len(chosen) > 1 else "all",
            "pairs": len(power_pairs),
            "mde": summary,
        },
    }
