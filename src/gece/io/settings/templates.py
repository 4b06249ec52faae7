"""Text templates of params.yaml, parsed and filled by gece itself (never ``str.format``).

A template is text with placeholders: ``{name}`` for each name of the template's allowed set, each exactly once,
and ``{{`` and ``}}`` for a literal brace. Nothing else is a placeholder: a format spec (``{sentence:>99}``), a
conversion (``{sentence!r}``), an index or attribute (``{sentence[0]}``, ``{sentence.x}``), a number (``{0}``), an
empty ``{}``, an unknown name, a name written twice or left out, or a lone ``{`` or ``}`` is refused, naming the
place. So a template cannot ask for memory, call code or fail when it is filled. SynthBias's referent prompt
(``benchmarks.<b>.prompt``: ``{sentence}`` and ``{pronoun}``) is one; the set of names is each template's own.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

PART = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")  # an escape, a placeholder, or a lone brace

Parts = tuple[str, ...]  # literal text and placeholders in turn: even places text, odd places names


def parse(text: str, names: Collection[str]) -> Parts:
    """``text`` as literal text and placeholders (:data:`Parts`), or a ValueError saying what is wrong and where:
    each of ``names`` must be a placeholder exactly once, and nothing else may be one."""
    parts, literal, start = [], [], 0
    for m in PART.finditer(text):
        literal.append(text[start : m.start()])
        start = m.end()
        token, name = m.group(0), m.group(1)
        if token in ("{{", "}}"):
            literal.append(token[0])
        elif name is None:
            raise ValueError(f"a lone {token!r} at character {m.start() + 1}: write {token * 2} for a literal brace")
        elif name not in names or name in parts[1::2]:
            why = "is written twice" if name in parts[1::2] else "is not a placeholder of this template"
            raise ValueError(f"{token!r} at character {m.start() + 1} {why} ({allowed(names)})")
        else:
            parts += ["".join(literal), name]
            literal = []
    missing = [n for n in names if n not in parts[1::2]]
    if missing:
        raise ValueError(f"no {' and no '.join('{' + n + '}' for n in missing)} ({allowed(names)})")
    return (*parts, "".join([*literal, text[start:]]))


def allowed(names: Collection[str]) -> str:
    return "it takes " + " and ".join("{" + n + "}" for n in names) + " once each, and {{ and }} for braces"


def fill(parts: Parts, values: Mapping[str, str]) -> str:
    """The template's text with each placeholder replaced by its value (inserted as it is, never parsed again)."""
    return "".join(values[p] if i % 2 else p for i, p in enumerate(parts))
