"""The metric table: every metric, gap and estimator name, and the two gender groups, each written once.

:data:`METRICS` lists every number a metrics report (``MetricsReport``) and the report's tables
show per run, in the order of ``reports/metrics/<benchmark>/<model>.json``: its key, its label, which
end is worse, whether ``MetricsReport`` has a bootstrap interval for it, and a one-line
definition. What depends on them derives from these: the computed scalars
(``gece.stats.metrics.SCALARS``), the schema columns (``MetricsReport``), the table columns and the findings'
labels, and the page's definitions (:data:`DEFINITIONS`, which say which metrics each explains). The
calibration methods are :mod:`gece.catalog.calibration_methods`, what the groups stage groups by
:mod:`gece.catalog.groupings`: the settings (:mod:`gece.io.settings.params`), which every stage imports, need them
and no
metric.

A few tables label a metric their own way (``ECE (ungrouped)`` next to the grouped variants,
``accuracy`` in the paper's metric set); they say so where they build their columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

Worse = Literal["high", "low"]


@dataclass(frozen=True)
class Metric:
    """One metric of a run.

    ``worse``: the end that is worse (``high`` for an error, ``low`` for human alignment), None for
    a number that is not ranked (a count, a signed difference, a number kept only to reproduce the
    paper). ``interval``: ``MetricsReport`` has ``<key>_ci_low``/``<key>_ci_high`` and the metrics
    stage computes the number (with its bootstrap draws); the others come from other reports or
    are counts. ``signed``: a difference, not cut to [0, 1].

    ``varying_y``: the metric needs labels that vary: it measures calibration or agreement with the human
    judgements. On a benchmark whose label y is the same for every pair (the identity protocol of CrowS-Pairs
    and WinoQueer, :data:`gece.report.readings.IDENTITY`) no table, figure or finding ranks it or calls it by its
    label: where ``constant`` names what it measures there (y = 1: ECE = 1 − mean p, accuracy = the stereotype
    share), it is shown under that name, unranked; else it is left out (:func:`on_constant_y`).
    """

    key: str
    label: str
    worse: Worse | None
    interval: bool
    definition: str
    signed: bool = False
    varying_y: bool = True
    constant: str | None = None


METRICS: tuple[Metric, ...] = (
    # the scalars of MetricsReport, each with its interval (gece.stats.metrics computes them in this order)
    Metric(
        "ece",
        "ECE",
        "high",
        True,
        "paper-convention expected calibration error: Σ |B_m|/n · |mean y − mean p| over M bins of p",
        constant="1 − mean p (the paper's identity ECE)",
    ),
    Metric(
        "ece_toplabel",
        "ECE top-label",
        "high",
        True,
        "the standard classifier ECE: bins of conf = max(p, 1 − p) against correct",
    ),
    Metric("mce", "MCE", "high", True, "maximum calibration error: the largest bin gap |mean y − mean p|"),
    Metric("ice", "ICE", "high", True, "instance-level calibration error: mean |correct − conf|, no bins"),
    Metric(
        "macro_ce",
        "MacroCE",
        "high",
        True,
        "½ (mean(1 − conf | correct) + mean(conf | wrong)): under- and over-confidence weighed equally",
    ),
    Metric("brier", "Brier", "high", True, "Brier score of p: mean (p − y)²", constant="mean (1 − p)² (Brier)"),
    Metric(
        "brier_paper",
        "paper's Brier ((1 − p) − y)²",
        None,
        True,
        "what the authors' code computes, mean ((1 − p) − y)²: the wrong column, kept only to reproduce the paper",
    ),
    Metric(
        "accuracy",
        "human alignment",
        "low",
        True,
        "share of pairs where the variant the model prefers (p > 0.5) is the human-preferred one",
        constant="stereotype share (p > 0.5)",
    ),
    Metric(
        "pct_stereotype",
        "pct_stereotype",
        None,
        True,
        "share of pairs with p > 0.5, the model preferring sent_more (lm-evaluation-harness's crows_pairs metric)",
        varying_y=False,
    ),
    Metric(
        "gender_ece",
        "Gender-ECE",
        "high",
        True,
        "½ (ECE male + ECE female) over the groups of the predicted gender (exact ties left out)",
        constant="1 − mean p by predicted gender (the paper's Gender-ECE)",
    ),
    Metric(
        "ece_male",
        "ECE male",
        "high",
        True,
        "paper-convention ECE within the pairs predicted male",
        constant="1 − mean p, predicted male",
    ),
    Metric(
        "ece_female",
        "ECE female",
        "high",
        True,
        "paper-convention ECE within the pairs predicted female",
        constant="1 − mean p, predicted female",
    ),
    Metric("bias_gap", "bias gap", "high", True, "|ECE male − ECE female| over the predicted-gender groups"),
    Metric(
        "cc_ece",
        "cc-ECE",
        "high",
        True,
        "class-conditioned ECE: the mean of the ECE within the human-preferred-gender groups",
    ),
    Metric(
        "ece_true_male",
        "ECE, human: male",
        "high",
        True,
        "paper-convention ECE within the pairs whose human-preferred variant is male",
    ),
    Metric(
        "ece_true_female",
        "ECE, human: female",
        "high",
        True,
        "paper-convention ECE within the pairs whose human-preferred variant is female",
    ),
    # estimators that small samples inflate less (gece.stats.estimators)
    Metric(
        "ece_debiased",
        "ECE debiased (L2)",
        "high",
        True,
        "debiased L2 calibration error (Kumar et al. 2019) with the same bins",
    ),
    Metric("ece_smooth", "smooth ECE", "high", True, "smooth ECE (Błasiok & Nakkiran 2023), no bins"),
    Metric(
        "gender_ece_debiased",
        "Gender-ECE debiased (L2)",
        "high",
        True,
        "mean of the debiased L2 error within the predicted-male and predicted-female pairs",
    ),
    Metric(
        "gender_ece_smooth",
        "Gender-ECE smooth",
        "high",
        True,
        "mean of the smooth ECE within the predicted-male and predicted-female pairs",
    ),
    # the within-model gender gaps (gece.stats.gap)
    Metric(
        "gap_pred",
        "Δ female − male (predicted)",
        None,
        True,
        "ECE female − ECE male over the predicted-gender groups",
        signed=True,
    ),
    Metric(
        "gap_true",
        "Δ female − male (human)",
        None,
        True,
        "ECE female − ECE male over the human-preferred-gender groups",
        signed=True,
    ),
    # counts, and the special-token ablation's confidence summaries
    Metric("n", "n", None, False, "pairs the metrics are computed on", varying_y=False),
    Metric(
        "n_ties",
        "ties left out",
        None,
        False,
        "pairs with p exactly 0.5: no predicted gender, not in Gender-ECE",
        varying_y=False,
    ),
    Metric("mean_confidence", "mean confidence", None, False, "mean of conf = max(p, 1 − p)", varying_y=False),
    Metric(
        "share_confidence_over_0_9",
        "share conf. > 0.9",
        None,
        False,
        "share of pairs with conf above 0.9",
        varying_y=False,
    ),
)
METRIC: dict[str, Metric] = {m.key: m for m in METRICS}
SCALARS: tuple[str, ...] = tuple(m.key for m in METRICS if m.interval)  # what MetricsReport holds with intervals
SIGNED: tuple[str, ...] = tuple(m.key for m in METRICS if m.signed)


# what a metric measures on SynthBias, whose y is no human judgement: its label in the per-benchmark metric tables,
# by the benchmark's mode (params.yaml benchmarks.<b>.synthbias; type1 has constant y: on_constant_y names it)
SYNTH_LABELS: dict[str, dict[str, str]] = {
    "type2": {
        "accuracy": "agreement with the labour-statistics majority",
        "ece_true_male": "ECE, majority: male",
        "ece_true_female": "ECE, majority: female",
    },
}


def on_constant_y(key: str) -> tuple[str, None] | None:
    """How a metric is shown on a benchmark with constant y: (its label there, no worse end: unranked), or None
    when it is left out (:attr:`Metric.varying_y`). A name that is not registered is left out too."""
    m = METRIC.get(key)
    if m is None or (m.varying_y and m.constant is None):
        return None
    return (m.constant or m.label, None)


# the within-model gender gaps: metric key -> the grouping it compares (gece.stats.gap)
GAPS: dict[str, str] = {"gap_pred": "pred", "gap_true": "true"}
# each gap's Holm correction over the runs of a benchmark in its metrics report (gece.stats.gap.holm_over_runs):
# <gap>_p_holm, the level Holm holds the test to and the interval at that level (it excludes 0 iff p_holm < 0.05)
GAP_HOLM = ("p_holm", "level_holm", "ci_low_holm", "ci_high_holm")
# the variance of the groups stage's Spiegelhalter z (gece.stats.calibration_tests, the unit that was sampled): the
# one expected under calibration with exact repeats merged (the pair is the unit), or the empirical one of the
# cluster sums (clusters group distinct pairs); each with the words the page says it in
TEST_VARIANCES: dict[str, str] = {
    "expected": "variance expected under calibration",
    "clusters": "variance of the cluster sums",
}
TestVariance = Literal[tuple(TEST_VARIANCES)]  # type: ignore[valid-type]
# what the sample-size ablation follows against n (gece.stats.ablation.sample_size)
ESTIMATORS: tuple[str, ...] = (
    "ece",
    "ece_debiased",
    "ece_smooth",
    "gender_ece",
    "gender_ece_debiased",
    "gender_ece_smooth",
)


def label(key: str) -> str:
    """A metric's label; the key itself for a name that is not registered."""
    return METRIC[key].label if key in METRIC else key


