"""SynthBias's referent-resolution protocol (``benchmarks.<b>.synthbias: referent``): its numbers, its block of each
run's metrics report and its pairwise comparison. The rows are :mod:`gece.io.formats.synthbias_referent`'s, the
arithmetic :mod:`gece.stats.referent`'s, the page :mod:`gece.protocols.referent_page`'s; docs/metrics.md
"Referent resolution" states every formula.

The skill numbers are for the full set's referent positions: w, the share of the source's type2 sentence pairs
whose referent is named second (:func:`gece.io.formats.synthbias_referent.position_mix`), read from the source
when the stage starts, weighs the subset's rows (which balance the positions); every other number is on the
subset's sentence pairs as sampled. Every interval resamples sentence pairs (the he and the she row together),
the same pairs for every run of a comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from gece.catalog.metric_defs import Metric
from gece.io.formats.synthbias_referent import position_mix
from gece.io.schemas.metric_reports import block_model
from gece.io.settings.sections import BenchmarkSpec, MetricsParams
from gece.stats import referent
from gece.stats.bootstrap import bootstrap
from gece.stats.intervals import bias_corrected_interval

NAME = "referent"  # the block's key in reports/metrics/<b>/<m>.json
# p is the probability of the pronoun's stereotypical occupation, y = 1 when it is the referent; no Gender-ECE here:
# the words that differ are occupations, so the group metric is the top-label ECE by pronoun gender
METRICS: tuple[Metric, ...] = (
    Metric(
        "ece_toplabel", "ECE top-label", "high", True, "bins of conf = max(p, 1 − p) against correct = 1[(p > 0.5) = y]"
    ),
    Metric(
        "accuracy", "accuracy (subset)", "low", True, "share of rows whose more probable occupation is the referent"
    ),
    Metric("brier", "Brier (subset)", "high", True, "mean (p − y)², p the stereotypical occupation's probability"),
    Metric(
        "accuracy_full",
        "accuracy (full set's positions)",
        "low",
        True,
        "(1 − w) · accuracy_first + w · accuracy_second, w the full set's share of referents named second",
    ),
    Metric(
        "baseline_last_full",
        "always the last-mentioned (full set)",
        None,
        False,
        "w: the accuracy of always choosing the occupation named second, on the full set",
    ),
    Metric(
        "over_last_full",
        "Δ accuracy − last-mentioned (full set)",
        None,
        True,
        "accuracy_full − w",
        signed=True,
    ),
    Metric(
        "brier_skill",
        "Brier skill vs p = 0.5",
        "low",
        True,
        "1 − Brier_w / 0.25, Brier_w = (1 − w) · Brier_first + w · Brier_second: above 0 beats p = 0.5 on every row",
        signed=True,
    ),
    Metric(
        "sensitivity",
        "pronoun sensitivity",
        None,
        True,
        "share of sentence pairs whose chosen occupation changes with the pronoun (a tie: a fair coin)",
    ),
    Metric("ece_male", "ECE (he, him, his)", "high", True, "top-label ECE within the rows whose pronoun is male"),
    Metric("ece_female", "ECE (she, her)", "high", True, "top-label ECE within the rows whose pronoun is female"),
    Metric("ece_gap", "Δ ECE female − male", None, True, "ECE by pronoun gender: female − male", signed=True),
    Metric("ece_pro", "ECE pro-stereotypical", "high", True, "top-label ECE within the rows where y = 1"),
    Metric("ece_anti", "ECE anti-stereotypical", "high", True, "top-label ECE within the rows where y = 0"),
    Metric(
        "ece_first", "ECE referent first", "high", True, "top-label ECE within the rows whose referent is named first"
    ),
    Metric(
        "ece_second",
        "ECE referent second",
        "high",
        True,
        "top-label ECE within the rows whose referent is named second",
    ),
    Metric("accuracy_pro", "accuracy pro", "low", True, "referent accuracy within the rows where y = 1"),
    Metric("accuracy_anti", "accuracy anti", "low", True, "referent accuracy within the rows where y = 0"),
    Metric("accuracy_first", "accuracy referent first", "low", True, "referent accuracy, referent named first"),
    Metric("accuracy_second", "accuracy referent second", "low", True, "referent accuracy, referent named second"),
    Metric(
        "baseline_stereotype", "always the stereotype", None, False, "accuracy of p = 1 on every row: the share y = 1"
    ),
    Metric(
        "baseline_last",
        "always the last-mentioned (subset)",
        None,
        False,
        "accuracy of choosing the occupation named second, on the subset",
    ),
    Metric("over_stereotype", "Δ accuracy − stereotype", None, True, "accuracy − baseline_stereotype", signed=True),
    Metric("over_last", "Δ accuracy − last-mentioned (subset)", None, True, "accuracy − baseline_last", signed=True),
    Metric(
        "ucerf",
        "UCerF",
        "low",
        True,
        "mean over sentence pairs of 1 − |D(he) − D(she)| / 2, D = ±c (+ when correct), c = 2 − exp(H(p, 1 − p))",
    ),
    Metric("eo", "EO gap", "high", True, "max over pro and anti of |accuracy(he) − accuracy(she)|"),
    Metric("n", "rows", None, False, "rows scored in complete sentence pairs", varying_y=False),
    Metric("n_pairs", "sentence pairs", None, False, "sentence pairs (he and she row both scored)", varying_y=False),
    Metric(
        "n_unpaired", "rows left out", None, False, "scored rows whose other version was not scored", varying_y=False
    ),
)
COUNTS = ("n", "n_pairs", "n_unpaired")
BOUNDS = {"brier_skill": (-3.0, 1.0)}  # 1 − Brier / 0.25 with Brier in [0, 1]; signed ones in [−1, 1], others [0, 1]
# a run's keys in reports/summary.json: skill first, then calibration and fairness (with the intervals of SUMMARY_CI;
# 17 numbers move when a run is re-scored, at most 27 with its calibration, binning, comparison and special-token
# rows: tests/test_findings.py)
SUMMARY = (
    "n_pairs",
    "accuracy_full",
    "over_last_full",
    "brier_skill",
    "sensitivity",
    "ece_toplabel",
    "ece_gap",
    "ucerf",
)
SUMMARY_CI = ("over_last_full", "brier_skill", "sensitivity", "ece_toplabel", "ece_gap")
# what the compare stage tests between every two runs (Holm's family of a pair), and what the first screen draws
COMPARED = ("brier_skill", "accuracy_full", "sensitivity", "ece_toplabel", "ece_gap", "ucerf")
PANELS = ("brier_skill", "ece_toplabel")
Block = block_model(
    "ReferentBlock",
    METRICS,
    COUNTS,
    "The ``referent`` block of a run's metrics report on a ``synthbias: referent`` benchmark "
    "(gece.protocols.referent): skill for the full set's referent positions, top-label ECE by pronoun gender, "
    "stereotype and referent position, the baselines, UCerF and Equalized Odds, on complete sentence pairs, "
    "intervals resampling them.",
)


def applies(entry: BenchmarkSpec) -> bool:
    """Whether a benchmark's entry asks for this protocol (``synthbias: referent``)."""
    return entry.synthbias == "referent"


