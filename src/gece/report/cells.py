"""The report's data and cells: what every table is made of, and how numbers are shown.

:class:`ReportData` holds every report the page reads; a table is rows of :class:`Cell` (a value and
the JSON pointer it came from) under :class:`Column` specs; ``format_*`` turn them into text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from gece.io.files.json_reader import is_number
from gece.io.settings.params import CalibrateParams

# ------------------------------------------------------------------- untrusted text
# What breaks a line (tab, \n, \r, \v, \f, the C0 separators, NEL, U+2028 LINE SEPARATOR, U+2029 PARAGRAPH
# SEPARATOR): one space each run, so a table cell or a heading stays on its line.
_LINE_BREAKS = re.compile("[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")
_SHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Cf characters kept as they are: ZERO WIDTH NON-JOINER and ZERO WIDTH JOINER shape Persian and Indic words
# and emoji sequences (👩‍🔬), and reorder or hide nothing.
_KEPT_FORMAT = frozenset("\u200c\u200d")


def _shown(ch: str) -> str:
    if ch in _KEPT_FORMAT or unicodedata.category(ch) not in _SHOWN_CATEGORIES:
        return ch
    return f"<U+{ord(ch):04X}>"


def shown_text(text: object, one_line: bool = True) -> str:
    """Untrusted text (a sentence, a model id, a benchmark or group name) as the page and the markdown tables
    show it, before their own markup escaping: one line, and nothing invisible.

    - line breaks and tabs (``\\n``, ``\\r``, U+2028, U+2029, ...) become one space each run (the markdown
      writer strips the ends too, as a table cell would);
    - every other control or format character (Unicode categories Cc, Cf, Cs: NUL, ESC, DEL, the C1
      controls, the bidirectional overrides and isolates U+202A-U+202E and U+2066-U+2069, U+200E/U+200F,
      U+061C, ZERO WIDTH SPACE U+200B, the soft hyphen, U+FEFF, the tag characters) is written visibly as
      ``<U+202E>``, so it can neither reorder the text around it nor hide in it; U+200C and U+200D are kept.

    Everything else (accents, CJK, emoji, right-to-left letters, combining marks) is kept unchanged. With
    ``one_line=False`` (a ``<pre>`` block), ``\\n`` and tabs are kept.
    ``reports/index.html`` (:mod:`gece.report.html`) and the markdown tables (:mod:`gece.report.markdown`)
    both call this, then escape their markup.
    """
    text = _LINE_BREAKS.sub(" ", str(text)) if one_line else str(text)
    if text.isprintable():  # no category C or Z character but the space: the common case, nothing to do
        return text
    return "".join(ch if not one_line and ch in "\n\t" else _shown(ch) for ch in text)


def format_fixed(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def pair_sizes(rep: dict) -> str:
    """``"771 pairs"``, with ``" (770 distinct, 770 clusters)"`` where the report (metrics, compare) counts them and
    they differ from n: the sizes shown wherever n is."""
    counts = [f"{rep[k]} {word}" for k, word in (("n_distinct", "distinct"), ("n_clusters", "clusters")) if rep.get(k)]
    head = f"{rep['n']} pair{'' if rep['n'] == 1 else 's'}"
    return (
        head
        if all(rep.get(k) in (None, rep["n"]) for k in ("n_distinct", "n_clusters"))
        else f"{head} ({', '.join(counts)})"
    )


# the runs a compare report's power line summarizes (io.schemas.compare_report.PowerRuns), in words
POWER_RUNS: dict[str, str] = {"paper": "the authors' runs", "all": "runs"}


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
    lmeval: set[str] = field(default_factory=set)  # the runs imported from lm-evaluation-harness (registry: lmeval:)
    # the checks (gece.pipeline.runs.checks) -> what makes each one ("limit: 12, checked_against: m"):
    # in their own rows, never in what :func:`answered` keeps
    checks: dict[str, str] = field(default_factory=dict)
    metrics: dict[tuple[str, str], dict] = field(default_factory=dict)
    bins: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    sample_size: dict[tuple[str, str], dict] = field(default_factory=dict)
    sample_size_figures: dict[tuple[str, str], str] = field(default_factory=dict)  # relative to index.html
    binning: dict[tuple[str, str], dict] = field(default_factory=dict)
    neutral: dict[str, dict] = field(default_factory=dict)
    special_tokens: dict[str, dict] = field(default_factory=dict)  # model with special tokens -> report
    special_pairs: dict[str, str] = field(default_factory=dict)  # model with -> model without
    prompts: dict[str, dict] = field(default_factory=dict)  # model -> its prompt ablation (PromptAblationReport)
    calibration: dict[tuple[str, str], dict] = field(default_factory=dict)
    calibration_bins: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    compare: dict[str, dict] = field(default_factory=dict)
    annotations: dict[str, dict] = field(default_factory=dict)  # benchmark -> AnnotationReport (annotated ones)
    groups: dict[str, dict] = field(default_factory=dict)  # benchmark -> GroupsReport
    meta: dict[tuple[str, str], dict] = field(default_factory=dict)  # extract (or lm-eval import) metadata per run
    examples: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # confident_mistakes per run
    missing: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)
    rules: dict[str, str] = field(default_factory=dict)  # benchmark -> the rule that scored it (params.rule_for)
    variants: dict[str, list[str]] = field(default_factory=dict)  # first entry of a source -> its later entries
    hidden: set[str] = field(default_factory=set)  # benchmarks whose sentences are not shown (BenchmarkSpec)
    synthbias: dict[str, str] = field(default_factory=dict)  # SynthBias benchmark -> its mode (params.yaml synthbias)
    # the protocols' declarations (gece.report.protocol.Protocol; gece.protocols.declarations.PROTOCOLS, filled in by
    # the stage that loads the reports): a benchmark whose runs' reports carry a protocol's block is that protocol's
    protocols: tuple = ()
    # the calibration method the headline reports (params.yaml calibrate.headline)
    headline_method: str = CalibrateParams.model_fields["headline"].default


def answered(data: ReportData) -> ReportData:
    """``data`` without its checks (:attr:`ReportData.checks`): what the answers, the first screen's figures and
    letters, the findings and the summary's comparison counts read, so that a check changes none of them. The
    tables read ``data`` whole: a check has its own rows there."""
    if not data.checks:
        return data
    out = data.checks

    def runs_of(reports: dict) -> dict:  # keyed by (benchmark, run)
        return {k: v for k, v in reports.items() if k[1] not in out}

    def by_run(reports: dict) -> dict:  # keyed by run
        return {m: v for m, v in reports.items() if m not in out}

    def without(rep: dict) -> dict:
        pairs = [p for p in rep.get("pairs", []) if p["a"] not in out and p["b"] not in out]
        return {k: v for k, v in rep.items() if k != "agreement"} | {"pairs": pairs}

    return replace(
        data,
        runs={b: [m for m in ms if m not in out] for b, ms in data.runs.items()},
        metrics=runs_of(data.metrics),
        bins=runs_of(data.bins),
        sample_size=runs_of(data.sample_size),
        sample_size_figures=runs_of(data.sample_size_figures),
        binning=runs_of(data.binning),
        calibration=runs_of(data.calibration),
        calibration_bins=runs_of(data.calibration_bins),
        meta=runs_of(data.meta),
        examples=runs_of(data.examples),
        neutral=by_run(data.neutral),
        special_tokens=by_run(data.special_tokens),
        special_pairs={m: v for m, v in data.special_pairs.items() if m not in out and v not in out},
        prompts=by_run(data.prompts),
        compare={b: without(rep) for b, rep in data.compare.items()},
        groups={b: rep | {"runs": by_run(rep.get("runs", {}))} for b, rep in data.groups.items()},
        checks={},
    )


def repeats(data: ReportData, b: str) -> dict[str, str]:
    """Run -> the earlier run of benchmark ``b`` it repeats: the two give every pair the same p (the compare report
    marks their pair ``identical``; gemma-3-270m without its BOS under the sentence rule), one run scored twice,
    which the findings and counts take once."""
    order = data.runs.get(b, [])
    out: dict[str, str] = {}
    for pair in sorted(
        (p for p in (data.compare.get(b) or {}).get("pairs", []) if p.get("identical")),
        key=lambda p: [order.index(m) if m in order else len(order) for m in (p["a"], p["b"])],
    ):
        first, later = sorted((pair["a"], pair["b"]), key=lambda m: order.index(m) if m in order else len(order))
        out.setdefault(later, out.get(first, first))
    return out


def distinct_runs(data: ReportData, b: str) -> list[str]:
    """The runs of ``b`` in display order, each run scored twice once (:func:`repeats`)."""
    twice = repeats(data, b)
    return [m for m in data.runs.get(b, []) if m not in twice]


def significant_count(pairs: list[dict], key: str) -> int | None:
    """How many compared pairs of runs (a compare report's ``pairs``) differ in ``key`` after Holm's correction
    (``significant_holm``); None, not applicable, when no pair has a test of ``key`` (its p-value is null for every
    pair: the metric is not defined on the benchmark, such as Gender-ECE where no side is gendered)."""
    if all(p["metrics"][key].get("p_value") is None for p in pairs):
        return None
    return sum(bool(p["metrics"][key]["significant_holm"]) for p in pairs)


def variant_of(data: ReportData, b: str) -> str | None:
    """The first entry of ``b``'s source when ``b`` is a later entry (a benchmark variant), else None."""
    return next((first for first, later in data.variants.items() if b in later), None)


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
    tone: str = ""  # a matrix cell's direction when significant (``higher``, ``lower``): coloured on the page


@dataclass
class Column:
    key: str
    label: str
    worst: str | None = "high"  # which end is worst: high, low, or None (not ranked)
    digits: int = 3
    # None: ``digits`` decimals; N: N significant digits (format_significant), for numbers read against a tolerance
    # far below 10^-digits (the engine agreement's 1e-3)
    significant: int | None = None
    text: bool = False  # a text column (sentences): left-aligned, wraps on the page
    note_below: bool = False  # on the page, a cell's note goes on a line of its own under its value (narrower)


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
    markdown: bool = True  # False: too wide for a markdown table, on the detail page only


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


def mark_worst(table: Table, checks: Collection[str] = ()) -> Table:
    """Mark the worst and the best number of every ranked column (ties: all of them; needs two
    different numbers). The rows of ``checks`` (their first label: :attr:`ReportData.checks`) are not ranked."""
    for j, col in enumerate(table.columns):
        if col.worst is None:
            continue
        cells = [r.cells[j] for r in table.rows if r.label[0] not in checks]
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


def format_significant(x: float | None, significant: int = 2) -> str:
    """A number to ``significant`` significant digits (Python's ``g``: scientific notation below 1e-4), integers as
    they are: ``1.2e-05``, ``-0.00031``, ``0.0042``, ``1.6``, ``0``, so that a value near 1e-5 reads as such against
    a tolerance of 1e-3 (where three decimals would show ``0.000`` and ``-0.000``)."""
    if x is None or isinstance(x, bool | int):
        return format_number(x)
    return "0" if x == 0 else f"{x:.{significant}g}"  # -0.0 too


def format_bound(x: float, digits: int = 3) -> str:
    """An interval's end to ``digits`` decimals, or to two significant digits where rounding would make a nonzero
    end 0 (an interval that just excludes 0 must not read as holding it): ``0.042``, ``0.00031``, ``-0.00012``."""
    return f"{x:.2g}" if x != 0 and round(x, digits) == 0 else f"{x:.{digits}f}"


def format_cell(cell: Cell, col: Column) -> str:
    """The cell as plain text: ``0.158 [0.133, 0.188]``, ``0.197 ± 0.041``, ``–`` for null."""
    if isinstance(cell.value, str):
        text = cell.value
    else:

        def number(x: float | None) -> str:
            return format_number(x, col.digits) if col.significant is None else format_significant(x, col.significant)

        text = number(cell.value)
        if cell.value is not None and cell.low is not None and cell.high is not None:
            text += f" [{number(cell.low)}, {number(cell.high)}]"
        if cell.value is not None and cell.spread is not None:
            text += f" ± {number(cell.spread)}"
    if cell.note:
        text += f" {cell.note}"
    return text
