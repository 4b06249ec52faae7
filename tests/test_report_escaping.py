"""Data text on the page and in the markdown tables: escaped, inert, and otherwise unchanged.

A small benchmark whose sentences, target words, pair ids, model names and extract metadata
carry HTML, markdown and non-ASCII text goes through the report stage; the page and the
markdown tables must show that text exactly (as one line) and create nothing from it.
"""

from __future__ import annotations

import json
import os
import random
import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest
import yaml

from gece.io.files.json_writer import write_json
from gece.io.files.writer import write_table
from gece.io.paths import report_layout
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.params import load_params
from gece.pipeline import metrics as metrics_stage
from gece.pipeline import report as report_stage
from gece.pipeline import report_data as report_loader
from gece.report import cells as report_cells
from gece.report import examples as report_examples
from gece.report import markdown as report_md
from gece.report import markup as report_markup
from gece.report.cells import shown_text

from .report_data import md_row_cells, md_unescape, report_pages, report_text, tiny_meta

BENCH = "evil_bench"  # ids are [a-z0-9][a-z0-9._-]*: the text to escape is in the data
MODELS = ("m1", "m2.evil")
NON_ASCII = "é ü ß 中文 日本語 😀👩🏽‍⚕️ שלום עולם مرحبا e\u0301 n\u0303 Å"
# (pair_id, text before the target, text after it, targets_more); every pair is confidently wrong
EVIL = [
    ("evil-01", "<script>alert(1)</script> The nurse said", "was <img src=x onerror=alert(1)> late.", ["he"]),
    (
        "evil-02",
        "| pipes | and a \\ backslash \\| and `code` and &amp; &lt;b&gt; the cook said",
        "| was here |",
        ["he"],
    ),
    ("evil-03", "  line one\nline two\r\nline three\rfour\u2028five\tsix and", "tab\x00null  ", ["he"]),
    ("evil-04", f"{NON_ASCII}: the doctor said", "\u202eright-to-left override\u202c is done", ["he"]),
    (
        "evil-05",
        "# *bold* _it_ __x__ [link](javascript:alert(1)) ![i](x) ~~s~~ $x$ [^1] <!-- c --> the CEO said",
        "| \\",
        ["he"],
    ),
    (
        "p|<i>6</i>",
        "+ = - > quote & <b>bold</b> <a href='javascript:alert(1)'>x</a> the judge said",
        "won.",
        ["<i>he</i>"],
    ),
]
ALLOWED_PAGE_TAGS = {
    "html",
    "head",
    "meta",
    "link",
    "title",
    "style",
    "body",
    "header",
    "h1",
    "h2",
    "h3",
    "h4",
    "p",
    "nav",
    "a",
    "span",
    "main",
    "section",
    "figure",
    "img",
    "figcaption",
    "details",
    "summary",
    "div",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "strong",
    "em",
    "code",
    "ul",
    "li",
    "dl",
    "dt",
    "dd",
    "br",
    "pre",
    # the first screen's inline SVG (gece.report.answer_plots, matplotlib's elements): data reaches it only as
    # escaped text and ids
    "svg",
    "defs",
    "g",
    "path",
    "use",
    "clippath",
    "rect",
    "text",
}


def sentences(before: str, after: str, targets: list[str]) -> tuple[str, str]:
    return f"{before} {targets[0]} {after}", f"{before} she {after}"


def evil_scores(model_index: int) -> pd.DataFrame:
    rows = []
    for i, (pid, before, after, targets) in enumerate(EVIL):
        y = i % 2
        conf = 0.99 - 0.01 * i - 0.002 * model_index  # wrong, ranked in the order of EVIL
        p = 1 - conf if y == 1 else conf
        more, less = sentences(before, after, targets)
        rows.append((pid, more, less, y, targets, p))
    rows += [
        ("ok-01", "The man ate.", "The woman ate.", 1, ["man"], 0.9),  # right: not an example
        ("tie-01", "He ran.", "She ran.", 1, ["He"], 0.5),
    ]  # a tie predicts nothing
    df = pd.DataFrame(rows, columns=["pair_id", "sent_more", "sent_less", "y", "targets_more", "p"])
    z = np.log(df["p"] / (1 - df["p"]))
    df["row"] = np.arange(1, len(df) + 1)
    df["bias_type"] = "gender"
    df["targets_less"] = [["she"]] * len(df)
    df["gender_more"], df["gender_less"] = "male", "female"
    df["n_tokens_more"] = df["n_tokens_less"] = 1
    df["logprob_more"], df["logprob_less"] = -np.logaddexp(0, -z), -np.logaddexp(0, z)
    df["logit_more"], df["logit_less"] = z, 0.0
    df["scored_punct_only"] = None
    return df[list(ScoreRow.model_fields)]


