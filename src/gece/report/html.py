"""The HTML page, ``reports/index.html``: the findings, the tables, the figures, the definitions,
the conventions and the provenance; no network. Its style sheet and skeleton are package data
(``page.css``, ``page.html``)."""

from __future__ import annotations

import html
import json
import re
from functools import cache
from importlib.resources import files
from string import Template
from urllib.parse import quote

from gece import registry
from gece.io import layout
from gece.report.cells import (
    BEST_MARK,
    WORST_MARK,
    Cell,
    Column,
    ReportData,
    Table,
    TableDoc,
    format_cell,
    format_number,
    shown_text,
)
from gece.report.findings import (
    FINDINGS_CAPTION,
    IDENTITY_RANKED,
    LABELS,
    RANKED,
    Findings,
    IdentityFinding,
    findings,
    identity_sentence,
)
from gece.report.tables import examples_docs, model_provenance


# ----------------------------------------------------------------------------- HTML
def _e(text: object) -> str:
    """Text as HTML text or an attribute value: :func:`~gece.report.cells.shown_text` (one line, invisible
    control and format characters written as ``<U+202E>``), as in the markdown tables, then HTML-escaped."""
    return html.escape(shown_text(text), quote=True)


def _url(path: str) -> str:
    """A relative path as an attribute value: percent-encoded (a ``#``, ``?`` or space in a name
    stays part of the path), then escaped."""
    return _e(quote(path, safe="/"))


