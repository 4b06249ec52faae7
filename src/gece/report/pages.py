"""The report's detail pages, ``reports/pages/<name>.html``: one per table of the page (``reports/tables/<name>.md``
as HTML, the calibration page with its before-and-after figures) and one of the confidently wrong pairs. They keep
index.html small: it links each of them from its bar and its Tables section. Same skeleton and style sheet as
index.html; their paths to figures and tables start with ``../``."""

from __future__ import annotations

from gece.io.paths import report_layout
from gece.report.cells import ReportData, TableDoc
from gece.report.html import EXAMPLES_PAGE, TITLE, fill_page, nav_html
from gece.report.markup import doc_html, esc, href, img, md_inline, table_html

UP = "../"  # from reports/pages/ to the directory of index.html


def _calibration_figures(data: ReportData, figures: dict) -> list[str]:
    out = []
    for b in data.benchmarks:
        if b in figures.get("calibration", {}):
            alt = f"reliability diagrams before and after calibration on {b}"
            out.append(
                f"<figure>{img(figures['calibration'][b], alt, figures, UP)}<figcaption>{esc(b)}: before "
                "calibration (top row) and after each method (one row per method), on the held-out "
                "pairs of the split protocol; one column per model.</figcaption></figure>"
            )
    return out


def examples_html(docs: list[TableDoc]) -> str:
    """The confidently wrong pairs: the caption once, then one collapsed table per benchmark."""
    out = ['<section id="examples"><h2>Confidently wrong pairs</h2>']
    if not docs:
        out.append(
            '<p class="missing">Not available: no score files (artifacts/scores/&lt;benchmark&gt;/'
            "&lt;model&gt;.parquet) with a wrong prediction.</p></section>"
        )
        return "\n".join(out)
    out.append(f'<p class="caption">{md_inline(docs[0].caption)}</p>')
    for doc in docs:
        t = doc.tables[0]
        out.append(
            f'<details id="{esc(doc.name)}"><summary>{esc(t.heading)} ({len(t.rows)} rows) '
            f'<a class="md" href="{href(report_layout.table_file(doc.name), UP)}">markdown</a></summary>'
        )
        out.append(f'<p class="note">{esc(t.note)}</p>')
        out.append(table_html(t))
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def render_pages(data: ReportData, docs: list[TableDoc], examples: list[TableDoc], figures: dict) -> dict[str, str]:
    """{path relative to the directory of index.html: page}: one page per table document of ``docs`` and the page of
    the confidently wrong pairs (``examples``). ``figures`` as for :func:`gece.report.html.render_html`
    (``calibration`` {benchmark: path} goes on the calibration page)."""
    nav = nav_html(data, docs, UP)
    out = {}
    for doc in docs:
        content = [doc_html(doc, UP)]
        if doc.name == "calibration":
            content += _calibration_figures(data, figures)
        out[report_layout.page_file(doc.name)] = fill_page(
            data, f"{TITLE}: {doc.title}", doc.title, nav, "\n".join(content)
        )
    out[report_layout.page_file(EXAMPLES_PAGE)] = fill_page(
        data, f"{TITLE}: confidently wrong pairs", "Confidently wrong pairs", nav, examples_html(examples)
    )
    return out