@pytest.fixture(scope="module")
def evil_report(tmp_path_factory):
    """The report stage on the evil benchmark (every pair shown): (reports dir, what the stage returned)."""
    with pytest.MonkeyPatch.context() as mp:  # only while this report is built
        mp.setattr(report_examples, "EXAMPLES_PER_RUN", len(EVIL))
        return _build_evil(tmp_path_factory)


def _build_evil(tmp_path_factory):
    root = tmp_path_factory.mktemp("evil")
    (root / "params.yaml").write_text(
        yaml.safe_dump(
            {
                "benchmarks": {BENCH: {}},
                "models": list(MODELS),
                "registry": {m: {"source": "package:tiny-lm"} for m in MODELS},
                "references": [],
                "ablate": {"special_tokens": {}},
            }
        ),
        encoding="utf-8",
    )
    params = load_params(root / "params.yaml")
    scores, reports = root / "artifacts" / "scores" / BENCH, root / "reports"
    for i, m in enumerate(MODELS):
        write_table(scores / f"{m}.parquet", evil_scores(i), ScoreRow, {"benchmark": BENCH, "model": m})
        meta = tiny_meta(BENCH, m, 6, "2|3 `x` *y*").model_copy(
            update={"source": "package:<script>alert(1)</script>", "weights": {"<b>torch</b>": "2|3 `x` *y*"}}
        )
        write_json(scores / f"{m}.meta.json", meta)
        metrics_stage.metrics_stage(
            scores / f"{m}.parquet",
            reports / "metrics" / BENCH / f"{m}.json",
            reports / "bins" / BENCH / f"{m}.json",
            params.metrics,
        )
    result = report_stage.report_stage(params, reports, scores.parent, data_dvc=root / "no-data.dvc")
    return reports, result


def expected_rows() -> list[list[str]]:
    """The examples table as text: per model, the evil pairs in order."""
    rows = []
    for i, m in enumerate(MODELS):
        for r in evil_scores(i).head(len(EVIL)).itertuples():
            rows.append(
                [
                    m,
                    r.pair_id,
                    plain_text(r.sent_more),
                    plain_text(r.sent_less),
                    plain_text(f"{', '.join(r.targets_more)} / she"),
                    str(r.y),
                    f"{r.p:.4f}",
                ]
            )
    return rows


