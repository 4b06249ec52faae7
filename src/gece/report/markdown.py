"""The report as markdown: ``reports/tables/*.md``, the comparison table ``reports/compare/<b>.md``,
and the escaping that makes data text an inert table cell."""

from __future__ import annotations

from gece.base.terminal import plural
from gece.catalog import metric_defs
from gece.io.paths import report_layout
from gece.report.cells import (
    BEST_MARK,
    POWER_RUNS,
    WORST_MARK,
    Cell,
    Column,
    Table,
    TableDoc,
    format_cell,
    format_fixed,
    format_p,
    pair_sizes,
    shown_text,
)


def _label(key: str) -> str:
    """A comparison column's label: the metric table's, as in reports/tables/compare.md and `gece compare`'s table."""
    return metric_defs.label(key)


def compare_markdown(result: dict, labels: dict[str, str] | None = None) -> str:
    """One row per model pair: A − B with its interval and p-value per metric; significant
    differences in bold (p < alpha), † where they survive Holm's correction over the pair's metrics.
    Names (benchmark, models) are escaped; the numbers are written here (``<0.001`` is no tag). A metric is headed
    by its registry label, as in reports/tables/compare.md and `gece compare`'s table, or by ``labels`` (a
    protocol's numbers)."""
    keys = list(result["pairs"][0]["metrics"]) if result["pairs"] else []

    def _label(key: str) -> str:
        return (labels or {}).get(key) or metric_defs.label(key)

    level = f"{result['level']:.0%}"
    lines = [
        f"# Paired model comparison: {_md_escape(result['benchmark'])}",
        "",
        (
            f"Difference A − B on the pairs both runs score (the pairs column; {pair_sizes(result)} in all), paired "
            "bootstrap of "
            f"{'clusters' if result.get('n_clusters') else 'pairs'} with {result['draws']} resamples "
            f"(seed {result['seed']}): point difference, {level} bias-corrected percentile interval and two-sided "
            "p-value. "
            f"**Bold**: significant at α = {result['alpha']}; †: still significant after Holm's correction "
            f"over the {len(keys)} metrics of the pair. The smallest p-value {result['draws']} resamples can give "
            f"is {2 / (result['draws'] + 1):.4f}; with {plural(len(result['pairs']), 'model pair')} and "
            f"{plural(len(result['pairs']) * len(keys), 'difference')} in the table, expect some to be significant "
            f"at α = {result['alpha']} by chance alone."
        ),
        "",
        "| A | B | pairs | " + " | ".join(_label(k) for k in keys) + " |",
        "|---|---|---:|" + "---|" * len(keys),
    ]
    for pair in result["pairs"]:
        cells = []
        for k in keys:
            c = pair["metrics"][k]
            interval = f"[{format_fixed(c['ci_low'])}, {format_fixed(c['ci_high'])}]"
            text = f"{format_fixed(c['diff'], 3)} {interval}, {format_p(c['p_value'])}"
            if c["significant"]:
                text = f"**{text}**" + (" †" if c["significant_holm"] else "")
            cells.append(text)
        lines.append(f"| {_md_escape(pair['a'])} | {_md_escape(pair['b'])} | {pair['n']} | " + " | ".join(cells) + " |")
    n_sig = sum(c["significant"] for pair in result["pairs"] for c in pair["metrics"].values())
    total = len(result["pairs"]) * len(keys)
    lines += [
        "",
        (
            f"{n_sig} of {plural(total, 'difference')} {'is' if total == 1 else 'are'} significant at "
            f"α = {result['alpha']}."
        ),
    ]
    power = result.get("power")
    if power:
        lines += [
            "",
            (
                f"Power: the smallest true difference the paired test detects with {power['level']:.0%} power "
                f"at α = {result['alpha']} (median and range over {power['pairs']} pairs of "
                f"{POWER_RUNS[power['runs']]}):"
            ),
            "",
            "| metric | minimum detectable difference | range |",
            "|---|--:|--:|",
        ]
        lines += [
            f"| {_label(k)} | {format_fixed(v['median'])} | {format_fixed(v['min'])} – {format_fixed(v['max'])} |"
            for k, v in power["mde"].items()
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- markdown
_MD_BACKSLASH = set("\\`*~|$")  # active anywhere in a line (code, emphasis, strike-through, cells, math)
_MD_AT_START = set("#+=->")  # active at the start of a line (headings, list items, setext underlines, quotes)
_MD_OPENS_HTML = set("/!?")  # after "<": a closing tag, a comment or declaration, a processing instruction


def _md_escape(text: object) -> str:
    """Text as an inert markdown table cell (GitHub-flavoured markdown) that renders as the text.

    - :func:`~gece.report.cells.shown_text` first, as on the page: line breaks become a space (a row stays
      on one line; the ends are stripped) and invisible control and format characters (U+202E, U+200B, ...)
      are written as ``<U+202E>``;
    - then markdown's own escapes, never HTML entities (``&lt;`` in the markdown source would read as
      ``&lt;`` to whoever opens the file): a backslash before each character that would start markup.
      ``<`` gets one before a letter, ``/``, ``!`` or ``?`` (a raw HTML tag, comment or autolink: ``<script>``
      must reach the renderer as text), ``&`` before a letter or ``#`` (a character reference: ``&lt;`` in
      the data shows as ``&lt;``), so ``p < 0.001`` and ``AT & T`` stay as written;
    - a backslash, ``|`` (the cell separator), a backtick (code spans), ``*`` (emphasis), ``~``
      (strike-through) and ``$`` (math on GitHub) get a backslash, wherever they are; so does
      ``_`` unless it is inside a word (``genderlex_person``: intraword ``_`` emphasises
      nothing), ``]`` before ``(`` or ``[`` (links, images) and ``[`` before ``^`` (footnotes);
      other brackets stay (a table cell cannot hold the reference definition a bare ``[x]``
      would need), so an interval reads ``0.158 [0.133, 0.188]``;
    - ``#``, ``+``, ``=``, ``-`` and ``>`` at the start get a backslash (headings, list items, setext lines,
      block quotes where the text starts a line).

    Everything else, non-ASCII included (accents, CJK, emoji, right-to-left letters, combining
    marks), is kept unchanged. Undoing the backslashes gives back ``shown_text(text).strip()``. Not made inert:
    bare URLs (GitHub links them) and ``:name:`` emoji codes; neither can add markup.
    """
    text = shown_text(text).strip(" ")
    out = []
    for i, ch in enumerate(text):
        before, after = text[i - 1 : i], text[i + 1 : i + 2]
        if (
            ch in _MD_BACKSLASH
            or (i == 0 and ch in _MD_AT_START)
            or (ch == "<" and after != "" and ((after.isascii() and after.isalpha()) or after in _MD_OPENS_HTML))
            or (ch == "&" and after != "" and ((after.isascii() and after.isalpha()) or after == "#"))
            or (ch == "[" and after == "^")
            or (ch == "]" and after in ("(", "["))
            or (ch == "_" and not (before.isalnum() and after.isalnum()))
        ):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _md_cell(cell: Cell, col: Column) -> str:
    text = _md_escape(format_cell(cell, col))
    if cell.worst:
        text = f"**{text}** {WORST_MARK[cell.worst]}"
    elif cell.best:
        text = f"{text} {BEST_MARK}"
    elif cell.strong:
        text = f"**{text}**"
    if cell.mark:
        text += f" {cell.mark}"
    return text


def table_markdown(table: Table) -> str:
    head = [*table.label_columns, *(c.label for c in table.columns)]
    align = ["---"] * len(table.label_columns) + ["---" if c.text else "--:" for c in table.columns]
    lines = ["| " + " | ".join(map(_md_escape, head)) + " |", "|" + "|".join(align) + "|"]
    for row in table.rows:
        cells = [_md_escape(x) for x in row.label] + [
            _md_cell(c, col) for c, col in zip(row.cells, table.columns, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def doc_markdown(doc: TableDoc) -> str:
    parts = [f"# {_md_escape(doc.title)}", "", doc.caption, ""]  # captions are markdown written here
    if not doc.tables:
        parts += [f"_Not available: {_md_escape(doc.empty)}._", ""]
    for t in doc.tables:
        parts += [f"## {_md_escape(t.heading)}", ""]
        if not t.markdown:
            parts += [f"_Too wide for markdown: on the detail page `{report_layout.page_file(doc.name)}`._", ""]
            continue
        if t.note:
            parts += [_md_escape(t.note), ""]
        parts += [table_markdown(t), ""]
    parts.append("_Generated by `gece report` from the JSON reports; do not edit._")
    return "\n".join(parts) + "\n"
