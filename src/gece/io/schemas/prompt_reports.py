"""The prompt ablation's files: the record of a prompt's token files and the ablation report (docs/metrics.md,
"Prompts")."""

from __future__ import annotations

from pydantic import Field

from gece.io.schemas.schema_base import JsonReport, Num


class PromptRecord(JsonReport):
    """``artifacts/prompted/<model>/<prompt>/prompt.json``: the prompt its token files were scored under, and the
    text it put before and after every sentence for this model."""

    model: str
    prompt: str
    template: str
    chat: bool
    system: str | None
    user_turn: str | None = Field(description="the user turn the sentence answers (chat only)")
    before: str
    after: str
    pairs: int | None = Field(description="the first N pairs of each benchmark (ablate.prompt_pairs; null: all)")


class PromptChange(JsonReport):
    """One number's change from the bare sentence to one prompt, on one benchmark."""

    baseline: Num = Field(description="the number on the bare sentence")
    value: Num = Field(description="the number under the prompt")
    change: Num = Field(description="value − baseline")
    change_ci_low: Num
    change_ci_high: Num
    p_value: Num
    p_holm: Num = Field(description="Holm-adjusted over the prompts (this number, this benchmark)")
    significant_holm: bool
    level_holm: Num
    change_ci_low_holm: Num = Field(description="the interval at Holm's level: excludes 0 iff significant_holm")
    change_ci_high_holm: Num


class PromptBenchmark(JsonReport):
    """A benchmark's changes: the pairs compared (and their distinct pairs and clusters, where it has clusters)
    and, per number, per prompt, its change."""

    n: int = Field(ge=1)
    n_distinct: int | None = None
    n_clusters: int | None = None
    reading: str = Field(description="how its numbers read: a protocol's name, identity or pronoun_gender")
    metrics: dict[str, dict[str, PromptChange]]


class PromptAblationReport(JsonReport):
    """``reports/ablation/prompts/<model>.json``."""

    model: str
    baseline: str
    prompts: list[str]
    pairs: int | None
    draws: int
    seed: int
    level: float
    alpha: float
    benchmarks: dict[str, PromptBenchmark]
