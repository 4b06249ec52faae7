"""The page's markup: text and paths escaped for HTML, tables and their sections, images; shared by the page
(:mod:`gece.report.html`) and its detail pages (:mod:`gece.report.pages`). A ``prefix`` is what a path relative
to the directory of index.html needs in front of it on the page being written (``../`` on a detail page)."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from urllib.parse import quote

from gece.io.paths import report_layout
from gece.report.cells import BEST_MARK, WORST_MARK, Cell, Column, Table, TableDoc, format_cell, shown_text


# ----------------------------------------------------------------------------- HTML
def esc(text: object) -> str:
    """Text as HTML text or an attribute value: :func:`~gece.report.cells.shown_text` (one line, invisible
    control and format characters written as ``<U+202E>``), as in the markdown tables, then HTML-escaped."""
    return html.escape(shown_text(text), quote=True)


def href(path: str, prefix: str = "") -> str:
    """A relative path as an attribute value: percent-encoded (a ``#``, ``?`` or space in a name
    stays part of the path), then escaped."""
    return esc(prefix + quote(path, safe="/"))


def md_inline(text: str) -> str:
    """The little markdown the captions use (`code`, **bold**, *italic*) as HTML, escaped."""
    out = esc(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", out)


def cell_html(cell: Cell, col: Column) -> str:
    below = col.note_below and bool(cell.note)  # the note on a line of its own
    full = format_cell(replace(cell, note="") if below else cell, col)
    main = format_cell(Cell(cell.value), col)  # the value; the interval, spread and note follow it, muted
    rest = full[len(main) :]
    text = esc(main) + (f'<span class="ci">{esc(rest)}</span>' if rest else "")
    if below:
        text += f' <br><span class="ci">{esc(cell.note)}</span>'  # a space: the text reads as in markdown
    classes = ["wrap"] if col.text else ["num"] if not isinstance(cell.value, str) else ["text"]
    title = ""
    if cell.worst:
        classes.append("worst")
        text = f'<strong>{text}</strong> <span class="mark">{WORST_MARK[cell.worst]}</span>'
        title = f' title="worst ({cell.worst}est) in this column"'
    elif cell.best:
        classes.append("best")
        text = f'{text} <span class="mark">{BEST_MARK}</span>'
        title = f' title="best ({cell.best}est) in this column"'
    elif cell.strong:
        classes.append("strong")
        text = f"<strong>{text}</strong>"
    if cell.mark:
        text += f" {esc(cell.mark)}"
    if cell.tone:
        classes.append(f"tone-{cell.tone}")
    return f'<td class="{" ".join(classes)}"{title}>{text}</td>'


NUM_CLASS = ' class="num"'


def table_html(table: Table) -> str:
    head = "".join(f'<th scope="col">{esc(x)}</th>' for x in table.label_columns)
    head += "".join(f'<th scope="col"{"" if c.text else NUM_CLASS}>{esc(c.label)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        src = f' data-source="{esc(row.source)}"' if row.source else ""
        labels = "".join(
            f'<th scope="row">{esc(x)}</th>' if i == 0 else f'<td class="text">{esc(x)}</td>'
            for i, x in enumerate(row.label)
        )
        cells = "".join(cell_html(c, col) for c, col in zip(row.cells, table.columns, strict=True))
        body.append(f"<tr{src}>{labels}{cells}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>' + "".join(body) + "</tbody></table></div>"
    )


def doc_html(doc: TableDoc, prefix: str = "") -> str:
    parts = [
        f'<section id="table-{esc(doc.name)}" class="tabledoc">',
        f'<h3>{esc(doc.title)} <a class="md" '
        f'href="{href(report_layout.table_file(doc.name), prefix)}">markdown</a></h3>',
        f'<p class="caption">{md_inline(doc.caption)}</p>',
    ]
    if not doc.tables:
        parts.append(f'<p class="missing">Not available: {esc(doc.empty)}.</p>')
    for t in doc.tables:
        parts.append(f"<h4>{esc(t.heading)}</h4>")
        if t.note:
            parts.append(f'<p class="note">{esc(t.note)}</p>')
        parts.append(table_html(t))
    parts.append("</section>")
    return "\n".join(parts)


def img(path: str, alt: str, figures: dict, prefix: str = "") -> str:
    """An image that the browser loads when it scrolls into view, with its size reserved (no reflow)."""
    size = figures.get("sizes", {}).get(path)
    dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
    return f'<img src="{href(path, prefix)}" alt="{esc(alt)}"{dims} loading="lazy" decoding="async">'