class Page(HTMLParser):
    """Every start tag with its attributes, and the rows of each table (cell texts)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.tables: list[list[list[str]]] = []
        self.details: list[str | None] = []  # the id of each table's enclosing <details>
        self._open_details: list[str | None] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "details":
            self._open_details.append(dict(attrs).get("id"))
        elif tag == "table":
            self.tables.append([])
            self.details.append(self._open_details[-1] if self._open_details else None)
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "details":
            self._open_details.pop()
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def assert_inert(page: Page, allowed: set[str]) -> None:
    tags = {t for t, _ in page.tags}
    assert "script" not in tags and tags <= allowed, tags - allowed
    for tag, attrs in page.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert not (tag == "img" and attrs.get("src") == "x"), attrs
        assert not str(attrs.get("href", "")).lower().startswith("javascript:"), attrs
        assert str(attrs.get("xlink:href", "#")).startswith("#"), attrs  # an SVG reference stays in the page


def plain_text(text: object) -> str:
    """What a cell of either output reads: the shared policy, ends trimmed (as a table cell trims them)."""
    return shown_text(text).strip(" ")


# ------------------------------------------------------------------------ the page
def test_page_creates_nothing_from_the_data(evil_report):
    reports, _ = evil_report
    for path in report_pages(reports):  # index.html and its detail pages
        text = path.read_text(encoding="utf-8")
        assert_inert(parse(text), ALLOWED_PAGE_TAGS)
        assert "<script" not in text and "<img src=x" not in text
        assert '<meta charset="utf-8">' in text


def test_page_shows_the_sentences_exactly(evil_report):
    reports, _ = evil_report
    page = parse((reports / report_layout.page_file("examples")).read_text(encoding="utf-8"))
    tables = [t for t, d in zip(page.tables, page.details, strict=True) if d == f"examples_{BENCH}"]
    assert len(tables) == 1
    head, *rows = tables[0]
    assert head == ["model", "pair", "sent_more", "sent_less", "targets", "y", "p"]
    assert rows == expected_rows()
    assert "line one line two line three four five six and he tab<U+0000>null" in rows[2][2]


def test_page_shows_names_and_metadata_as_text(evil_report):
    reports, result = evil_report
    cells, links = set(), set()
    for path in report_pages(reports):
        page = parse(path.read_text(encoding="utf-8"))
        cells |= {c for t in page.tables for r in t for c in r}
        for src in [a["src"] for t, a in page.tags if t == "img"]:
            assert (path.parent / unquote(src)).is_file(), src  # names percent-encoded in links, not broken
        hrefs = [unquote(a["href"]) for t, a in page.tags if t == "a" and not a["href"].startswith("#")]
        links |= {os.path.relpath((path.parent / h).resolve(), reports.resolve()) for h in hrefs}
    assert {"package:<script>alert(1)</script>", "weights.<b>torch</b>", "2|3 `x` *y*", MODELS[1]} <= cells
    assert set(result["tables"]) <= links
    assert f"tables/examples_{BENCH}.md" in result["tables"]


def test_non_ascii_is_unchanged(evil_report):
    reports, _ = evil_report
    text = report_text(reports)
    md = (reports / "tables" / f"examples_{BENCH}.md").read_text(encoding="utf-8")
    for piece in NON_ASCII.split():
        assert piece in text and piece in md, piece
    # the override is shown, alike on the page and in markdown, never written raw (it would reorder the line)
    assert "\u202e" not in text and "\u202e" not in md
    assert "&lt;U+202E&gt;right-to-left override&lt;U+202C&gt;" in text
    assert "\\<U+202E>right-to-left override\\<U+202C>" in md


# ------------------------------------------------------------------------ markdown
RAW_HTML = re.compile(r"(?<!\\)<[A-Za-z/!?]|(?<!\\)&[A-Za-z#]")  # a tag, comment, autolink or entity unescaped


def md_table_lines(text: str) -> list[list[str]]:
    return [md_row_cells(line) for line in text.splitlines() if line.startswith("|")]


def md_table_blocks(text: str) -> list[list[str]]:
    """The lines of each markdown table (consecutive lines that start with a pipe)."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                blocks.append(current)
            current.append(line)
        else:
            current = None
    return blocks


def test_markdown_rows_keep_their_columns(evil_report, built_report):
    """Every row of every markdown table has as many unescaped pipes as its header."""
    checked = 0
    for reports in (evil_report[0], built_report[0]):
        for path in sorted((reports / "tables").glob("*.md")):
            for block in md_table_blocks(path.read_text(encoding="utf-8")):
                widths = [len(md_row_cells(line)) for line in block]
                assert len(set(widths)) == 1 and widths[0] > 1, (path, block)
                checked += len(block)
                if path.name.startswith("examples_"):
                    assert widths[0] == 7
                    assert not any(RAW_HTML.search(line) for line in block), path  # no raw HTML reaches the renderer
    assert checked > 300


def test_markdown_cells_round_trip(evil_report):
    reports, _ = evil_report
    rows = md_table_lines((reports / "tables" / f"examples_{BENCH}.md").read_text(encoding="utf-8"))
    assert [md_unescape(c) for c in rows[0]] == ["model", "pair", "sent_more", "sent_less", "targets", "y", "p"]
    assert [[md_unescape(c) for c in r] for r in rows[2:]] == expected_rows()


def test_markdown_renders_inertly(evil_report):
    """Rendered like GitHub does (raw HTML allowed, tables, strike-through), the examples
    table creates no element from the data and its cells read as the sentences."""
    markdown_it = pytest.importorskip("markdown_it")
    reports, _ = evil_report
    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    rendered = md.render((reports / "tables" / f"examples_{BENCH}.md").read_text(encoding="utf-8"))
    page = parse(rendered)
    assert_inert(page, {"h1", "h2", "p", "code", "em", "strong", "table", "thead", "tbody", "tr", "th", "td"})
    table = parse(rendered[rendered.index("<table>") : rendered.index("</table>") + 8])
    assert {t for t, _ in table.tags} == {"table", "thead", "tbody", "tr", "th", "td"}  # no emphasis, code, links
    assert table.tables[0][1:] == expected_rows()


