"""``@refusal``: the ids of docs/errors.md that a test triggers, and the commands it triggers them with.

``tests/test_errors_doc.py`` reads these decorators from the test sources (with ``ast``, importing nothing) and
checks them against the document: every id it lists has a test, for every command its entry names, and every
id a test names is in the document."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def refusal(*ids: str, readers: Sequence[str]) -> Callable[[F], F]:
    """Mark a test as triggering the refusals ``ids`` with each of ``readers`` (commands, or the document's other
    names for a reader: ``params.yaml``, ``model loading``)."""

    def mark(test: F) -> F:
        test.refusals = (*getattr(test, "refusals", ()), *((i, tuple(readers)) for i in ids))  # type: ignore[attr-defined]
        return test

    return mark
