"""Contracts of every file the pipeline reads or writes: one pydantic model per file kind.

Tabular artifacts are Parquet whose columns and Arrow types follow a row model (``PreparedPair``,
``ScoreRow``, ...); reports are JSON validated by a report model. The models only say what a
valid file holds; ``gece.io.files`` reads and writes the files against them.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    create_model,
    model_serializer,
    model_validator,
)

from gece.registry import (
    ESTIMATORS,
    GAPS,
    METHOD_NAMES,
    METRIC,
    SCALARS,
    GroupingName,
    GroupProtocol,
    MethodName,
)


class _Row(BaseModel):
    """A row of a tabular file. Floats must be finite: NaN and ±inf are errors, not values."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- rows
class BenchmarkRow(_Row):
    """One raw row of ``data/benchmarks/<name>.csv``."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)
    sent_more: str = Field(min_length=1)
    sent_less: str = Field(min_length=1)
    y: Literal[0, 1]
    bias_type: str | None = None


class PreparedPair(_Row):
    """One pair after validation and word-level alignment (``artifacts/prepared/<b>.parquet``).

    ``targets_*`` are the words in which the two sentences differ (docs/metrics.md), with their
    character spans ``[start, end)``; ``gender_*`` is the lexicon group of the side's
    target words (``male``/``female`` for pronouns, else the word itself).
    """

    pair_id: str
    row: int = Field(ge=1, description="1-based data row in the source CSV")
    sent_more: str
    sent_less: str
    y: Literal[0, 1]
    bias_type: str | None
    targets_more: list[str] = Field(min_length=1)
    targets_less: list[str] = Field(min_length=1)
    starts_more: list[int]
    ends_more: list[int]
    starts_less: list[int]
    ends_less: list[int]
    gender_more: str
    gender_less: str
    position: Literal["last", "mid"]
    n_targets: int = Field(ge=1, description="number of differing word blocks")
    first_diff_word: int = Field(ge=1, description="1-based index, in sent_more, of the first word that differs")
    first_diff: Literal["initial", "later"] = Field(
        description="initial: the sentences differ in their first word; later: they start alike"
    )
    cluster: str = Field(
        min_length=1,
        description="the resampling unit of the intervals (benchmarks.<b>.cluster): the pair_id of the first row "
        "with the same two sentences (pair), or sent_more with its differing words masked (template)",
    )


class AnnotationRow(_Row):
    """One annotator's label of one pair (``artifacts/annotations/<b>.parquet``): the bias types the
    annotator saw in the pair; ``[]`` = saw no stereotype (CrowS-Pairs' validation, :mod:`gece.io.crows`)."""

    one_row_per_pair: ClassVar[bool] = False  # a long table: a pair has one row per annotator

    pair_id: str
    row: int = Field(ge=1, description="1-based data row in the source CSV")
    annotator: str = Field(min_length=1)
    labels: list[str]


class AnnotatedPair(_Row):
    """Labels derived from the annotators (``artifacts/annotated/<b>.parquet``, :mod:`gece.stats.annotations`):
    ``n_support`` of ``n_annotators`` recognised the writer's bias type; ``y_soft`` = their share and
    ``y_hard`` the rule's label (null: no annotations, or a tie the rule drops)."""

    pair_id: str
    n_annotators: int = Field(ge=0)
    n_support: int = Field(ge=0)
    y_soft: float | None = Field(None, ge=0.0, le=1.0)
    y_hard: Literal[0, 1] | None = None


class ScoreRow(_Row):
    """Per-pair model score: the contract between scoring and everything downstream.

    ``logprob_*`` is log of the side's score, the sum over its target words of the word
    probability (so above 0 is possible when a side has several target words), ``logit_*`` the raw logit of
    the first target token, ``n_tokens_*`` the number of target tokens (null where unknown, e.g. the authors' released
    scores), and ``p = P_more / (P_more + P_less)``, the confidence that the male/``sent_more`` variant is the
    human-preferred one.
    """

    pair_id: str
    row: int = Field(ge=1)
    sent_more: str
    sent_less: str
    y: Literal[0, 1]
    bias_type: str | None
    targets_more: list[str] = Field(min_length=1)
    targets_less: list[str] = Field(min_length=1)
    gender_more: str
    gender_less: str
    n_tokens_more: int | None = Field(ge=0)
    n_tokens_less: int | None = Field(ge=0)
    logprob_more: float
    logprob_less: float
    logit_more: float | None
    logit_less: float | None
    p: float = Field(ge=0.0, le=1.0)
    scored_punct_only: bool | None = Field(
        None,
        description="every token that can move p is punctuation (rule shared: e.g. only the final '.'); "
        "false under sentence and mean; null under target and for released scores (not assessed)",
    )

    @model_validator(mode="after")
    def _p_matches_logprobs(self) -> ScoreRow:
        d = self.logprob_more - self.logprob_less
        if math.isfinite(d):
            expected = 1.0 / (1.0 + math.exp(-d)) if d >= 0 else math.exp(d) / (1.0 + math.exp(d))
            if abs(expected - self.p) > 1e-6:
                raise ValueError(
                    f"p={self.p!r} disagrees with the log-probabilities "
                    f"(sigmoid(logprob_more - logprob_less) = {expected!r})"
                )
        return self


# the prepared pair's columns a score row repeats, in ScoreRow's order (the rest come from the token scores)
SCORE_PAIR_COLUMNS = [name for name in ScoreRow.model_fields if name in PreparedPair.model_fields]


class ReferenceRow(_Row):
    """One row of the authors' released scores (``data/reference/<benchmark>/<model>.csv``)."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)
    idx: int = Field(ge=0)
    Sentence_more: str
    Sentence_less: str
    Pronoun_more: str
    Pronoun_less: str
    # a sum over the sentence's pronouns: above 1 where a pronoun occurs twice
    Pronoun_Probability_more: float = Field(gt=0.0)
    Pronoun_Probability_less: float = Field(gt=0.0)
    Pronoun_Logit_more: float
    Pronoun_Logit_less: float
    Normalized_Score_more: float = Field(ge=0.0, le=1.0)
    Normalized_Score_less: float = Field(ge=0.0, le=1.0)
    Predicted_Label: Literal[0, 1]
    True_Label: Literal[0, 1]


# ------------------------------------------------------------------------ reports
Num = float | None


class _MetricValues(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=0)
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(
        None, ge=0, description="clusters the intervals resample (benchmarks.<b>.cluster; docs/metrics.md)"
    )
    pct_stereotype_se_rows: float | None = Field(
        None, ge=0.0, description="standard error of pct_stereotype with every row independent"
    )
    pct_stereotype_se_clustered: float | None = Field(
        None, ge=0.0, description="its clustered standard error (Miller 2024): the repeats counted once"
    )
    n_punct_only: int | None = Field(
        None, ge=0, description="pairs whose rule scored only punctuation tokens (score files' scored_punct_only)"
    )
    n_ties: int = Field(ge=0)
    n_bins: int = Field(ge=1)
    binning: Literal["equal_width", "equal_mass"]
    null_reasons: str | None = None

    @model_serializer(mode="wrap")
    def _drop_empty_reasons(self, handler):
        data = handler(self)
        if data.get("null_reasons") is None:
            data.pop("null_reasons", None)
        return data


def _metric_fields() -> dict[str, Any]:
    """One nullable float per scalar with an interval in the metric registry (its definition as the
    field's description), its interval bounds, and the gaps' bootstrap and permutation p-values
    (names written once, in gece.registry and gece.stats.gap)."""
    fields: dict[str, Any] = {k: (Num, Field(..., description=METRIC[k].definition)) for k in SCALARS}
    fields |= {
        f"{k}_ci_{end}": (Num, Field(..., description=f"{end} end of the bootstrap interval of {k}"))
        for k in SCALARS
        for end in ("low", "high")
    }
    fields |= {f"{g}_{kind}": (Num, ...) for g in GAPS for kind in ("p", "p_perm")}
    return fields


MetricsReport = create_model(
    "MetricsReport",
    __base__=_MetricValues,
    __doc__="""``reports/metrics/<benchmark>/<model>.json``: flat, what ``dvc metrics`` reads.

    Every metric with an interval in ``registry.SCALARS``, ``<key>_ci_low``/``<key>_ci_high``
    (bias-corrected bootstrap interval) for each, and ``<gap>_p``/``<gap>_p_perm`` for the gender gaps. Null
    values are undefined metrics (e.g. no pair was predicted female); ``null_reasons`` then says
    why, and is absent otherwise.
    """,
    **_metric_fields(),
)


class BinRecord(BaseModel):
    """One bin of a reliability diagram (``reports/bins/<benchmark>/<model>.json`` is a list)."""

    model_config = ConfigDict(extra="forbid")
    bin: int = Field(ge=0)
    lower: float
    upper: float
    count: int = Field(ge=0)
    confidence: Num
    accuracy: Num
    gap: Num


BinsReport = TypeAdapter(list[BinRecord])


# --------------------------------------------------------------------- ablations
class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _sample_size_models() -> tuple[type[BaseModel], type[BaseModel]]:
    """The full-data values and the per-size statistics of every ``registry.ESTIMATORS``."""
    full = create_model("SampleSizeFull", __base__=_Report, n=(int, Field(ge=0)), **{k: (Num, ...) for k in ESTIMATORS})
    stats: dict[str, Any] = {"n": (int, Field(ge=1)), "draws": (int, Field(ge=1))}
    for k in ESTIMATORS:
        stats |= {
            f"{k}_mean": (Num, ...),
            f"{k}_std": (Num, Field(ge=0)),
            f"{k}_bias": (Num, ...),
            f"{k}_rmse": (Num, Field(ge=0)),
            f"{k}_defined": (int, Field(ge=0, description="subsets where the estimator is defined")),
        }
    return full, create_model("SampleSizeRow", __base__=_Report, **stats)


SampleSizeFull, SampleSizeRow = _sample_size_models()


class SampleSizeReport(_Report):
    """``reports/ablation/sample_size/<benchmark>/<model>.json``."""

    full: SampleSizeFull  # type: ignore[valid-type]
    sizes: list[SampleSizeRow]  # type: ignore[valid-type]


class BinningCell(_Report):
    ece: Num
    gender_ece: Num
    ece_male: Num
    ece_female: Num


# ``reports/ablation/binning/<benchmark>/<model>.json``: {binning: {n_bins: cell}}
BinningReport = TypeAdapter(dict[Literal["equal_width", "equal_mass"], dict[str, BinningCell]])

NEUTRAL_KEYS = ("ece", "gender_ece", "ece_male", "ece_female", "macro_ce", "ice", "brier", "accuracy")


class NeutralRow(_Report):
    ece: Num
    gender_ece: Num
    ece_male: Num
    ece_female: Num
    macro_ce: Num
    ice: Num
    brier: Num
    accuracy: Num
    n: int = Field(ge=0)


# ``reports/ablation/neutral/<model>.json``: {benchmark: row}
NeutralReport = TypeAdapter(dict[str, NeutralRow])


class SpecialTokensSide(MetricsReport):
    """The metrics JSON plus the confidence profile."""

    mean_confidence: Num
    share_confidence_over_0_9: Num


# ``reports/ablation/special_tokens/<model>.json``: {benchmark: {"with": .., "without": ..}}
SpecialTokensReport = TypeAdapter(dict[str, dict[Literal["with", "without"], SpecialTokensSide]])


class CompareCell(_Report):
    a: Num
    b: Num
    diff: Num = Field(description="a - b")
    ci_low: Num
    ci_high: Num
    p_value: Num
    mde: Num = Field(description="minimum difference detected with the configured power at alpha")
    p_holm: Num
    significant: bool
    significant_holm: bool


class ComparePair(_Report):
    a: str
    b: str
    metrics: dict[str, CompareCell]


class MdeSummary(_Report):
    median: Num
    min: Num
    max: Num


class ComparePower(_Report):
    """Minimum detectable differences (``mde``) summarized per metric over the pairs of ``runs``
    (``paper``: the authors' runs of the benchmark; ``all``: every run)."""

    level: float = Field(gt=0, lt=1)
    runs: Literal["paper", "all"]
    pairs: int = Field(ge=0)
    mde: dict[str, MdeSummary]


class CompareReport(_Report):
    """``reports/compare/<benchmark>.json``: paired bootstrap between every two models."""

    benchmark: str
    n: int
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(None, ge=0, description="clusters among the n: the unit the bootstrap resamples")
    draws: int
    seed: int
    level: float
    alpha: float
    n_bins: int
    binning: Literal["equal_width", "equal_mass"]
    pairs: list[ComparePair]
    power: ComparePower


# -------------------------------------------------------------------- calibration
CalibrationStatus = Literal["ok", "degenerate", "failed"]
CalibrationMethod = MethodName
CalibrationBinMethod = Literal[("uncalibrated", *METHOD_NAMES)]  # type: ignore[valid-type]


class _CalibratedRowBase(_Row):
    pair_id: str
    row: int = Field(ge=1)
    y: Literal[0, 1]
    gender_more: str
    gender_less: str
    p: float = Field(ge=0.0, le=1.0)
    split: Literal["fit", "eval"]
    fold: int = Field(ge=0)


CalibratedRow = create_model(
    "CalibratedRow",
    __base__=_CalibratedRowBase,
    __doc__="""Per-pair calibrated scores (``artifacts/calibrated/<benchmark>/<model>.parquet``).

    ``split`` says whether the pair is in the calibration (``fit``) or the held-out (``eval``)
    part of the split protocol; ``split_<method>`` is its held-out p' under that protocol, null
    for ``fit`` pairs (an in-sample p' would flatter the method) and for a method that was not
    run or whose fit failed without scores. ``fold`` is the cross-fitting fold in which the
    pair is held out and ``crossfit_<method>`` its out-of-fold p' (null likewise).
    """,
    **{
        f"{protocol}_{name}": (float | None, Field(ge=0.0, le=1.0))
        for protocol in ("split", "crossfit")
        for name in METHOD_NAMES
    },
)


class MethodReport(BaseModel):
    """One calibration method under one protocol.

    ``metrics``: the metrics of the calibrated scores on the evaluation pairs (null when the
    fit failed without scores); ``reason``: why the status is not ``ok`` (null when it is).
    """

    model_config = ConfigDict(extra="forbid")
    status: CalibrationStatus
    reason: str | None
    params: dict[str, Any]
    metrics: MetricsReport | None


class CrossfitMethodReport(MethodReport):
    """Under cross-fitting: ``params = {"folds": [per-fold params]}``, ``fold_status`` per fold;
    ``status`` is the worst fold's (failed > degenerate > ok)."""

    fold_status: list[CalibrationStatus]


class SplitReport(BaseModel):
    """The split protocol: ``n_fit`` calibration pairs, ``n_eval`` held-out pairs."""

    model_config = ConfigDict(extra="forbid")
    n_fit: int = Field(ge=0)
    n_eval: int = Field(ge=0)
    fraction: float
    uncalibrated: MetricsReport
    methods: dict[CalibrationMethod, MethodReport]


class CrossfitReport(BaseModel):
    """k-fold cross-fitting: ``n_fit`` = pairs fitted on, summed over the folds ((k − 1) · n),
    ``n_eval`` = pairs evaluated, summed over the folds (n: each pair once, out of fold)."""

    model_config = ConfigDict(extra="forbid")
    n_fit: int = Field(ge=0)
    n_eval: int = Field(ge=0)
    folds: int = Field(ge=2)
    uncalibrated: MetricsReport
    methods: dict[CalibrationMethod, CrossfitMethodReport]


class CalibrationReport(BaseModel):
    """``reports/calibration/<benchmark>/<model>.json`` (DVC metrics)."""

    model_config = ConfigDict(extra="forbid")
    split: SplitReport
    crossfit: CrossfitReport


class CalibrationBinRecord(BinRecord):
    """One reliability bin (paper convention, p vs y, on the evaluation pairs) of one protocol and
    method (``uncalibrated`` for p): ``reports/calibration_bins/<benchmark>/<model>.json`` is a list."""

    protocol: Literal["split", "crossfit"]
    method: CalibrationBinMethod


CalibrationBinsReport = TypeAdapter(list[CalibrationBinRecord])


# ----------------------------------------------------------------- calibration by group
Err = Annotated[float, Field(ge=0.0, le=1.0)] | None


class GroupCell(_Report):
    """One group of a grouping: its pairs, its ECE and bias-corrected interval; ``reason`` says why they are null."""

    group: str
    n: int = Field(ge=0)
    n_distinct: int | None = Field(None, ge=0, description="distinct (sent_more, sent_less) pairs among the n")
    n_clusters: int | None = Field(
        None, ge=0, description="clusters among the n (benchmarks.<b>.cluster): the unit the interval resamples"
    )
    pct_stereotype: float | None = Field(
        None, ge=0.0, le=1.0, description="share of the group's pairs with p > 0.5 (identity protocol)"
    )
    ece: Err
    ci_low: Err
    ci_high: Err
    reason: str | None


class GroupGapReport(_Report):
    """max ECE − min ECE over the groups with at least ``min_size`` pairs, its interval, and the two groups."""

    gap: Err
    ci_low: Err
    ci_high: Err
    high: str | None = Field(description="the group with the largest ECE")
    low: str | None = Field(description="the group with the smallest ECE")
    n_groups: int = Field(ge=0, description="groups compared")
    reason: str | None
    p_perm: Num = Field(ge=0.0, le=1.0, description="one-sided permutation p-value (group labels shuffled)")


class GroupingReport(_Report):
    """Calibration of one run by one grouping under one protocol (``reason``: why it was not computed)."""

    grouping: GroupingName  # type: ignore[valid-type]
    protocol: GroupProtocol
    n: int = Field(ge=0, description="pairs in some group (with a soft label, under the soft protocol)")
    n_left_out: int = Field(ge=0)
    left_out: str | None = Field(description="why pairs were left out")
    groups: list[GroupCell]
    gap: GroupGapReport | None
    reason: str | None


class GroupsReport(_Report):
    """``reports/groups/<benchmark>.json``: per run, every grouping and protocol of params.yaml's ``groups``."""

    benchmark: str
    n_bins: int = Field(ge=1)
    binning: Literal["equal_width", "equal_mass"]
    draws: int = Field(ge=1)
    seed: int = Field(ge=0)
    level: float = Field(gt=0, lt=1)
    min_size: int = Field(ge=1)
    runs: dict[str, list[GroupingReport]]


# ------------------------------------------------------------------------ summary
Section = dict[str, dict[str, dict[str, Num]]]


class SummaryReport(_Report):
    """``reports/summary.json`` (:func:`gece.report.findings.summary`), the one file dvc.yaml declares as DVC metrics:
    headline metrics per run and a compact summary per calibration, ablation and comparison. On a benchmark with the
    same label for every pair a run carries ``stereotype_share``, ``shortfall`` (1 − mean p) and ``shortfall_gender``
    instead of ``ece``, ``gender_ece``, ``macro_ce`` and ``accuracy`` (:mod:`gece.report.identity`)."""

    runs: Section = {}
    calibration: Section = {}
    binning: Section = {}
    neutral: Section = {}
    special_tokens: Section = {}
    compare: dict[str, dict[str, int]] = {}
    groups: Section = {}
    rules: Section = Field(
        {}, description="per identity benchmark and run: stereotype share and 1 − mean p under each rule, differences"
    )


# -------------------------------------------------------------------- annotations
class Quantiles(_Report):
    """Quantiles of one number over annotators (each annotator's agreement with the majority)."""

    n: int = Field(ge=0, description="annotators")
    min: float
    q25: float
    median: float
    q75: float
    max: float
    mean: float


class Agreement(_Report):
    """Chance-corrected agreement over the items: null with a reason when it is undefined."""

    binary: float | None = Field(description="on 'supports the writer's bias type' (1) or not (0)")
    nominal: float | None = Field(description="on the label set as one category ('none', a type, 'a+b')")
    items: int = Field(ge=0, description="items with at least two labels (Fleiss: the items used)")
    reason: str | None = None


class AnnotationReport(_Report):
    """``reports/annotations/<benchmark>.json`` (:mod:`gece.pipeline.annotate`)."""

    benchmark: str
    n_pairs: int = Field(ge=0)
    n_annotated: int = Field(ge=0, description="pairs with at least one annotator")
    n_annotators: int = Field(ge=0, description="distinct annotators")
    n_labels: int = Field(ge=0, description="annotation rows (pair x annotator)")
    rule: str
    tie: str
    support_rate: float | None = Field(description="share of labels that name the writer's bias type")
    n_hard: dict[str, int] = Field(
        description="pairs by y_hard: '1', '0', 'tie' (ties the rule dropped or settled), 'none' (no annotations)"
    )
    alpha: Agreement = Field(description="Krippendorff's alpha (nominal metric)")
    kappa: Agreement = Field(description="Fleiss' kappa")
    annotator_agreement: Quantiles | None = Field(
        description="each annotator's share of items where their binary label equals y_hard"
    )
    vote_shares: dict[str, int] = Field(description="pairs by 'n_support/n_annotators'")
    reason: str | None = Field(None, description="why the agreement values are null")