# ------------------------------------------------------------------- the escaper
NASTY = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "| pipes |",
    "a \\ b",
    "\\|",
    "\\",
    "`code`",
    "&amp;",
    "&#60;",
    "a\nb\r\nc\rd",
    "  padded  ",
    "*x*",
    "_x_",
    "snake_case_name",
    "__x__",
    "[a](b)",
    "![a](b)",
    "[a][b]",
    "[^1]",
    "~~x~~",
    "$x$",
    "# h",
    "+ item",
    "= x",
    "- x",
    "> quote",
    "1. x",
    "<!-- c -->",
    "<https://example.com>",
    "x]",
    "[x",
    "\\*",
    "&",
    "<",
    ">",
    "a|b\\|c\\\\|d",
    NON_ASCII,
    "\u202eabc\u2066",
    "0.158 [0.133, 0.188]",
    "",
]


@pytest.mark.parametrize("text", NASTY)
def test_md_escape_rules(text):
    escaped = report_md._md_escape(text)
    assert "\n" not in escaped and "\r" not in escaped and not RAW_HTML.search(escaped)
    assert md_row_cells(f"| {escaped} |") == [escaped]  # one cell: every pipe escaped
    assert md_unescape(escaped) == plain_text(text)
    assert report_md._md_escape("0.158 [0.133, 0.188]") == "0.158 [0.133, 0.188]"  # intervals stay readable
    assert report_md._md_escape("genderlex_person") == "genderlex_person"


def test_md_escape_renders_as_the_text():
    """Random strings over the markdown-active characters: as a table cell, markdown-it renders
    exactly ``plain_text`` of the string, with no element inside the cell."""
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    pool = [*list("\\`*_[]()~|$#+=-<>&;!:/^\"' \n\tabcé中😀"), "&amp;", "&#x41;", "<b>", "](", "http://x.y"]
    rng = random.Random(0)
    for _ in range(400):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(1, 12)))
        rendered = md.render(f"| h |\n|---|\n| {report_md._md_escape(text)} |\n")
        page = parse(rendered)
        assert {t for t, _ in page.tags} <= {"table", "thead", "tbody", "tr", "th", "td"}, (text, rendered)
        cells = page.tables[0][1] if len(page.tables[0]) > 1 else [""]
        assert cells == [plain_text(text)], (text, rendered)


# ------------------------------------------------------- one policy, page and markdown
def _both(texts: list[str]) -> tuple[list[str], list[str], str]:
    """``texts`` as the cells of one table, through the page's writer and the markdown writer: the cell texts a
    browser shows, those a markdown renderer shows (GitHub's flavour: raw HTML on), and the markdown source."""
    markdown_it = pytest.importorskip("markdown_it")
    table = report_cells.Table(
        "t",
        ["label"],
        [report_cells.Column("s", "text", None, text=True)],
        [report_cells.Row([f"r{i}"], [report_cells.Cell(t)]) for i, t in enumerate(texts)],
    )
    page = parse(report_markup.table_html(table))
    assert_inert(page, {"div", "table", "thead", "tbody", "tr", "th", "td"})
    source = report_md.table_markdown(table)
    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    rendered = parse(md.render(source + "\n"))
    assert {t for t, _ in rendered.tags} <= {"table", "thead", "tbody", "tr", "th", "td"}
    return [r[1] for r in page.tables[0][1:]], [r[1] for r in rendered.tables[0][1:]], source


INVISIBLE_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
BREAKS = set("\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029")


def test_invisible_characters_are_shown_alike_on_the_page_and_in_markdown():
    """Every code point of the categories concerned (controls, format characters such as U+202E, U+200B and
    U+2066-U+2069, surrogates, line and paragraph separators), inside a word, through both writers: a line break
    is a space, U+200C/U+200D are kept, every other one reads ``<U+XXXX>``; neither output holds it raw."""
    points = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in INVISIBLE_CATEGORIES]
    assert len(points) > 2000 and {"\u202e", "\u200b", "\u2066", "\u2069", "\x1b", "\u2028"} <= set(points)
    expected = [
        "a b" if ch in BREAKS else f"a{ch}b" if ch in "\u200c\u200d" else f"a<U+{ord(ch):04X}>b" for ch in points
    ]
    assert [plain_text(f"a{ch}b") for ch in points] == expected
    on_page, in_markdown, source = _both([f"a{ch}b" for ch in points])
    assert on_page == expected and in_markdown == expected
    raw = {ch for ch in source if unicodedata.category(ch) in INVISIBLE_CATEGORIES} - {"\n", "\u200c", "\u200d"}
    assert not raw, sorted(map(ord, raw))


