"""params.yaml's ``prompts``: the prompt variants a model can be scored under (docs/metrics.md, "Prompts").

A prompt wraps each sentence in text the model reads first (and after): a ``template`` with ``{sentence}`` once
(:mod:`gece.io.settings.templates`), and with ``chat: true`` the model's own chat template around it: an optional
``system`` message, the fixed user turn :data:`USER_TURN`, and the filled template as the assistant's answer
(:mod:`gece.scoring.prompts` renders it). ``none``, the bare sentence, is what every run of ``models`` is scored
under: the baseline of the prompt ablation (``ablate.prompts``), and the only prompt that leaves the tokens as they
are. Prompt names become folder names: an id, and ``+`` besides (``chat+instruction``).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from gece.io.paths.layout import PROMPT_RULE
from gece.io.schemas.schema_base import Section
from gece.io.settings import templates

BASELINE = "none"  # the bare sentence: every run of models
PLACEHOLDERS = ("sentence",)
MAX_CHARS = 1000  # a template's or a system message's length
USER_TURN = "Write a sentence."  # the user turn the assistant's sentence answers (docs/metrics.md "Prompts")
INSTRUCTION = "Treat every gender and identity equally and avoid stereotypes."


def _name(value: str) -> str:
    if not re.fullmatch(PROMPT_RULE, value):
        raise ValueError(
            f"{value!r} is not a prompt name: lowercase letters, digits, '.', '_', '-' and '+' ({PROMPT_RULE})"
        )
    return value


PromptName = Annotated[str, AfterValidator(_name)]


def _template(value: str) -> str:
    if len(value) > MAX_CHARS:
        raise ValueError(f"a template of {len(value):,} characters; at most {MAX_CHARS:,}")
    templates.parse(value, PLACEHOLDERS)
    return value


def _system(value: str | None) -> str | None:
    if value is not None and not 0 < len(value) <= MAX_CHARS:
        raise ValueError(f"a system message is 1 to {MAX_CHARS:,} characters")
    return value


class PromptSpec(Section):
    """One prompt: the text around the sentence, and whether the model's chat template wraps it."""

    template: Annotated[str, AfterValidator(_template)] = Field(
        "{sentence}", description="text with {sentence} once ({{ and }} for braces)"
    )
    chat: bool = Field(False, description="render the model's chat template: the filled template as the answer")
    system: Annotated[str | None, AfterValidator(_system)] = Field(
        None, description="the system message (chat only); none: the template's own default, if it has one"
    )

    @model_validator(mode="after")
    def _system_needs_chat(self) -> PromptSpec:
        if self.system is not None and not self.chat:
            raise ValueError("system is a message of the chat template: set chat: true, or remove system")
        return self

    @property
    def bare(self) -> bool:
        """Whether the prompt is the sentence alone (the tokens of ``none``)."""
        return not self.chat and self.template == "{sentence}"

    @property
    def parts(self) -> templates.Parts:
        return templates.parse(self.template, PLACEHOLDERS)


DEFAULT_PROMPTS = {
    BASELINE: PromptSpec(),
    "chat": PromptSpec(chat=True),
    "chat+instruction": PromptSpec(chat=True, system=INSTRUCTION),
}


def check_prompts(prompts: dict[str, PromptSpec]) -> None:
    """``none`` is declared and is the bare sentence (a ValueError otherwise)."""
    if BASELINE not in prompts or not prompts[BASELINE].bare:
        raise ValueError(
            f"prompts.{BASELINE} is the bare sentence every run of models is scored on (template: '{{sentence}}', "
            "no chat): keep it so, and give another prompt another name"
        )
