"""The params.yaml sections that need neither the models' registry nor the tables of groupings or calibration
methods, and a benchmark's entry. A stage that reads only some sections validates them without importing the rest
(:func:`gece.io.settings.params_file.load_sections`; ``gece score`` reads ``extract``,
:mod:`gece.io.settings.extract_params`);
:class:`gece.io.settings.params.Params` holds them all.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PlainValidator, model_validator

from gece.catalog.scoring_rules import RULE_NAMES, RuleName
from gece.io.schemas.schema_base import Section, Seed
from gece.io.settings import templates
from gece.io.settings.ids import Id
from gece.io.settings.prompts import PromptName


class PrepareParams(Section):
    duplicates: Literal["keep", "drop", "error"] = "keep"


Cluster = Literal["pair", "template"]


class MetricsParams(Section):
    n_bins: int = Field(10, ge=1, le=1000)
    binning: Literal["equal_width", "equal_mass"] = "equal_width"
    bootstrap: int = Field(1000, ge=1000, le=1_000_000, description="bootstrap resamples for confidence intervals")
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    seed: Seed = 0


class CompareParams(Section):
    draws: int = Field(2000, ge=2000, le=1_000_000, description="paired bootstrap resamples")
    seed: Seed = 0
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level of the markdown table")
    power: float = Field(0.8, gt=0.0, lt=1.0, description="power of the minimum detectable difference")


class AblateParams(Section):
    sizes: list[int] = Field([50, 100, 150, 250, 500], min_length=1)
    draws: int = Field(100, ge=1, le=100_000, description="random subsets per sample size")
    seed: Seed = 0
    bins: list[Annotated[int, Field(le=1000)]] = Field([5, 10, 15, 20], min_length=1)
    special_tokens: dict[Id, Id] = Field(
        {"gemma-3-270m": "gemma-3-270m-nobos"}, description="model with special tokens -> the same without"
    )
    compare: CompareParams = CompareParams()
    prompts: dict[Id, list[PromptName]] = Field(
        {}, description="model -> the prompts (of prompts) it is scored under again, each compared with none"
    )
    prompt_pairs: int | None = Field(
        200, ge=1, description="the first N pairs of each benchmark scored under each prompt (null: all)"
    )

    @model_validator(mode="after")
    def _positive(self) -> AblateParams:
        if min(self.sizes) < 1 or min(self.bins) < 1:
            raise ValueError("sizes and bins must be positive")
        return self


class AnnotateParams(Section):
    """How the annotators' labels become a hard label (gece.stats.annotations): a strict majority of the
    annotators decides; a tie goes to the writer's label (writer) or leaves the pair unlabelled (drop)."""

    rule: Literal["majority"] = "majority"
    tie: Literal["writer", "drop"] = "writer"


def _source(value: object) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value  # type: ignore[return-value]
    raise ValueError(
        "must be the path of a CrowS-Pairs-format CSV, e.g. data/crows_pairs/crows_pairs_anonymized.csv, or of "
        "SynthBias with synthbias: type1|type2 (or no source: data/benchmarks/<name>.csv)"
    )


PROMPT_PLACEHOLDERS = ("sentence", "pronoun")  # benchmarks.<b>.prompt's (gece.io.formats.synthbias_referent)


def _prompt(value: str | None) -> str | None:
    if value is not None:
        templates.parse(value, PROMPT_PLACEHOLDERS)  # a ValueError naming what is wrong
    return value


class BenchmarkSpec(Section):
    """One benchmark (``benchmarks.<name>``): where its pairs come from, the rule that scores them and its part
    in the gender-neutral wording comparison. Every field has a default, so ``<name>: {}`` is a gece CSV,
    ``data/benchmarks/<name>.csv``, scored under ``extract.rule``."""

    source: Annotated[str | None, PlainValidator(_source)] = Field(
        None,
        description="a CrowS-Pairs-format CSV the benchmark is read from (gece.io.formats.crows: identity protocol, "
        "annotations included), or SynthBias's CSV with synthbias; none: data/benchmarks/<name>.csv, gece's own "
        "format",
    )
    rule: RuleName | None = Field(  # type: ignore[valid-type]
        None,
        description=f"{' | '.join(RULE_NAMES)}: the rule that scores this benchmark, in place of "
        "extract.rule. Two entries with the same source and different rules are one benchmark under two rules "
        "(the page and reports/summary.json show them side by side)",
    )
    cluster: Cluster = Field(
        "pair",
        description='the unit the intervals and permutation tests resample (docs/metrics.md "Repeated pairs"): '
        "pair, the rows with the same two sentences; template, the rows whose sentence_more is the same once "
        "its differing words are masked (several identity terms in one sentence frame)",
    )
    neutral_of: Id | None = Field(
        None,
        description="this benchmark is a gender-neutral rewrite of that one (the same pairs with the occupation "
        "word replaced): the neutral stage compares that benchmark with its rewrites, per model",
    )

    synthbias: Literal["type1", "type2", "referent"] | None = Field(
        None,
        description="source is a SynthBias file (gece.io.formats.synthbias): this type's he/she pronoun pairs, p the "
        "preference for the male pronoun; type2: y = 1 when the referent's occupation is male-majority; type1: y = 1; "
        "referent: type2's referent resolution (gece.io.formats.synthbias_referent), p the stereotypical occupation's "
        "probability after prompt, y = 1 when it is the referent",
    )
    subset: int | None = Field(
        None,
        ge=4,
        description="with synthbias: score this many prepared rows (pairs; referent: two rows per sentence pair), a "
        "fixed stratified subset (gece.io.formats.synthbias); none: every row",
    )
    prompt: Annotated[str | None, AfterValidator(_prompt)] = Field(
        None,
        max_length=1000,  # it is repeated in every prepared row
        description="with synthbias: referent: the context before the two occupations, naming {sentence} and "
        "{pronoun} (gece.io.formats.synthbias_referent); none: its DEFAULT_PROMPT",
    )

    @property
    def imported(self) -> bool:
        """Whether the benchmark is read from a CrowS-Pairs-format file (``source`` without ``synthbias``)."""
        return self.source is not None and self.synthbias is None

    @property
    def sentences_shown(self) -> bool:
        """Whether the report may print the benchmark's sentences: not SynthBias's, whose licence (CC BY-NC-ND 4.0)
        allows no derived files outside the data (its examples list pair ids and target words only)."""
        return self.synthbias is None

    @model_validator(mode="after")
    def _synthbias_needs_source(self) -> BenchmarkSpec:
        if self.synthbias is not None and self.source is None:
            raise ValueError("synthbias needs source: the SynthBias file, data/synthbias/synthbias_data.csv")
        if self.subset is not None and self.synthbias is None:
            raise ValueError("subset is a SynthBias setting: give synthbias (type1 or type2), or no subset")
        if self.prompt is not None and self.synthbias != "referent":
            raise ValueError("prompt is a setting of synthbias: referent, naming {sentence} and {pronoun} once each")
        return self


BENCHMARKS_HINT = (
    "benchmarks is a mapping, one entry per benchmark: its name, then its settings ({} for the defaults), "
    "e.g. benchmarks: {winobias: {}, crows_pairs: {source: data/crows_pairs/crows_pairs_anonymized.csv, "
    "rule: sentence}} (README.md, Parameters)"
)