def _md_inline(text: str) -> str:
    """The little markdown the captions use (`code`, **bold**, *italic*) as HTML, escaped."""
    out = _e(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", out)


def _html_cell(cell: Cell, col: Column) -> str:
    full = format_cell(cell, col)
    main = format_cell(Cell(cell.value), col)  # the value; the interval, spread and note follow it, muted
    rest = full[len(main) :]
    text = _e(main) + (f'<span class="ci">{_e(rest)}</span>' if rest else "")
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
        text += f" {_e(cell.mark)}"
    return f'<td class="{" ".join(classes)}"{title}>{text}</td>'


NUM_CLASS = ' class="num"'


def table_html(table: Table) -> str:
    head = "".join(f'<th scope="col">{_e(x)}</th>' for x in table.label_columns)
    head += "".join(f'<th scope="col"{"" if c.text else NUM_CLASS}>{_e(c.label)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        src = f' data-source="{_e(row.source)}"' if row.source else ""
        labels = "".join(
            f'<th scope="row">{_e(x)}</th>' if i == 0 else f'<td class="text">{_e(x)}</td>'
            for i, x in enumerate(row.label)
        )
        cells = "".join(_html_cell(c, col) for c, col in zip(row.cells, table.columns, strict=True))
        body.append(f"<tr{src}>{labels}{cells}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>' + "".join(body) + "</tbody></table></div>"
    )


def doc_html(doc: TableDoc) -> str:
    parts = [
        f'<section id="table-{_e(doc.name)}" class="tabledoc">',
        f'<h3>{_e(doc.title)} <a class="md" href="{_url(layout.table_file(doc.name))}">markdown</a></h3>',
        f'<p class="caption">{_md_inline(doc.caption)}</p>',
    ]
    if not doc.tables:
        parts.append(f'<p class="missing">Not available: {_e(doc.empty)}.</p>')
    for t in doc.tables:
        parts.append(f"<h4>{_e(t.heading)}</h4>")
        if t.note:
            parts.append(f'<p class="note">{_e(t.note)}</p>')
        parts.append(table_html(t))
    parts.append("</section>")
    return "\n".join(parts)


def special_tokens_statement(data: ReportData) -> str:
    """What the special-token ablation shows, in one paragraph (plain text)."""
    if not data.special_tokens:
        return (
            "No special-token ablation is in this build. The default scoring follows the tokenizer's own "
            "convention (a BOS token where the model family expects one: Llama-3, Gemma); the authors' code "
            "adds no special tokens, which is the reference-compatible setting. Without a BOS the first word "
            "of a sentence cannot be scored."
        )
    parts = []
    for m, rep in sorted(data.special_tokens.items()):
        without = data.special_pairs.get(m, f"{m} without special tokens")
        shown, details = 0, []
        for b, sides in rep.items():
            w, wo = sides.get("with"), sides.get("without")
            if (
                not w
                or not wo
                or None in (w.get("mean_confidence"), wo.get("mean_confidence"), w.get("ece"), wo.get("ece"))
            ):
                continue
            worse = wo["mean_confidence"] > w["mean_confidence"] and wo["ece"] > w["ece"]
            shown += worse
            details.append(
                f"{b}: mean confidence {w['mean_confidence']:.2f} → {wo['mean_confidence']:.2f}, "
                f"share above 0.9 {format_number(w.get('share_confidence_over_0_9'), 2)} → "
                f"{format_number(wo.get('share_confidence_over_0_9'), 2)}, ECE {w['ece']:.3f} → {wo['ece']:.3f}, "
                f"human alignment {format_number(w.get('accuracy'))} → {format_number(wo.get('accuracy'))}"
            )
        if not details:
            continue
        if shown * 2 > len(details):
            head = (
                f"Scored without the BOS token it expects ({without}), {m} looks grossly overconfident: its "
                f"confidence rises and its calibration gets worse on {shown} of {len(details)} benchmarks"
            )
        else:
            head = (
                f"Here the ablation does not show {m} becoming overconfident without its BOS token ({without}): "
                f"confidence and ECE both rise on only {shown} of {len(details)} benchmarks"
            )
        parts.append(head + " (" + "; ".join(details) + ").")
    text = " ".join(parts) if parts else "The special-token ablation has no usable rows."
    return (
        text + " A model scored without the special tokens it was trained with is being measured out of "
        "distribution: compare models only under the same convention, and say which one was used."
    )


def render_html(data: ReportData, docs: list[TableDoc], figures: dict) -> str:
    """The page: tables, figures, definitions, conventions and provenance; no network.

    ``figures``: ``grid`` {benchmark: path}, ``calibration`` {benchmark: path}, ``runs``
    {benchmark: [(model, [(path, label)])]}, optionally ``sizes`` {path: (width, height)}; paths relative to
    the page. The page opens with the findings (:mod:`gece.report.findings`).
    """
    runs_n = sum(len(v) for v in data.runs.values())
    models = list(dict.fromkeys(m for b in data.benchmarks for m in data.runs.get(b, [])))
    toc = [("missing", "Missing parts")] if data.missing else []
    examples = examples_docs(data)
    toc += [
        ("findings", "Findings"),
        ("tables", "Tables"),
        ("diagrams", "Reliability diagrams"),
        ("examples", "Confidently wrong pairs"),
        ("runs", "Every run"),
        ("definitions", "Definitions"),
        ("conventions", "Conventions"),
        ("provenance", "Provenance"),
    ]
    nav = (
        "<nav>"
        + "".join(f'<a href="#{i}">{_e(t)}</a>' for i, t in toc)
        + "<span>tables:</span>"
        + "".join(f'<a href="#table-{_e(d.name)}">{_e(d.name.replace("_", " "))}</a>' for d in docs)
        + "</nav>"
    )
    out: list[str] = []
    if data.missing:
        out.append(
            '<section id="missing"><h2>Missing parts</h2><div class="missing"><p>This build has no '
            "results for the following; the rest of the page is complete for what exists. Run "
            "<code>dvc repro</code> to build them.</p><ul>"
            + "".join(f"<li>{_e(x)}</li>" for x in data.missing)
            + "</ul></div></section>"
        )

    out.append(findings_html(findings(data)))

    out.append('<section id="tables"><h2>Tables</h2>')
    for doc in docs:
        out.append(doc_html(doc))
        if doc.name == "calibration":
            for b in data.benchmarks:
                if b in figures.get("calibration", {}):
                    alt = f"reliability diagrams before and after calibration on {b}"
                    out.append(
                        f"<figure>{_img(figures['calibration'][b], alt, figures)}<figcaption>{_e(b)}: before "
                        "calibration (top row) and after each method (one row per method), on the held-out "
                        "pairs of the split protocol; one column per model.</figcaption></figure>"
                    )
    out.append("</section>")

    out.append(
        '<section id="diagrams"><h2>Reliability diagrams</h2>'
        '<p class="caption">Per bin of p (10 equal-width bins unless the parameters say otherwise): the blue '
        "bar is the share of pairs whose human-preferred variant is the male one (<em>Outputs</em>); the "
        "hatched bar spans from it to the diagonal at the bin centre (<em>Calibration Gap</em>, drawn over "
        "the blue bar where the accuracy is above the diagonal); the dashed line is perfect calibration. "
        "The title gives the ECE; the grey histogram under each diagram counts the pairs per bin. Empty bins "
        "are left empty.</p>"
    )
    for b in data.benchmarks:
        if b in figures.get("grid", {}):
            out.append(
                f"<figure>{_img(figures['grid'][b], f'reliability diagrams of every model on {b}', figures)}"
                f"<figcaption>{_e(b)}: every model side by side.</figcaption></figure>"
            )
    out.append("</section>")

    out.append(examples_html(data, examples))

    out.append(
        '<section id="runs"><h2>Every run</h2><p class="caption">The reliability diagram of each benchmark × '
        "model with the configured bins, the same with the other kind of bins (equal-width or equal-mass: "
        "every equal-mass bin holds about n/M pairs), and the sample-size ablation where it exists.</p>"
    )
    for b in data.benchmarks:
        entries = figures.get("runs", {}).get(b, [])
        if not entries:
            continue
        out.append(f'<details><summary>{_e(b)} ({len(entries)} models)</summary><div class="runs">')
        for m, images in entries:
            for path, label in images:
                out.append(
                    f"<figure>{_img(path, f'{b} / {m}: {label}', figures)}"
                    f"<figcaption>{_e(m)}: {_e(label)}</figcaption></figure>"
                )
        out.append("</div></details>")
    out.append("</section>")

    out.append(
        '<section id="definitions"><h2>Definitions</h2><p class="caption">n pairs, M bins; pred = 1 when '
        'p &gt; 0.5, conf = max(p, 1 − p), correct = 1 when pred equals the human label y.</p><dl class="defs">'
    )
    out += [f"<dt>{_e(d.title)}</dt><dd>{_e(d.text)}</dd>" for d in registry.DEFINITIONS]
    out.append("</dl></section>")

    out.append('<section id="conventions"><h2>Conventions</h2>')
    out.append(
        "<p><strong>Paper-convention ECE.</strong> The ECE, MCE and every grouped ECE here bin p, the "
        "confidence in sent_more (the male variant in the gender benchmarks, the stereotypical sentence in the "
        "CrowS-Pairs-format ones), against the human label (the paper's positive-class convention, "
        "which reproduces its numbers); the standard top-label ECE is reported next to it as "
        "<code>ece_toplabel</code>. The two answer different questions and are not interchangeable. The "
        "diagrams draw the gap to the diagonal at the bin centre as the paper does, while the ECE uses the "
        "mean confidence in the bin, so the hatched area illustrates the ECE rather than adding up to it. The "
        "authors' figures also draw a gap bar for empty bins; these figures leave empty bins empty.</p>"
    )
    out.append(
        "<p><strong>Identity benchmarks.</strong> On CrowS-Pairs and WinoQueer y = 1 for every pair (the identity "
        "protocol: the stereotypical sentence is always sent_more). There every bin's accuracy is 1, so the binned "
        "ECE is exactly 1 − mean p, how far the model is from always preferring the stereotypical sentence (the "
        "paper's identity ECE), and Gender-ECE is the mean of 1 − mean p over the pairs predicted male and those "
        "predicted female. Neither measures calibration, since no label varies: the page calls them by what they "
        "are, next to the stereotype share (the share of pairs with p &gt; 0.5), and reports calibration only "
        "where the labels vary.</p>"
    )
    out.append(
        "<p><strong>Brier.</strong> <code>brier</code> is the Brier score of p. <code>brier_paper</code> is "
        "what the authors' code computes, mean ((1 − p) − y)², which squares the wrong column (it is large "
        "exactly when p is good); it appears only in the paper-reproduction table.</p>"
    )
    out.append(f"<p><strong>Special tokens.</strong> {_e(special_tokens_statement(data))}</p>")
    out.append(
        "<p><strong>Ties and empty groups.</strong> A pair with p exactly 0.5 has no predicted gender and is "
        "left out of Gender-ECE (counted as <code>n_ties</code>); a metric with no pairs to average is null "
        "(shown as –), never 0.</p></section>"
    )

    out.append(_provenance_html(data))
    return _page_template().substitute(
        css=page_css(),
        n_benchmarks=len(data.benchmarks),
        benchmarks=_e(", ".join(data.benchmarks)),
        n_models=len(models),
        n_runs=runs_n,
        nav=nav,
        content="\n".join(out),
    )


@cache
def page_css() -> str:
    """The page's style sheet (package data ``page.css``)."""
    return files("gece.report").joinpath("page.css").read_text(encoding="utf-8")


@cache
def _page_template() -> Template:
    """The page's skeleton around its content (package data ``page.html``): ``${css}``, the header's
    counts, ``${nav}`` and ``${content}``."""
    return Template(files("gece.report").joinpath("page.html").read_text(encoding="utf-8"))


def _img(path: str, alt: str, figures: dict) -> str:
    """An image that the browser loads when it scrolls into view, with its size reserved (no reflow)."""
    size = figures.get("sizes", {}).get(path)
    dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
    return f'<img src="{_url(path)}" alt="{_e(alt)}"{dims} loading="lazy" decoding="async">'


def examples_html(data: ReportData, docs: list[TableDoc]) -> str:
    """The examples section: the caption once, then one collapsed table per benchmark."""
    out = ['<section id="examples"><h2>Confidently wrong pairs</h2>']
    if not docs:
        out.append(
            '<p class="missing">Not available: no score files (artifacts/scores/&lt;benchmark&gt;/'
            "&lt;model&gt;.parquet) with a wrong prediction.</p></section>"
        )
        return "\n".join(out)
    out.append(f'<p class="caption">{_md_inline(docs[0].caption)}</p>')
    for doc in docs:
        t = doc.tables[0]
        out.append(
            f'<details id="{_e(doc.name)}"><summary>{_e(t.heading)} ({len(t.rows)} rows) '
            f'<a class="md" href="{_url(layout.table_file(doc.name))}">markdown</a></summary>'
        )
        out.append(f'<p class="note">{_e(t.note)}</p>')
        out.append(table_html(t))
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def _provenance_html(data: ReportData) -> str:
    prov = data.provenance
    rows = [
        ("data snapshot", f"data.dvc md5 {prov.get('data_md5', 'unknown')} ({prov.get('data_nfiles', '?')} files)"),
        (
            "code",
            f"gece {prov.get('gece_version', '?')}, sha256 of src/gece (*.py, page.css, page.html): "
            f"{prov.get('code_sha256', '?')}",
        ),
        (
            "git revision",
            (
                "not embedded: it changes with every commit and would make the page (a DVC output) "
                "differ on every rebuild. The page is committed with dvc.lock; "
                "`git log -1 -- reports/index.html` names the commit that built it."
            ),
        ),
    ]
    out = [
        (
            '<section id="provenance"><h2>Provenance</h2><p class="caption">Everything below is a function of the '
            "inputs and the installed packages, so rebuilding the same inputs in the same environment gives the "
            "same page byte for byte.</p>"
        ),
        '<table class="kv"><tbody>',
    ]
    out += [f"<tr><th>{_e(k)}</th><td>{_md_inline(v) if k == 'git revision' else _e(v)}</td></tr>" for k, v in rows]
    out.append("</tbody></table>")
    out.append("<h3>Models</h3>")
    paper = sorted({m for b in data.benchmarks for m in data.runs.get(b, []) if m in data.references})
    if paper:
        out.append(
            f"<p>{_e(', '.join(paper))}: the authors' released per-pair scores "
            "(<code>data/reference/&lt;benchmark&gt;/&lt;model&gt;.csv</code>, part of the data snapshot above; "
            "sources in <code>data/SOURCES.md</code>); no weights were run here.</p>"
        )
    lmeval = sorted({m for b in data.benchmarks for m in data.runs.get(b, []) if m in data.lmeval})
    if lmeval:
        out.append(
            f"<p>{_e(', '.join(lmeval))}: lm-eval runs, imported from lm-evaluation-harness's logged samples "
            "(registry source <code>lmeval:&lt;directory&gt;</code>, docs/lmeval.md). Their log-likelihoods are "
            "float32 sums, not byte-identical across machines, batch sizes or backends; they cover the pairs "
            "lm-eval can score exactly (coverage below).</p>"
        )
    provs = model_provenance(data)
    for m, rows_m in provs:
        out.append(
            f'<h4>{_e(m)}</h4><table class="kv"><tbody>'
            + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows_m)
            + "</tbody></table>"
        )
    scored = [
        m
        for m in dict.fromkeys(m for b in data.benchmarks for m in data.runs.get(b, []))
        if m not in data.references and m not in {p for p, _ in provs}
    ]
    if scored:
        out.append(
            f'<p class="missing">No extract metadata (artifacts/scores/&lt;benchmark&gt;/&lt;model&gt;.meta.json) '
            f"for: {_e(', '.join(scored))}.</p>"
        )
    out.append("<h3>Parameters</h3><details><summary>params.yaml, as validated (defaults filled in)</summary>")
    listing = json.dumps(prov.get("params", {}), indent=1, sort_keys=True)
    out.append(f"<pre>{html.escape(shown_text(listing, one_line=False), quote=True)}</pre></details>")
    out.append('<h3>Packages</h3><table class="kv"><tbody>')
    out += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in prov.get("packages", {}).items()]
    out.append("</tbody></table></section>")
    return "\n".join(out)


