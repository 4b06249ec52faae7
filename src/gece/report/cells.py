"""The report's data and cells: what every table is made of, and how numbers are shown.

:class:`ReportData` holds every report the page reads; a table is rows of :class:`Cell` (a value and
the JSON pointer it came from) under :class:`Column` specs; ``format_*`` turn them into text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gece.io.files import is_number


def format_fixed(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def format_p(p: float | None) -> str:
    """A p-value as text: ``p = 0.028``, ``p < 0.001``, ``p –`` when undefined."""
    if p is None:
        return "p –"
    return f"p = {p:.3f}" if p >= 0.001 else "p < 0.001"


@dataclass
class ReportData:
    """What the report is built from: the JSON reports, keyed like their paths."""

    benchmarks: list[str]
    runs: dict[str, list[str]]  # benchmark -> models with metrics, in display order
    references: set[str] = field(default_factory=set)  # the runs read from released scores (registry: reference:)
    metrics: dict[tuple[str, str], dict] = field(default_factory=dict)
    bins: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    sample_size: dict[tuple[str, str], dict] = field(default_factory=dict)
    sample_size_figures: dict[tuple[str, str], str] = field(default_factory=dict)  # relative to index.html
    binning: dict[tuple[str, str], dict] = field(default_factory=dict)
    neutral: dict[str, dict] = field(default_factory=dict)
    special_tokens: dict[str, dict] = field(default_factory=dict)  # model with special tokens -> report
    special_pairs: dict[str, str] = field(default_factory=dict)  # model with -> model without
    calibration: dict[tuple[str, str], dict] = field(default_factory=dict)
    calibration_bins: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    compare: dict[str, dict] = field(default_factory=dict)
    annotations: dict[str, dict] = field(default_factory=dict)  # benchmark -> AnnotationReport (annotated ones)
    groups: dict[str, dict] = field(default_factory=dict)  # benchmark -> GroupsReport
    meta: dict[tuple[str, str], dict] = field(default_factory=dict)  # extract metadata per run
    examples: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # confident_mistakes per run
    missing: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------ tables
@dataclass
class Cell:
    """One table value: a number with an optional interval [low, high] or spread (± std), or text.

    ``ref`` maps ``value``/``low``/``high``/``spread`` to the JSON pointer of the number in the
    row's source file. ``worst`` is ``high``/``low`` when this is the worst value of its column, ``best``
    likewise when it is the best (the other end).
    """

    value: float | int | str | None = None
    low: float | None = None
    high: float | None = None
    spread: float | None = None
    note: str = ""
    ref: dict[str, str] = field(default_factory=dict)
    worst: str = ""
    best: str = ""
    strong: bool = False
    mark: str = ""


@dataclass
class Column:
    key: str
    label: str
    worst: str | None = "high"  # which end is worst: high, low, or None (not ranked)
    digits: int = 3
    text: bool = False  # a text column (sentences): left-aligned, wraps on the page


@dataclass
class Row:
    label: list[str]
    cells: list[Cell]
    source: str | None = None  # JSON file, relative to the reports directory


@dataclass
class Table:
    heading: str
    label_columns: list[str]
    columns: list[Column]
    rows: list[Row]
    note: str = ""


@dataclass
class TableDoc:
    """One ``reports/tables/<name>.md`` and its section of the HTML page."""

    name: str
    title: str
    caption: str
    tables: list[Table]
    empty: str = ""  # why there is no table


WORST_MARK = {"high": "▲", "low": "▼"}


BEST_MARK = "✓"


def ptr(*parts: object) -> str:
    """A JSON pointer (RFC 6901)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(doc: object, pointer: str) -> object:
    """The value at a JSON pointer."""
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]  # type: ignore[index]
    return doc


def metric_cell(obj: dict | None, key: str, *base: object, ci: bool = True) -> Cell:
    if obj is None:
        return Cell()
    cell = Cell(value=obj.get(key), ref={"value": ptr(*base, key)})
    lo, hi = f"{key}_ci_low", f"{key}_ci_high"
    if ci and lo in obj and hi in obj:
        cell.low, cell.high = obj[lo], obj[hi]
        cell.ref.update(low=ptr(*base, lo), high=ptr(*base, hi))
    return cell


def mark_worst(table: Table) -> Table:
    """Mark the worst and the best number of every ranked column (ties: all of them; needs two
    different numbers)."""
    for j, col in enumerate(table.columns):
        if col.worst is None:
            continue
        cells = [r.cells[j] for r in table.rows]
        nums = [c.value for c in cells if is_number(c.value)]
        if len(nums) < 2 or max(nums) == min(nums):
            continue
        worst, best = (max(nums), min(nums)) if col.worst == "high" else (min(nums), max(nums))
        for c in cells:
            if is_number(c.value) and c.value == worst:
                c.worst = col.worst
            elif is_number(c.value) and c.value == best:
                c.best = "low" if col.worst == "high" else "high"
    return table


def format_number(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}"


def format_cell(cell: Cell, col: Column) -> str:
    """The cell as plain text: ``0.158 [0.133, 0.188]``, ``0.197 ± 0.041``, ``–`` for null."""
    if isinstance(cell.value, str):
        text = cell.value
    else:
        text = format_number(cell.value, col.digits)
        if cell.value is not None and cell.low is not None and cell.high is not None:
            text += f" [{format_number(cell.low, col.digits)}, {format_number(cell.high, col.digits)}]"
        if cell.value is not None and cell.spread is not None:
            text += f" ± {format_number(cell.spread, col.digits)}"
    if cell.note:
        text += f" {cell.note}"
    return text


def bench_heading(data: ReportData, b: str) -> str:
    ns = sorted({data.metrics[(b, m)]["n"] for m in data.runs.get(b, []) if (b, m) in data.metrics})
    return f"{b} ({', '.join(map(str, ns))} pairs)" if ns else b
