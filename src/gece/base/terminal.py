"""Data reaches the terminal and the logs as the literal text it is.

Rich reads ``[bold]`` as markup and ``:x:`` as an emoji, and a terminal obeys the escape sequences
in what it prints. So the consoles here never replace emoji codes, every piece of data is passed
through :func:`literal` (markup escaped, control characters shown as ``\\x1b``), and the log
handlers carry :class:`LiteralFilter`. Structure (colours, tables) is added by gece, never by data.

Every terminal table is a :class:`gece.base.terminal_table.Table` (a module of its own: a stage that prints no table
does not import it).
"""

from __future__ import annotations

import logging
import re

from rich.console import Console
from rich.markup import escape
from rich.text import Text

# C0 and C1 control characters (not tab and newline), DEL, and the bidirectional overrides
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: object) -> str:
    """``text`` with each control character written as its escape (``\\x1b``, ``\\u202e``)."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


def literal(text: object) -> str:
    """``text`` for a rich ``print`` with markup on: control characters shown, markup escaped."""
    return escape(visible(text))


def plain(text: object) -> Text:
    """``text`` as a rich Text (a table title or cell): never parsed as markup."""
    return Text(visible(text))


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 pair``, ``2 pairs`` (``many`` for an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, soft_wrap=True, emoji=False)


class LiteralFilter(logging.Filter):
    """Log records with their arguments merged and control characters shown, line breaks included: a log
    record is one line of text, so data cannot forge another (``INFO: ...`` on a line of its own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = visible(record.getMessage()).replace("\n", "\\n"), None
        return True