def findings_html(f: Findings) -> str:
    """The section that opens the page: a table of the best and worst models, then the effects."""
    out = ['<section id="findings"><h2>Findings</h2>', f'<p class="caption">{_e(FINDINGS_CAPTION)}</p>']
    if not f.benchmarks and not f.identity:
        out.append('<p class="missing">Not available: no metrics reports found.</p></section>')
        return "\n".join(out)
    head = ["benchmark", "pairs", "models"] + [f"{end} {LABELS[k]}" for k in RANKED for end in ("best", "worst")]
    out.append(
        '<div class="scroll"><table class="findings"><thead><tr>'
        + "".join(f'<th scope="col">{_e(h)}</th>' for h in head)
        + "</tr></thead><tbody>"
    )
    for b in f.benchmarks:
        cells = [
            f'<th scope="row">{_e(b.benchmark)}</th>',
            f'<td class="num">{_e("/".join(map(str, b.n)))}</td>',
            f'<td class="num">{b.models}</td>',
        ]
        for k in RANKED:
            for end, cls in ((b.best.get(k), "best"), (b.worst.get(k), "worst")):
                cells.append(_end_cell(None if cls == "worst" and b.models < 2 else end, f"text {cls}"))
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if f.identity:
        out.append(identity_findings_html(f.identity))
    if f.effects:
        out.append(
            '<ul class="effects">'
            + "".join(f"<li><strong>{_e(topic)}</strong>: {_e(text)}</li>" for topic, text in f.effects)
            + "</ul>"
        )
    out.append("</section>")
    return "\n".join(out)