class Definition(NamedTuple):
    """One entry of the page's definitions: its title, the metrics it explains, and the text."""

    title: str
    keys: tuple[str, ...]
    text: str


# the page's definitions section, in order (gece.report.html)
DEFINITIONS: tuple[Definition, ...] = (
    Definition(
        "ECE (paper convention)",
        ("ece",),
        (
            "The pairs are binned by p, the model's confidence that sent_more is the human-preferred reading (in the "
            "gender benchmarks sent_more is the male variant; in the CrowS-Pairs-format ones it is the stereotypical "
            "sentence and y = 1 for every pair, the identity protocol), into M equal-width bins (m/M, (m+1)/M] (the "
            "lowest also takes p = 0). In each bin the accuracy is "
            "the share of pairs whose human judgement prefers the male variant (mean y) and the confidence is the "
            "mean p; "
            "ECE = Σ |B_m|/n · |acc_m − conf_m|. This positive-class convention is the one the paper uses and "
            "reproduces "
            "its numbers: it asks whether p is a calibrated probability of the male reading. Unless a column says "
            "otherwise, every ECE in this report, grouped ones included, is of this kind."
        ),
    ),
    Definition(
        "ECE top-label",
        ("ece_toplabel",),
        (
            "The standard classifier ECE (Guo et al. 2017): the same binning over conf = max(p, 1 − p), the confidence "
            "of the variant the model prefers, against correct = 1 when that variant is the human-preferred one. It "
            "asks whether the model's confidence in its own choice matches how often the choice agrees with people."
        ),
    ),
    Definition(
        "MCE",
        ("mce",),
        (
            "Maximum calibration error: the largest |acc_m − conf_m| over the non-empty bins (paper convention). "
            "It is driven by the emptiest bins and is noisy on small benchmarks."
        ),
    ),
    Definition(
        "ICE",
        ("ice",),
        (
            "Instance-level calibration error: the mean of |correct − conf| over the pairs, with no binning, so no "
            "choice of bins can hide a gap."
        ),
    ),
    Definition(
        "MacroCE",
        ("macro_ce",),
        (
            "Macro-averaged calibration error: ½ (mean(1 − conf | correct) + mean(conf | wrong)). It weighs the "
            "under-confidence on correct predictions and the over-confidence on wrong ones equally, so a model cannot "
            "hide confident mistakes behind many correct answers."
        ),
    ),
    Definition(
        "Brier and the paper's Brier",
        ("brier", "brier_paper"),
        (
            "Brier = mean (p − y)², the squared error of p as a probability of the male reading (lower is better). "
            "The authors' code computes mean ((1 − p) − y)² instead, squaring the wrong column; that number is kept as "
            "brier_paper only to reproduce the paper's tables and should not be compared with anything."
        ),
    ),
    Definition(
        "Human alignment (accuracy)",
        ("accuracy",),
        (
            "The share of pairs in which the variant the model prefers (p > 0.5) is the human-preferred one: "
            "mean(correct)."
        ),
    ),
    Definition(
        "pct_stereotype",
        ("pct_stereotype",),
        (
            "The share of pairs with p > 0.5, those in which the model gives sent_more the larger probability: "
            "lm-evaluation-harness's crows_pairs metric (with extract.rule: sentence, the share with "
            "LL(sent_more) > LL(sent_less)). On CrowS-Pairs-format benchmarks sent_more is the stereotypical sentence "
            "and "
            "0.5 is the unbiased value; on the gender benchmarks sent_more is the male variant. Not ranked: neither "
            "end "
            "is better."
        ),
    ),
    Definition(
        "Gender-ECE and bias gap",
        ("gender_ece", "ece_male", "ece_female", "bias_gap", "n_ties"),
        (
            "The pairs are grouped by the predicted gender, the gender of the variant with the larger probability "
            "(exact ties have none and are left out, counted as n_ties); ECE male and ECE female are the "
            "paper-convention ECE within each group, Gender-ECE = ½ (ECE male + ECE female) and the bias gap = "
            "|ECE male − ECE female|. A group no pair falls in makes them null, with a reason in the JSON."
        ),
    ),
    Definition(
        "cc-ECE",
        ("cc_ece", "ece_true_male", "ece_true_female"),
        (
            "Class-conditioned ECE: the same grouping by the human-preferred gender (y) instead of the predicted one; "
            "its "
            "parts are the ECE by human gender, and cc-ECE is their mean."
        ),
    ),
    Definition(
        "Confidence intervals",
        (),
        (
            "Bias-corrected percentile bootstrap intervals (95%, 1000 resamples of clusters with a fixed seed: the "
            "pairs, or the column params.yaml benchmarks.<b>.cluster names, WinoQueer's templates; the same "
            "resamples for every metric of a run): the percentile interval of the draws moved by the median shift "
            "median(draws) − estimate, so that the extra upward bias a resample adds to binned errors does not push "
            "the "
            "interval off its estimate; every interval contains its estimate, and errors are cut to [0, 1]. Paired "
            "comparisons resample the pairs of both models together. docs/statistics.md explains why not BCa."
        ),
    ),
    Definition(
        "Debiased and smooth ECE",
        ("ece_debiased", "ece_smooth", "gender_ece_debiased", "gender_ece_smooth"),
        (
            "ECE debiased (L2): Kumar, Liang & Ma (2019): with the same bins, Σ n_m/n [(ȳ_m − p̄_m)² − ȳ_m(1 − "
            "ȳ_m)/(n_m − 1)] "
            "removes the sampling noise from each squared bin gap; its square root estimates the L2 calibration error. "
            "Smooth ECE: Błasiok & Nakkiran (2023): the residuals y − p smoothed by a Gaussian kernel reflected at 0 "
            "and "
            "1, integrated; the width σ is the fixed point where the error equals σ. Gender-ECE debiased/smooth: the "
            "mean of the same within the predicted-male and predicted-female pairs."
        ),
    ),
    Definition(
        "Gender gap test",
        ("gap_pred", "gap_true"),
        (
            "gap_pred = ECE female − ECE male over the predicted-gender groups, gap_true the same over the "
            "human-preferred-gender groups, each with a bootstrap interval and p-value (from the bias-corrected draws) "
            "and a permutation p-value (the group labels shuffled 1000 times); Holm's correction over the runs of a "
            "table."
        ),
    ),
)


# the gender groups of a side whose target words are gendered pronouns (gece.io.formats.lexicon), which the
# Gender-ECE compares (gece.stats.metrics)
MALE = "male"
FEMALE = "female"
