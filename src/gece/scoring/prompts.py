"""A prompt variant at scoring time (:mod:`gece.io.settings.prompts`): the text around each sentence, rendered once
per model, and the tokenizer that feeds it while the scored tokens stay the sentence's own.

**Rendering** (:func:`wrapper`). A prompt without ``chat`` is its template: the text before ``{sentence}`` and the
text after it. With ``chat``, the model's chat template (the tokenizer's ``chat_template``; for a GGUF, the
``tokenizer.chat_template`` of its metadata, which gece's conversion keeps) renders the conversation

    [system: the prompt's system message, if it sets one]  user: "Write a sentence."  assistant: <filled template>

with ``add_generation_prompt`` false, and the sentence's place in the result splits it into the text before and
after. The sentence is the assistant's answer because an instruct model is tuned on its own turns: its
probabilities there are the ones the tuning shaped, while the user turn is text it was never trained to produce
(lm-eval's ``--apply_chat_template`` puts the whole context in the user turn instead: docs/lmeval.md). Without a
system message the template's own default applies (SmolLM2-Instruct's inserts one).

The template runs in Jinja's immutable sandbox, as transformers runs it, with transformers' ``raise_exception`` and
the tokenizer's special tokens (``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``); on top of the sandbox
gece refuses ``**`` and a ``*`` that repeats text or a list beyond :data:`MAX_RENDERED` characters, stops a render
longer than :data:`MAX_RENDERED` characters or :data:`MAX_SECONDS` seconds, and requires the sentence exactly once
in the result. Every refusal is a GeceError naming the model and the prompt.

**Scoring** (:class:`PromptedTokenizer`). Each sentence is fed as ``before + sentence + after``, tokenized as one
text (as a chat front end tokenizes a rendered conversation; a chat template writes its special tokens itself, so
none are added), and the offsets of the tokens are moved to the sentence's own characters: a token wholly in the
wrapper gets the empty span (0, 0), so it is never a target, and under the sentence rule only the sentence's tokens
are scored (a token that straddles the border, such as a space before the first word, counts as the sentence's,
as the leading space of a word does today). The wrapper is context the model reads before the sentence; the
planning, the engine and the scoring rules are unchanged (:mod:`gece.scoring.planning`). ``none`` never comes
here: its tokens are today's, byte for byte.

:func:`code` is this module's part of a prompted token file's fingerprint (:func:`gece.pipeline.extract.fingerprint`).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gece.base.errors import GeceError
from gece.code import closure
from gece.io.settings import templates
from gece.io.settings.prompts import USER_TURN, PromptSpec

SENTINEL = "\u2063gece-sentence-7f3a\u2063"  # where the sentence goes while the template renders
MAX_RENDERED = 20_000  # characters of a rendered conversation
MAX_SECONDS = 5.0  # a template's render
SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token")


@dataclass(frozen=True)
class Wrapper:
    """The text a prompt puts before and after a sentence."""

    before: str
    after: str


@functools.cache
def code() -> str:
    """:func:`gece.code.closure.code_hash` of this module's import closure, docstrings left out."""
    return closure.code_hash(closure.closure([__name__]), docstrings=False)


def chat_template(tokenizer: Any) -> str | None:
    """The tokenizer's chat template (its ``default`` one when it has several), or None."""
    found = getattr(tokenizer, "chat_template", None)
    if isinstance(found, dict):
        found = found.get("default")
    return found if isinstance(found, str) and found.strip() else None


def wrapper(prompt: PromptSpec, name: str, tokenizer: Any, model: str) -> Wrapper:
    """The text around each sentence under ``prompt`` (called ``name``) for the model ``model`` (module docstring);
    a GeceError when the prompt needs a chat template the tokenizer lacks, or the template is refused."""
    parts = prompt.parts
    if not prompt.chat:
        return Wrapper(parts[0], parts[2])
    where = f"prompt {name} of {model}"
    source = chat_template(tokenizer)
    if source is None:
        raise GeceError(
            f"{where}: the model has no chat template (its tokenizer has no chat_template, nor its GGUF a "
            "tokenizer.chat_template)",
            hint=f"score {model} under a prompt without chat: true, or remove {name} from ablate.prompts.{model}",
        )
    messages = [{"role": "system", "content": prompt.system}] if prompt.system is not None else []
    messages += [
        {"role": "user", "content": USER_TURN},
        {"role": "assistant", "content": templates.fill(parts, {"sentence": SENTINEL})},
    ]
    special = {k: str(v) for k in SPECIAL if isinstance(v := getattr(tokenizer, k, None), str)}
    text = render(source, where, messages=messages, add_generation_prompt=False, **special)
    if text.count(SENTINEL) != 1:
        raise GeceError(
            f"{where}: the chat template shows the assistant's message {text.count(SENTINEL)} times, not once",
            hint="gece scores the sentence as the assistant's answer; use a template that writes each message once",
        )
    before, after = text.split(SENTINEL)
    return Wrapper(before, after)