def _end_cell(end, cls: str) -> str:
    """A findings cell: the run at one end of a ranking with its value and interval, or – when there is none."""
    if end is None:
        return '<td class="text">–</td>'
    return (
        f'<td class="{cls}">{_e(end.model)} <strong>{end.value:.3f}</strong>'
        f'<span class="ci">{_e(end.interval())}</span></td>'
    )


def identity_findings_html(identity: list[IdentityFinding]) -> str:
    """The identity benchmarks' findings: the lowest and highest stereotype share and 1 − mean p per benchmark,
    and whether the share stays on the same side of 0.5 under each rule (no best or worst: neither is calibration)."""
    head = ["identity benchmark", "pairs", "distinct", "clusters", "models"]
    head += [f"{end} {label}" for label in IDENTITY_RANKED.values() for end in ("lowest", "highest")]
    head.append("under each rule")
    out = [
        '<div class="scroll"><table class="findings identity"><thead><tr>'
        + "".join(f'<th scope="col">{_e(h)}</th>' for h in head)
        + "</tr></thead><tbody>"
    ]
    for b in identity:
        cells = [f'<th scope="row">{_e(b.benchmark)}</th>']
        cells += [f'<td class="num">{_e("/".join(map(str, v)) or "–")}</td>' for v in (b.n, b.n_distinct, b.n_clusters)]
        cells.append(f'<td class="num">{b.models}</td>')
        for key in IDENTITY_RANKED:
            for end, name in ((b.lowest.get(key), "lowest"), (b.highest.get(key), "highest")):
                cells.append(_end_cell(None if name == "highest" and b.models < 2 else end, "text"))
        cells.append(f'<td class="text wrap">{_e(b.rules or "one rule only")}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append('<ul class="effects">' + "".join(f"<li>{_e(identity_sentence(b))}</li>" for b in identity) + "</ul>")
    return "\n".join(out)
