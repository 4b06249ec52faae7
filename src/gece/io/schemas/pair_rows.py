"""The rows of the pair files: benchmark CSVs, prepared pairs, annotations, scores, the authors' released scores.

Tabular artifacts are Parquet whose columns and Arrow types follow a row model (``PreparedPair``,
``ScoreRow``, ...); the models only say what a valid file holds, :mod:`gece.io.files.readers` and
:mod:`gece.io.files.writer` read and write the files against them. Extract's token files are
:mod:`gece.io.schemas.tokens`.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from gece.io.schemas.schema_base import TableRow


class BenchmarkRow(TableRow):
    """One raw row of ``data/benchmarks/<name>.csv``."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)
    sent_more: str = Field(min_length=1)
    sent_less: str = Field(min_length=1)
    y: Literal[0, 1]
    bias_type: str | None = None


class PreparedPair(TableRow):
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


class SynthPronounPair(PreparedPair):
    """A prepared pair of SynthBias's pronoun protocol (:mod:`gece.io.formats.synthbias`) with the column the groups
    stage
    may group by besides the prepared ones. A reader that reads it as a ``PreparedPair`` ignores it."""

    referent: Literal["first", "second"] | None = Field(
        description="where the referent is named: first or second occupation (null on type1: no referent)"
    )


class SynthPair(PreparedPair):
    """A prepared row of SynthBias's referent protocol (:mod:`gece.io.formats.synthbias_referent`), with the columns the
    groups stage and the referent metrics group by. A reader that reads it as a ``PreparedPair`` ignores them."""

    pronoun_gender: Literal["male", "female"] = Field(description="the sentence's pronoun: he, him, his / she, her")
    stereotype: Literal["pro", "anti"] = Field(
        description="pro: the referent is the pronoun's stereotypical occupation"
    )
    referent: Literal["first", "second"] = Field(description="where the referent is named: first or second occupation")


# the prepared row schema of each SynthBias mode (benchmarks.<b>.synthbias); PreparedPair for every other benchmark
SYNTH_SCHEMAS: dict[str | None, type[PreparedPair]] = {
    None: PreparedPair,
    "type1": SynthPronounPair,
    "type2": SynthPronounPair,
    "referent": SynthPair,
}


class AnnotationRow(TableRow):
    """One annotator's label of one pair (``artifacts/annotations/<b>.parquet``): the bias types the
    annotator saw in the pair; ``[]`` = saw no stereotype (CrowS-Pairs' validation, :mod:`gece.io.formats.crows`)."""

    one_row_per_pair: ClassVar[bool] = False  # a long table: a pair has one row per annotator

    pair_id: str
    row: int = Field(ge=1, description="1-based data row in the source CSV")
    annotator: str = Field(min_length=1)
    labels: list[str]


class AnnotatedPair(TableRow):
    """Labels derived from the annotators (``artifacts/annotated/<b>.parquet``, :mod:`gece.stats.annotations`):
    ``n_support`` of ``n_annotators`` recognised the writer's bias type; ``y_soft`` = their share and
    ``y_hard`` the rule's label (null: no annotations, or a tie the rule drops)."""

    pair_id: str
    n_annotators: int = Field(ge=0)
    n_support: int = Field(ge=0)
    y_soft: float | None = Field(None, ge=0.0, le=1.0)
    y_hard: Literal[0, 1] | None = None


class ScoreRow(TableRow):
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


class ReferenceRow(TableRow):
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