class _Refused(Exception):
    """A template asked for more than gece renders."""


def _sandbox() -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**":
                raise _Refused("'**' is not rendered")
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int) and len(seq) * times > MAX_RENDERED:
                    raise _Refused(f"a repetition of {len(seq) * times:,} items")
            return super().call_binop(context, operator, left, right)

    def raise_exception(message: str) -> None:
        raise _Refused(f"the template raised: {message}")

    env = Sandbox(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.globals["raise_exception"] = raise_exception
    return env


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """A _Refused raised in this (main) thread after ``seconds``; no limit in another thread, where signals
    cannot reach."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise _Refused(f"rendering took over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def render(source: str, where: str, **context: Any) -> str:
    """A chat template rendered in the sandbox (module docstring), or a GeceError naming ``where``."""
    import jinja2

    out: list[str] = []
    size = 0
    try:
        with _deadline(MAX_SECONDS):
            for piece in _sandbox().from_string(source).generate(**context):
                size += len(piece)
                if size > MAX_RENDERED:
                    raise _Refused(f"it renders over {MAX_RENDERED:,} characters")
                out.append(piece)
    except (_Refused, jinja2.TemplateError, RecursionError, TypeError, ValueError, AttributeError, KeyError) as e:
        raise GeceError(
            f"{where}: the chat template is refused ({type(e).__name__}: {e})",
            hint="gece renders a chat template in Jinja's sandbox, without '**', within "
            f"{MAX_RENDERED:,} characters and {MAX_SECONDS:g} s; fix the template or score without chat",
        ) from e
    return "".join(out)


def _inside(start: int, end: int, lo: int, hi: int) -> tuple[int, int]:
    """A token's character span [start, end) of the whole text, as a span of the sentence at [lo, hi): clipped to
    it and moved to start at 0, or the empty (0, 0) when it holds none of the sentence."""
    s, e = max(start, lo), min(end, hi)
    return (s - lo, e - lo) if s < e else (0, 0)


@dataclass(frozen=True)
class PromptedTokenizer:
    """A tokenizer that feeds every sentence inside ``wrap`` (module docstring): what it returns is what
    :func:`gece.scoring.planning.tokenize` reads, the ids of the whole text and offsets within the sentence.
    Every other attribute is the tokenizer's."""

    tokenizer: Any
    wrap: Wrapper
    chat: bool

    def __call__(
        self, sentences: Sequence[str], add_special_tokens: bool = True, return_offsets_mapping: bool = True
    ) -> dict[str, list]:
        lo = len(self.wrap.before)
        texts = [self.wrap.before + s + self.wrap.after for s in sentences]
        enc = self.tokenizer(
            texts, add_special_tokens=add_special_tokens and not self.chat, return_offsets_mapping=True
        )
        offsets = [
            [_inside(s, e, lo, lo + len(sentence)) for s, e in offs]
            for sentence, offs in zip(sentences, enc["offset_mapping"], strict=True)
        ]
        return {"input_ids": enc["input_ids"], "offset_mapping": offsets}

    def __getattr__(self, name: str) -> Any:
        if name == "tokenizer":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self.tokenizer, name)


@dataclass(frozen=True)
class Prompted:
    """A prompt of a model's run: its name, its settings and the text it puts around each sentence for this
    model's tokenizer (:func:`prompted`)."""

    name: str
    spec: PromptSpec
    wrap: Wrapper

    def key(self, base: str) -> str:
        """A prompted token file's fingerprint: ``base`` (the file's without the prompt), the prompt, the text it
        renders to and this module's :func:`code`."""
        from gece.scoring.extraction import digest

        return digest(base=base, prompt=self.name, chat=self.spec.chat, wrap=asdict(self.wrap), code=code())

    def loaded(self, lm: Any) -> Any:
        """A loaded model (:class:`gece.scoring.models.LoadedModel`) whose tokenizer feeds this prompt."""
        return replace(lm, tokenizer=PromptedTokenizer(lm.tokenizer, self.wrap, self.spec.chat))


def prompted(name: str, spec: PromptSpec, tokenizer: Any, model: str) -> Prompted:
    """The prompt ``name`` for the model ``model`` with this ``tokenizer`` (:func:`wrapper`)."""
    return Prompted(name, spec, wrapper(spec, name, tokenizer, model))
