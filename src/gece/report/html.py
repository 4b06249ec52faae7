"""The HTML page, ``reports/index.html``: the answers and findings, links to the detail pages (the tables:
:mod:`gece.report.pages`), the figures, the definitions, the conventions and the provenance; no network. Its
style sheet and skeleton are package data (``page.css``, ``page.html``), shared by the detail pages."""

from __future__ import annotations

import html
import json
from functools import cache
from importlib.resources import files
from string import Template

from gece.base.terminal import plural
from gece.catalog import metric_defs
from gece.io.paths import report_layout
from gece.report.answers import Answers, answers, differ_line, gap_line, same_line
from gece.report.cells import ReportData, TableDoc, format_number, shown_text
from gece.report.examples import examples_docs
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
from gece.report.first_screen import checks_html, first_screen_html
from gece.report.gaps import GAP_MAX_WIDTH
from gece.report.markup import esc, href, img, md_inline
from gece.report.provenance import model_provenance, shared
from gece.report.readings import reading_of


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
        shown, details, same = 0, [], []
        for b, sides in rep.items():
            w, wo = sides.get("with"), sides.get("without")
            if w and w == wo:  # one run scored twice: nothing changes
                same.append(b)
                continue
            if (
                not reading_of(data, b).calibration  # no calibration or human alignment to speak of
                or not w
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
        tail = f" On {', '.join(same)} {without} and {m} give every pair the same score: one run." if same else ""
        parts.append(head + " (" + "; ".join(details) + ")." + tail)
    text = " ".join(parts) if parts else "The special-token ablation has no usable rows."
    return (
        text + " A model scored without the special tokens it was trained with is being measured out of "
        "distribution: compare models only under the same convention, and say which one was used."
    )


TITLE = "gece report: calibration of model confidence against human judgements of gender bias"
# the sections of index.html, in order (id, title); "Missing parts" opens the page when something is
SECTIONS = (
    ("answers-figures", "Answers"),
    ("findings", "Findings"),
    ("tables", "Tables"),
    ("diagrams", "Reliability diagrams"),
    ("examples", "Confidently wrong pairs"),
    ("runs", "Every run"),
    ("definitions", "Definitions"),
    ("conventions", "Conventions"),
    ("provenance", "Provenance"),
)
EXAMPLES_PAGE = "examples"  # the detail page of the confidently wrong pairs (report_layout.page_file)


def nav_html(data: ReportData, docs: list[TableDoc], prefix: str = "") -> str:
    """The bar under the header: every section of index.html and every detail page, one click each. ``prefix``:
    ``../`` on a detail page."""
    index = f"{prefix}{report_layout.PAGE_FILE}" if prefix else ""
    toc = ([("missing", "Missing parts")] if data.missing else []) + list(SECTIONS)
    return (
        "<nav>"
        + "".join(f'<a href="{href(index)}#{i}">{esc(t)}</a>' for i, t in toc)
        + "<span>pages:</span>"
        + "".join(
            f'<a href="{href(report_layout.page_file(d.name), prefix)}">{esc(d.name.replace("_", " "))}</a>'
            for d in docs
        )
        + f'<a href="{href(report_layout.page_file(EXAMPLES_PAGE), prefix)}">wrong pairs</a>'
        + "</nav>"
    )


def fill_page(data: ReportData, title: str, heading: str, nav: str, content: str) -> str:
    """A whole page (index.html or a detail page): the skeleton of ``page.html`` around ``content``."""
    models = list(dict.fromkeys(m for b in data.benchmarks for m in data.runs.get(b, [])))
    return _page_template().substitute(
        css=page_css(),
        title=esc(title),
        heading=esc(heading),
        n_benchmarks=len(data.benchmarks),
        n_models=len(models),
        n_runs=sum(len(v) for v in data.runs.values()),
        nav=nav,
        content=content,
    )


def render_html(data: ReportData, docs: list[TableDoc], figures: dict) -> str:
    """index.html: the answers and findings, links to the detail pages (:mod:`gece.report.pages`: the tables and
    the confidently wrong pairs), the figures, definitions, conventions and provenance; no network.

    ``figures``: ``grid`` {benchmark: path}, ``runs`` {benchmark: [(model, [(path, label)])]}, optionally
    ``sizes`` {path: (width, height)} and ``answers`` (the first screen's figures,
    :class:`gece.report.first_screen.AnswerFigure`); paths relative to the page. The page opens with those
    figures, then the answers in sentences (:mod:`gece.report.answers`) and the findings
    (:mod:`gece.report.findings`).
    """
    out = [
        *_missing_html(data),
        first_screen_html(data, figures.get("answers", [])),
        *checks_html(data),
        findings_html(findings(data), answers(data)),
        *_tables_html(docs),
        *_diagrams_html(data, figures),
        _examples_html(examples_docs(data)),
        *_runs_html(data, figures),
        *_definitions_html(),
        *_conventions_html(data),
        _provenance_html(data),
    ]
    return fill_page(data, TITLE, "gece report", nav_html(data, docs), "\n".join(out))


def _missing_html(data: ReportData) -> list[str]:
    """The "Missing parts" section, which opens the page when this build lacks something; none otherwise."""
    if not data.missing:
        return []
    return [
        '<section id="missing"><h2>Missing parts</h2><div class="missing"><p>This build has no '
        "results for the following; the rest of the page is complete for what exists. Run "
        "<code>dvc repro</code> to build them.</p><ul>"
        + "".join(f"<li>{esc(x)}</li>" for x in data.missing)
        + "</ul></div></section>"
    ]


def _tables_html(docs: list[TableDoc]) -> list[str]:
    """The "Tables" section: a link to each table's detail page and to its markdown."""
    out = [
        '<section id="tables"><h2>Tables</h2><p class="caption">Each table on its own page, also as markdown in '
        '<code>reports/tables/</code>.</p><ul class="pages">'
    ]
    for doc in docs:
        size = f"{plural(len(doc.tables), 'table')}" if doc.tables else "not available"
        out.append(
            f'<li><a href="{href(report_layout.page_file(doc.name))}">{esc(doc.title)}</a> <span class="ci">{esc(size)}'
            f'</span> <a class="md" href="{href(report_layout.table_file(doc.name))}">markdown</a></li>'
        )
    out.append("</ul></section>")
    return out


def _diagrams_html(data: ReportData, figures: dict) -> list[str]:
    """The "Reliability diagrams" section: how to read them, then each benchmark's grid of every model."""
    out = [
        '<section id="diagrams"><h2>Reliability diagrams</h2>'
        '<p class="caption">Per bin of p (10 equal-width bins unless the parameters say otherwise): the blue '
        "bar is the share of pairs whose human-preferred variant is the male one (<em>Outputs</em>); the "
        "hatched bar spans from it to the diagonal at the bin centre (<em>Calibration Gap</em>, drawn over "
        "the blue bar where the accuracy is above the diagonal); the dashed line is perfect calibration. "
        "The title gives the ECE; the grey histogram under each diagram counts the pairs per bin. Empty bins "
        "are left empty.</p>"
    ]
    for b in data.benchmarks:
        if b in figures.get("grid", {}):
            out.append(
                f"<figure>{img(figures['grid'][b], f'reliability diagrams of every model on {b}', figures)}"
                f"<figcaption>{esc(b)}: every model side by side.</figcaption></figure>"
            )
    out.append("</section>")
    return out


def _examples_html(examples: list[TableDoc]) -> str:
    """The "Confidently wrong pairs" section: a link to their detail page, or why there are none."""
    rows = sum(len(d.tables[0].rows) for d in examples)
    return '<section id="examples"><h2>Confidently wrong pairs</h2><p>' + (
        f'<a href="{href(report_layout.page_file(EXAMPLES_PAGE))}">{plural(rows, "pair")} on '
        f"{plural(len(examples), 'benchmark')}</a>: the pairs where each model is most confident and the human "
        "judgement disagrees.</p></section>"
        if examples
        else "Not available: no score files (artifacts/scores/&lt;benchmark&gt;/&lt;model&gt;.parquet) with a "
        "wrong prediction.</p></section>"
    )


def _runs_html(data: ReportData, figures: dict) -> list[str]:
    """The "Every run" section: per benchmark, a folded list of each model's figures."""
    out = [
        '<section id="runs"><h2>Every run</h2><p class="caption">The reliability diagram of each benchmark × '
        "model with the configured bins, the same with the other kind of bins (equal-width or equal-mass: "
        "every equal-mass bin holds about n/M pairs), and the sample-size ablation where it exists.</p>"
    ]
    for b in data.benchmarks:
        entries = figures.get("runs", {}).get(b, [])
        if not entries:
            continue
        out.append(f'<details><summary>{esc(b)} ({len(entries)} models)</summary><div class="runs">')
        for m, images in entries:
            for path, label in images:
                out.append(
                    f"<figure>{img(path, f'{b} / {m}: {label}', figures)}"
                    f"<figcaption>{esc(m)}: {esc(label)}</figcaption></figure>"
                )
        out.append("</div></details>")
    out.append("</section>")
    return out


def _definitions_html() -> list[str]:
    """The "Definitions" section: every metric of ``metric_defs.DEFINITIONS``."""
    return [
        '<section id="definitions"><h2>Definitions</h2><p class="caption">n pairs, M bins; pred = 1 when '
        'p &gt; 0.5, conf = max(p, 1 − p), correct = 1 when pred equals the human label y.</p><dl class="defs">',
        *(f"<dt>{esc(d.title)}</dt><dd>{esc(d.text)}</dd>" for d in metric_defs.DEFINITIONS),
        "</dl></section>",
    ]


def _conventions_html(data: ReportData) -> list[str]:
    """The "Conventions" section: what is measured, the paper's ECE, the identity benchmarks, the Brier scores,
    the special tokens (from this build's ablation) and ties."""
    return [
        '<section id="conventions"><h2>Conventions</h2>',
        "<p><strong>What is measured.</strong> For each minimal pair the model's confidence p in sent_more (the "
        "male variant in the gender benchmarks, the stereotypical sentence in the CrowS-Pairs-format ones), "
        "against the human judgement. Lower calibration errors are better; human alignment is the share of pairs "
        "where the model prefers the same variant as people. Built by <code>gece report</code> (the DVC stage "
        "<code>report</code>) from the JSON reports; every table is also in <code>reports/tables/*.md</code>.</p>",
        "<p><strong>Paper-convention ECE.</strong> The ECE, MCE and every grouped ECE here bin p, the "
        "confidence in sent_more (the male variant in the gender benchmarks, the stereotypical sentence in the "
        "CrowS-Pairs-format ones), against the human label (the paper's positive-class convention, "
        "which reproduces its numbers); the standard top-label ECE is reported next to it as "
        "<code>ece_toplabel</code>. The two answer different questions and are not interchangeable. The "
        "diagrams draw the gap to the diagonal at the bin centre as the paper does, while the ECE uses the "
        "mean confidence in the bin, so the hatched area illustrates the ECE rather than adding up to it. The "
        "authors' figures also draw a gap bar for empty bins; these figures leave empty bins empty.</p>",
        "<p><strong>Identity benchmarks.</strong> On CrowS-Pairs and WinoQueer y = 1 for every pair (the identity "
        "protocol: the stereotypical sentence is always sent_more). There every bin's accuracy is 1, so the binned "
        "ECE is exactly 1 − mean p, how far the model is from always preferring the stereotypical sentence (the "
        "paper's identity ECE), and Gender-ECE is the mean of 1 − mean p over the pairs predicted male and those "
        "predicted female. Neither measures calibration, since no label varies: the page calls them by what they "
        "are, next to the stereotype share (the share of pairs with p &gt; 0.5), and reports calibration only "
        "where the labels vary.</p>",
        "<p><strong>Brier.</strong> <code>brier</code> is the Brier score of p. <code>brier_paper</code> is "
        "what the authors' code computes, mean ((1 − p) − y)², which squares the wrong column (it is large "
        "exactly when p is good); it appears only in the paper-reproduction table.</p>",
        f"<p><strong>Special tokens.</strong> {esc(special_tokens_statement(data))}</p>",
        "<p><strong>Ties and empty groups.</strong> A pair with p exactly 0.5 has no predicted gender and is "
        "left out of Gender-ECE (counted as <code>n_ties</code>); a metric with no pairs to average is null "
        "(shown as –), never 0.</p></section>",
    ]


PAGE_CSS, PAGE_TEMPLATE = "page.css", "page.html"  # package data beside this module
PAGE_DATA = (PAGE_CSS, PAGE_TEMPLATE)


def package_data(name: str) -> bytes:
    """The bytes of one of :data:`PAGE_DATA`."""
    return files("gece.report").joinpath(name).read_bytes()


@cache
def page_css() -> str:
    """The page's style sheet (package data ``page.css``)."""
    return package_data(PAGE_CSS).decode("utf-8")


@cache
def _page_template() -> Template:
    """The page's skeleton around its content (package data ``page.html``): ``${css}``, the header's
    counts, ``${nav}`` and ``${content}``."""
    return Template(package_data(PAGE_TEMPLATE).decode("utf-8"))


def _provenance_html(data: ReportData) -> str:
    prov = data.provenance
    rows = [
        ("data snapshot", f"data.dvc md5 {prov.get('data_md5', 'unknown')} ({prov.get('data_nfiles', '?')} files)"),
        (
            "code",
            f"gece {prov.get('gece_version', '?')}, sha256 of stage-code/ (each command's code by what it does: "
            "comments and docstrings do not count), page.css and page.html: "
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
    out += [f"<tr><th>{esc(k)}</th><td>{md_inline(v) if k == 'git revision' else esc(v)}</td></tr>" for k, v in rows]
    out.append("</tbody></table>")
    out.append("<h3>Models</h3>")
    paper = sorted({m for b in data.benchmarks for m in data.runs.get(b, []) if m in data.references})
    if paper:
        out.append(
            f"<p>{esc(', '.join(paper))}: the authors' released per-pair scores "
            "(<code>data/reference/&lt;benchmark&gt;/&lt;model&gt;.csv</code>, part of the data snapshot above; "
            "sources in <code>data/SOURCES.md</code>); no weights were run here.</p>"
        )
    lmeval = sorted({m for b in data.benchmarks for m in data.runs.get(b, []) if m in data.lmeval})
    if lmeval:
        out.append(
            f"<p>{esc(', '.join(lmeval))}: lm-eval runs, scored by lm-evaluation-harness (registry "
            "<code>engine: lm-eval</code>, or its logged samples imported from <code>lmeval:&lt;directory&gt;</code>; "
            "docs/lmeval.md). Their log-likelihoods are "
            "float32 sums, not byte-identical across machines, batch sizes or backends; they cover the pairs "
            "lm-eval can score exactly (coverage below).</p>"
        )
    provs = model_provenance(data)
    for m, rows_m in shared(provs):
        out.append(
            f'<h4>{esc(m)}</h4><table class="kv"><tbody>'
            + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows_m)
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
            f"for: {esc(', '.join(scored))}.</p>"
        )
    out.append("<h3>Parameters</h3><details><summary>params.yaml, as validated (defaults filled in)</summary>")
    listing = json.dumps(prov.get("params", {}), indent=1, sort_keys=True)
    out.append(f"<pre>{html.escape(shown_text(listing, one_line=False), quote=True)}</pre></details>")
    out.append('<h3>Packages</h3><table class="kv"><tbody>')
    out += [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in prov.get("packages", {}).items()]
    out.append("</tbody></table></section>")
    return "\n".join(out)


def answers_html(a: Answers) -> str:
    """The first screen (:mod:`gece.report.answers`): per benchmark whose labels vary, the model differences after
    Holm and the pairs asked about that do not differ, the gender gaps that are findings and the largest change by
    post-hoc calibration; each heading links to the detail page behind it."""
    out = ['<div id="answers" class="answers">']

    def block(title: str, page: str, note: str, rows: list[tuple[str, str]]) -> None:
        if not rows:
            return
        link = f'<a class="md" href="{href(report_layout.page_file(page))}">table</a>'
        out.append(f'<h3>{esc(title)} <span class="note">{esc(note)}</span> {link}</h3><dl>')
        out.extend(f"<dt>{esc(b)}</dt><dd>{html_text}</dd>" for b, html_text in rows)
        out.append("</dl>")

    block(
        "Which models differ in ECE?",
        "compare",
        "paired bootstrap, significant after Holm over the four metrics of the pair: the pairs of the lowest ECE "
        "and of the models scored here, the higher model by how much [the interval at the level Holm's "
        "correction tests it at (98.8%), so that it excludes 0 exactly when the pair differs]; ≈: no difference; a "
        "run scored twice (the same p on every pair) counts once",
        [
            (
                c.benchmark,
                esc(differ_line(c))
                + (
                    f'<br><span class="same">no difference: {esc(same_line(c))}</span>'
                    if c.same or c.other_same
                    else ""
                ),
            )
            for c in a.comparisons
        ],
    )
    gaps: dict[str, list[str]] = {}
    for g in a.gaps:
        gaps.setdefault(g.benchmark, []).append(f"by {g.by}: {gap_line(g, a.scored)}")
    block(
        "Gender gaps, ECE female − ECE male",
        "gender_gap",
        f"significant after Holm over the benchmark's runs, interval at most {GAP_MAX_WIDTH} wide; the runs scored "
        "here [95% interval], the authors' released runs as a range",
        [(b, esc(". ".join(parts))) for b, parts in gaps.items()],
    )
    block(
        "Largest change by post-hoc calibration",
        "calibration",
        f"held-out ECE [95% interval] before → after {a.headline}, the method params.yaml fixes in advance "
        "(calibrate.headline), not the best of the methods on these pairs; the run with the largest drop (split "
        "protocol: fitted on one half of the pairs, evaluated on the other)",
        [(x.benchmark, esc(x.text())) for x in a.calibration],
    )
    for title, page, note, rows in a.protocols:
        block(title, page, note, [(r, esc(t)) for r, t in rows])
    out.append("</div>")
    return "\n".join(out)


def findings_html(f: Findings, a: Answers | None = None) -> str:
    """The section that opens the page: the answers (when given), a table of the best and worst models, then the
    effects."""
    out = ['<section id="findings"><h2>Findings</h2>']
    if a is not None:
        out.append(answers_html(a))
    out.append(f'<p class="caption">{esc(FINDINGS_CAPTION)}</p>')
    if not f.benchmarks and not f.identity:
        out.append('<p class="missing">Not available: no metrics reports found.</p></section>')
        return "\n".join(out)
    head = ["benchmark", "pairs", "models"] + [f"{end} {LABELS[k]}" for k in RANKED for end in ("best", "worst")]
    out.append(
        '<div class="scroll"><table class="findings"><thead><tr>'
        + "".join(f'<th scope="col">{esc(h)}</th>' for h in head)
        + "</tr></thead><tbody>"
    )
    for b in f.benchmarks:
        cells = [
            f'<th scope="row">{esc(b.benchmark)}</th>',
            f'<td class="num">{esc("/".join(map(str, b.n)))}</td>',
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
            + "".join(f"<li><strong>{esc(topic)}</strong>: {esc(text)}</li>" for topic, text in f.effects)
            + "</ul>"
        )
    out.append("</section>")
    return "\n".join(out)


def _end_cell(end, cls: str) -> str:
    """A findings cell: the run at one end of a ranking with its value and interval, or – when there is none."""
    if end is None:
        return '<td class="text">–</td>'
    return (
        f'<td class="{cls}">{esc(end.model)} <strong>{end.value:.3f}</strong>'
        f'<span class="ci">{esc(end.interval())}</span></td>'
    )


def identity_findings_html(identity: list[IdentityFinding]) -> str:
    """The identity benchmarks' findings: the lowest and highest stereotype share and 1 − mean p per benchmark,
    and whether the share stays on the same side of 0.5 under each rule (no best or worst: neither is calibration)."""
    head = ["identity benchmark", "pairs", "distinct", "clusters", "models"]
    head += [f"{end} {label}" for label in IDENTITY_RANKED.values() for end in ("lowest", "highest")]
    head.append("under each rule")
    out = [
        '<div class="scroll"><table class="findings identity"><thead><tr>'
        + "".join(f'<th scope="col">{esc(h)}</th>' for h in head)
        + "</tr></thead><tbody>"
    ]
    for b in identity:
        cells = [f'<th scope="row">{esc(b.benchmark)}</th>']
        cells += [
            f'<td class="num">{esc("/".join(map(str, v)) or "–")}</td>' for v in (b.n, b.n_distinct, b.n_clusters)
        ]
        cells.append(f'<td class="num">{b.models}</td>')
        for key in IDENTITY_RANKED:
            for end, name in ((b.lowest.get(key), "lowest"), (b.highest.get(key), "highest")):
                cells.append(_end_cell(None if name == "highest" and b.models < 2 else end, "text"))
        cells.append(f'<td class="text wrap">{esc(b.rules or "one rule only")}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append('<ul class="effects">' + "".join(f"<li>{esc(identity_sentence(b))}</li>" for b in identity) + "</ul>")
    return "\n".join(out)