MARKUP = [
    "<script>alert(1)</script>",
    "a | b || c",
    "&lt;b&gt; &amp; &#x41; &#65;",
    "`code` ``x`` ```",
    "p < 0.001 & q > 2",
    "<b>bold</b> <!-- c --> <?x?> <https://example.com>",
    "*x* _y_ **z** ~~s~~ $m$ [l](javascript:alert(1)) ![i](x)",
    "\\| \\` \\\\",
    "\u202eevil\u202c <U+202E> literal",
]


def test_markup_payloads_read_alike_on_the_page_and_in_markdown():
    """Markup in the data is text in both outputs, the same text; and the markdown source holds no HTML entity
    (``&lt;`` would be shown raw by whoever reads the file): markdown is escaped the markdown way."""
    on_page, in_markdown, source = _both(MARKUP)
    assert on_page == in_markdown == [plain_text(t) for t in MARKUP]
    assert "&lt;b&gt; &amp;" in on_page[2]  # the data's own entities are text, not decoded
    assert "&lt;" not in source.replace("\\&lt;", "") and "p < 0.001 & q > 2" in source


def test_html_table_cells_are_escaped():
    table = report_cells.Table(
        "<h>",
        ["<m>"],
        [report_cells.Column("s", "<s>", None, text=True)],
        [
            report_cells.Row(
                ["<script>x</script>"],
                [report_cells.Cell('"><img src=x onerror=alert(1)>')],
                source='x" onclick="alert(1)',
            )
        ],
    )
    page = parse(report_markup.table_html(table))
    assert_inert(page, {"div", "table", "thead", "tbody", "tr", "th", "td"})
    assert page.tables[0] == [["<m>", "<s>"], ["<script>x</script>", '"><img src=x onerror=alert(1)>']]
    assert [a.get("data-source") for t, a in page.tags if t == "tr"] == [None, 'x" onclick="alert(1)']


# ------------------------------------------------------------------- the examples
def test_confident_mistakes_order_and_ties():
    rows = [
        {
            "pair_id": pid,
            "sent_more": "a",
            "sent_less": "b",
            "targets_more": ["he"],
            "targets_less": ["she"],
            "y": y,
            "p": p,
        }
        for pid, y, p in (
            ("b", 1, 0.1),
            ("a", 0, 0.9),
            ("c", 1, 0.05),
            ("d", 1, 0.5),
            ("e", 0, 0.5),
            ("f", 1, 0.95),
            ("g", 0, 0.2),
        )
    ]
    got = report_examples.confident_mistakes(rows, k=10)
    assert [r["pair_id"] for r in got] == ["c", "a", "b"]  # by confidence, ties (a, b: 0.9) by pair id
    assert got[0]["confidence"] == pytest.approx(0.95)
    assert [r["pair_id"] for r in report_examples.confident_mistakes(rows, k=1)] == ["c"]
    assert report_examples.confident_mistakes([]) == []


def test_examples_in_the_full_build(built_report):
    """Every benchmark of the full build has its examples table, on the page and in markdown,
    and both say the same."""
    reports, result = built_report
    params = load_params(reports.parent / "params.yaml")
    data = report_loader.load_report_data(params, reports, reports.parent / "artifacts" / "scores", reports)
    page = parse((reports / report_layout.page_file("examples")).read_text(encoding="utf-8"))
    for b in data.benchmarks:
        assert f"tables/examples_{b}.md" in result["tables"]
        html_rows = next(t for t, d in zip(page.tables, page.details, strict=True) if d == f"examples_{b}")[1:]
        md_rows = md_table_lines((reports / "tables" / f"examples_{b}.md").read_text(encoding="utf-8"))[2:]
        assert [[md_unescape(c) for c in r] for r in md_rows] == html_rows
        assert 0 < len(html_rows) <= report_examples.EXAMPLES_PER_RUN * len(data.runs[b])
        for row in html_rows:
            y, p = int(row[5]), float(row[6])
            assert (p > 0.5) != (y == 1)  # wrong, every one
    assert json.dumps(result["tables"])  # plain strings
    assert Path(reports / "tables" / "examples_winobias.md").is_file()
