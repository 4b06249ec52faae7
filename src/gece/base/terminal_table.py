"""The one terminal table printer: a :class:`Table` never cuts a cell at any width.

A cell that does not fit its column folds onto the next line instead of ending in ``…``, and the columns of ids
(runs, benchmarks) keep their longest id on one line whenever the table can be narrowed elsewhere; headers fold
the same way as cells. Data in a table passes through :func:`gece.base.terminal.plain` (never markup).
"""

from __future__ import annotations

from rich import table as rich_table
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text


def _text(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _words(cell: object) -> int:
    """The width of the longest word of a cell (what folding would break)."""
    return max((Text(w).cell_len for w in _text(cell).split()), default=0)


class Table(rich_table.Table):
    """A rich table that loses nothing: every column folds what does not fit (never ``…``, never cropped), and
    the columns added with ``ids=True`` (runs, benchmarks) or ``whole=True`` (short counts) keep each word
    whole and on one line.

    At its natural width the table prints as rich draws it. When it is wider than the terminal, each id column is
    fixed at its longest word (wider when the other columns leave room) if the other columns can keep their
    longest word up to :attr:`FLOOR` characters; they then wrap at spaces and fold longer words, headers
    included. If even that does not fit, the columns of bare ids show short keys (``#1``, ``#2``, ...) and a
    legend under the table gives each key its id; other id cells fold, whole, over several lines.
    """

    FLOOR = 6  # the narrowest another column is made so that ids stay whole (a number: 0.0412)

    def __init__(self, *headers, **kwargs) -> None:
        self.id_columns: set[int] = set()  # kept whole
        self.keyed: set[int] = set()  # kept whole, else shown as keys with a legend
        super().__init__(*headers, **kwargs)

    def add_column(self, header="", *, ids: bool = False, whole: bool = False, **kwargs) -> None:  # type: ignore[override]
        kwargs["overflow"], kwargs["no_wrap"] = "fold", False
        super().add_column(header, **kwargs)
        if ids or whole:
            self.id_columns.add(len(self.columns) - 1)
        if ids:
            self.keyed.add(len(self.columns) - 1)

    def _fits(self, need: dict[int, int], width: int) -> bool:
        """Whether the id columns at widths ``need`` and the others at their floor fit in ``width``."""
        rest = sum(
            min(self.FLOOR, max(map(_words, [c.header, *c._cells])))
            for i, c in enumerate(self.columns)
            if i not in need
        )
        padding = sum(self._get_padding_width(i) for i in range(len(self.columns)))
        return sum(need.values()) + rest + padding + self._extra_width <= width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        natural = Measurement.get(console, options.update(max_width=10**6), self).maximum
        if natural <= options.max_width or not self.id_columns:
            yield from super().__rich_console__(console, options)
            return
        cells = {i: list(self.columns[i]._cells) for i in self.id_columns}
        need = {i: max(map(_words, [self.columns[i].header, *cells[i]])) for i in cells}
        legend: dict[str, str] = {}
        if not self._fits(need, options.max_width):  # keys for the columns of bare ids, with a legend
            for i, column in cells.items():
                if i in self.keyed and all(len(_text(c).split()) <= 1 for c in column):
                    for c in column:
                        if _text(c):
                            legend.setdefault(_text(c), f"#{len(legend) + 1}")
                    self.columns[i]._cells = [Text(legend[_text(c)]) if _text(c) else c for c in column]
                    need[i] = max(map(_words, [self.columns[i].header, *self.columns[i]._cells]))
        fixed = need if self._fits(need, options.max_width) else {}
        if fixed:  # what the other columns leave at their natural width widens the id columns, up to theirs
            wide = options.update(max_width=10**6)
            natural_of = {
                i: self._measure_column(console, wide, c).maximum - self._get_padding_width(i)
                for i, c in enumerate(self.columns)
            }
            spare = (
                options.max_width
                - self._extra_width
                - sum(fixed.get(i, natural_of[i]) + self._get_padding_width(i) for i in range(len(self.columns)))
            )
            for i in sorted(fixed):
                grow = max(0, min(spare, natural_of[i] - fixed[i]))
                fixed[i], spare = fixed[i] + grow, spare - grow
        for i, width in fixed.items():
            self.columns[i].width = width
        try:
            yield from super().__rich_console__(console, options)
        finally:
            for i, column in cells.items():
                self.columns[i].width, self.columns[i]._cells = None, column
        for name, key in legend.items():
            yield Text(f"{key} {name}")
