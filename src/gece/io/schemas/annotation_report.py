"""The annotate stage's report: the annotators' agreement and vote shares of a benchmark."""

from __future__ import annotations

from pydantic import Field

from gece.io.schemas.schema_base import JsonReport


class Quantiles(JsonReport):
    """Quantiles of one number over annotators (each annotator's agreement with the majority)."""

    n: int = Field(ge=0, description="annotators")
    min: float
    q25: float
    median: float
    q75: float
    max: float
    mean: float


class Agreement(JsonReport):
    """Chance-corrected agreement over the items: null with a reason when it is undefined."""

    binary: float | None = Field(description="on 'supports the writer's bias type' (1) or not (0)")
    nominal: float | None = Field(description="on the label set as one category ('none', a type, 'a+b')")
    items: int = Field(ge=0, description="items with at least two labels (Fleiss: the items used)")
    reason: str | None = None


class AnnotationReport(JsonReport):
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
