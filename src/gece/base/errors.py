"""The one exception type users see.

Anything that is the user's to fix (a bad file, a bad parameter, a missing package)
raises :class:`GeceError` with what is wrong and how to fix it; the CLI prints it
without a traceback and exits with status 2. Everything else is a bug and keeps its
traceback.
"""

from __future__ import annotations


class GeceError(Exception):
    """A problem the user can fix. ``problems`` lists one line per finding."""

    exit_code = 2

    def __init__(self, message: str, *, problems: list[str] | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.problems = list(problems or [])
        self.hint = hint

    def __str__(self) -> str:
        lines = [self.message]
        lines += [f"  - {p}" for p in self.problems]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)