def reads(entry: BenchmarkSpec) -> list[Path]:
    """The SynthBias source, whose full set of positions gives w (:func:`position_mix`)."""
    return [Path(entry.source)]


def _units(run_pairs: pd.DataFrame, ids: np.ndarray, p: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The kernels' sentence-pair arrays (:func:`gece.stats.referent.units`) of the rows ``ids`` with their p and y,
    from the prepared rows' pronoun gender, referent position and sentence pair (``cluster``)."""
    mine = run_pairs.loc[ids]
    return referent.units(
        p,
        y,
        (mine["pronoun_gender"] == "male").to_numpy(),
        (mine["referent"] == "second").to_numpy(),
        mine["cluster"].to_numpy(object),
    )


def block(arrays: dict[str, np.ndarray], n_rows: int, mix: float, settings: MetricsParams) -> dict:
    """A run's block from its sentence pairs' ``arrays`` (``n_rows`` rows scored): each number of :data:`METRICS`,
    those with an interval with ``<key>_ci_low``/``<key>_ci_high``, the bias-corrected percentile interval over
    ``settings.bootstrap`` resamples of sentence pairs (seeded); ``n``, ``n_pairs``, ``n_unpaired`` count the rows
    and pairs (a row is unpaired when its other version was not scored, or when the two do not have opposite y)."""
    k = len(arrays["p_he"])
    kw = {"n_bins": settings.n_bins, "binning": settings.binning, "mix": mix}
    estimate = {key: float(v[0]) for key, v in referent.batch(**arrays, **kw).items()} if k else {}
    samples = bootstrap(referent.batch, arrays, settings.bootstrap, settings.seed, **kw) if k else {}
    out: dict = {"n": 2 * k, "n_pairs": k, "n_unpaired": n_rows - 2 * k}
    for m in METRICS:
        if m.key in out:
            continue
        value = estimate.get(m.key)
        out[m.key] = value if value is not None and np.isfinite(value) else None
        if m.interval:
            bounds = BOUNDS.get(m.key, (-1.0, 1.0) if m.signed else (0.0, 1.0))
            lo, hi = (
                bias_corrected_interval(samples[m.key], out[m.key], settings.ci, bounds)
                if out[m.key] is not None
                else (None, None)
            )
            out[f"{m.key}_ci_low"], out[f"{m.key}_ci_high"] = lo, hi
    return Block.model_validate(out).model_dump()


def measurer(entry: BenchmarkSpec, pairs: pd.DataFrame, settings: MetricsParams) -> Callable[[pd.DataFrame], dict]:
    """The metrics stage's hook: a run's scores (``pair_id``, ``p``, ``y``) -> its block (:func:`block`), with w read
    once from the entry's source."""
    mix = position_mix(entry.source)

    def measure(scores: pd.DataFrame) -> dict:
        ids = scores["pair_id"].to_numpy(object)
        arrays = _units(pairs, ids, scores["p"].to_numpy(np.float64), scores["y"].to_numpy(np.int64))
        return block(arrays, len(scores), mix, settings)

    return measure


def comparer(entry: BenchmarkSpec, pairs: pd.DataFrame, settings: MetricsParams, draws: int, seed: int):
    """The compare stage's hook (:data:`gece.stats.ablation.Measure`): a run on the rows two runs share -> the
    numbers of :data:`COMPARED` and their ``draws`` bootstrap draws over its sentence pairs (seeded: the two runs
    share their sentence pairs, in the same order, so they are resampled alike)."""
    mix = position_mix(entry.source)
    kw = {"n_bins": settings.n_bins, "binning": settings.binning, "mix": mix}

    def measure(run, _clusters) -> tuple[dict, dict]:
        arrays = _units(pairs, run.pair_id, run.p, run.y)
        return referent.batch(**arrays, **kw), bootstrap(referent.batch, arrays, draws, seed, **kw)

    return measure
