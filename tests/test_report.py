"""The report: figures, tables and the HTML page are true to the JSON they come from."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml

from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.paths import report_layout
from gece.io.schemas.metric_reports import BinsReport
from gece.io.settings.params import load_params
from gece.io.settings.sections import MetricsParams
from gece.pipeline import metrics as metrics_stage
from gece.pipeline import report as report_stage
from gece.pipeline import report_data as report_loader
from gece.pipeline import runs
from gece.report import cells as report_cells
from gece.report import html as report_html
from gece.report import markdown as report_md
from gece.report import markup as report_markup
from gece.report import plots
from gece.report import stat_tables as report_stats
from gece.report import tables as report_tables
from gece.report.cells import Cell, Column, Row, Table, format_cell, mark_worst, resolve
from gece.stats import metrics

from . import report_data
from .conftest import PAPER_BENCHMARKS, PAPER_MODELS, ROOT
from .test_golden import parse_summary


class PageParser(HTMLParser):
    """Images, links and table cells (text per row) of a page."""

    def __init__(self):
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"])
        elif tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse_page(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def docs_of(reports: Path) -> list[report_cells.TableDoc]:
    params = load_params(reports.parent / "params.yaml")
    data = report_loader.load_report_data(
        params, reports, reports.parent / "artifacts" / "scores", reports, reports.parent
    )
    return report_tables.build_tables(data)


# ------------------------------------------------------------------ files and links
def test_the_readme_figure_is_the_first_benchmarks_grid(built_report, full_reports):
    """report_layout.README_FIGURE (kept in git while figures/ is DVC-cached): the first benchmark's grid's bytes."""
    reports, result = built_report
    first = next(iter(load_params(full_reports / "params.yaml").benchmarks))
    assert result["readme_figure"] == report_layout.README_FIGURE
    assert (reports / report_layout.README_FIGURE).read_bytes() == (
        reports / report_layout.fig_grid(first)
    ).read_bytes()


def test_every_figure_and_table_referenced_in_the_page_exists(built_report):
    """Every image and link of index.html and its detail pages resolves (from the page's own directory), every
    figure, table and detail page the stage wrote is shown or linked, and every detail page is one click from
    index.html."""
    reports, result = built_report
    images, links, anchors = set(), set(), {}
    for path in report_data.report_pages(reports):
        page = parse_page(path)
        for src in page.images + [h for h in page.links if not h.startswith("#")]:
            assert not re.match(r"^[a-z]+://", src), f"{src}: the page must not use the network"
            target = (path.parent / src.split("#")[0]).resolve()
            assert target.is_file(), f"{src} is referenced by {path.name} but does not exist"
        rel = [os.path.relpath((path.parent / h).resolve(), reports.resolve()) for h in page.images]
        images |= set(rel)
        links |= {os.path.relpath((path.parent / h.split("#")[0]).resolve(), reports.resolve()) for h in page.links}
        anchors[path.name] = set(re.findall(r'id="([^"]+)"', path.read_text()))
        own = {h[1:] for h in page.links if h.startswith("#")}
        assert own <= anchors[path.name]
    assert len(images) >= len(result["figures"]) > 0
    assert set(result["figures"]) <= images
    assert {f"tables/{p.name}" for p in (reports / "tables").glob("*.md")} <= links
    index = parse_page(reports / "index.html")
    assert set(result["pages"]) == {h for h in index.links if h.startswith("pages/")}  # one click from the top
    assert {p.relative_to(reports).as_posix() for p in (reports / "pages").glob("*.html")} == set(result["pages"])
    for path in report_data.report_pages(reports)[1:]:  # a detail page's links into index.html name its sections
        ids = {h.split("#")[1] for h in parse_page(path).links if h.startswith("../index.html#")}
        assert ids and ids <= anchors["index.html"]


def test_full_build_has_every_part_and_misses_nothing(built_report):
    reports, result = built_report
    assert result["missing"] == []
    text = (reports / "index.html").read_text()
    assert "Missing parts" not in text
    for b in report_data.BENCHMARKS:
        assert (reports / report_layout.fig_grid(b)).is_file() and (
            reports / report_layout.fig_calibration(b)
        ).is_file()
        for m in (report_data.MODEL, report_data.NOBOS):
            assert (reports / report_layout.fig_reliability(b, m)).is_file()
            assert (reports / report_layout.fig_reliability(b, m, "equal_mass")).is_file()
    docs = {d.name: d for d in docs_of(reports)}
    for name in (
        "overall",
        "paper",
        "human_gender",
        "grouped",
        "neutral",
        "sample_size",
        "binning",
        "calibration",
        "special_tokens",
        "compare",
    ):
        assert docs[name].tables, f"table {name} is empty"
        assert (reports / "tables" / f"{name}.md").is_file()


def test_page_is_self_contained_and_names_its_provenance(built_report):
    reports, _ = built_report
    text = (reports / "index.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", text), "no network resources"
    assert "<script" not in text
    assert yaml.safe_load((ROOT / "data.dvc").read_text())["outs"][0]["md5"] in text  # the data snapshot
    assert re.search(
        r"sha256 of stage-code/ \(each command&#x27;s code by what it does: comments and docstrings do not "
        r"count\), page\.css and page\.html: [0-9a-f]{64}",
        text,
    )
    assert "0" * 63 + "1" in text and "package:tiny-lm" in text  # extract metadata of the scored model
    assert "<th>seconds</th>" not in text and ">1.5<" not in text  # run timings stay in the meta files
    for name in ("numpy", "matplotlib", "dvc", "pandas"):
        assert f"<th>{name}</th>" in text
    for definition in (
        "ECE (paper convention)",
        "ECE top-label",
        "MCE",
        "ICE",
        "MacroCE",
        "Brier and the paper's Brier",
        "Gender-ECE and bias gap",
        "cc-ECE",
        "Human alignment (accuracy)",
    ):
        assert f"<dt>{html.escape(definition)}</dt>" in text
    # the synthetic model without BOS is far sharper: the page says it plainly
    assert "looks grossly overconfident" in text


def test_rebuild_is_byte_identical(built_report, tmp_path):
    reports, _ = built_report

    def digest(root: Path) -> dict[str, str]:
        return {
            p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and (p.name == "index.html" or p.relative_to(root).parts[0] in ("figures", "tables"))
        }

    before = digest(reports)
    params = load_params(reports.parent / "params.yaml")
    report_stage.report_stage(
        params, reports, reports.parent / "artifacts" / "scores", data_dvc=ROOT / "data.dvc", root=reports.parent
    )
    assert digest(reports) == before


# ------------------------------------------------------------- values equal the JSON
def _cells(doc: report_cells.TableDoc):
    for table in doc.tables:
        for row in table.rows:
            for cell, col in zip(row.cells, table.columns, strict=True):
                yield table, row, cell, col


def test_table_values_equal_the_json_they_came_from(built_report):
    reports, _ = built_report
    checked = 0
    for doc in docs_of(reports):
        for _, row, cell, _ in _cells(doc):
            if not cell.ref:
                continue
            source = json.loads((reports / row.source).read_text())
            for attr, pointer in cell.ref.items():
                assert getattr(cell, attr) == resolve(source, pointer), (doc.name, row.source, pointer)
                checked += 1
    assert checked > 2000


def _md_tables(text: str) -> list[list[list[str]]]:
    """Markdown tables as rows of cell texts (header and separator dropped)."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [report_data.md_unescape(c) for c in report_data.md_row_cells(line)]
            if current is None:
                current = []
                tables.append(current)
                continue  # header
            if set("".join(cells)) <= set("-:"):
                continue
            current.append(cells)
        else:
            current = None
    return tables


NUMBER = re.compile(r"-?\d+\.\d+|-?\d+|–")


def test_markdown_shows_the_json_values(built_report):
    """Parse reports/tables/*.md back: every number is the JSON value at the column's precision."""
    reports, _ = built_report
    for doc in docs_of(reports):
        md_tables = _md_tables((reports / "tables" / f"{doc.name}.md").read_text())
        in_markdown = [t for t in doc.tables if t.markdown]  # a matrix too wide for markdown is on its page only
        assert len(md_tables) == len(in_markdown), doc.name
        for table, md in zip(in_markdown, md_tables, strict=True):
            assert len(md) == len(table.rows)
            for row, md_row in zip(table.rows, md, strict=True):
                source = json.loads((reports / row.source).read_text()) if row.source else None
                assert md_row[: len(row.label)] == row.label
                for cell, col, text in zip(row.cells, table.columns, md_row[len(row.label) :], strict=True):
                    if not cell.ref or isinstance(cell.value, str):
                        continue
                    shown = NUMBER.findall(text.replace("**", "").replace("▲", "").replace("▼", ""))
                    expected = [
                        report_cells.format_number(resolve(source, cell.ref[k]), col.digits)
                        for k in ("value", "low", "high", "spread")
                        if k in cell.ref
                    ]
                    if expected[0] == "–":
                        expected = ["–"]
                    assert shown[: len(expected)] == expected, (doc.name, row.label, col.label, text)


def test_html_tables_are_the_markdown_tables(built_report):
    reports, _ = built_report
    pages = [parse_page(p) for p in report_data.report_pages(reports)]
    html_rows = [[re.sub(r"\s+", " ", c) for c in r] for page in pages for t in page.tables for r in t[1:]]
    md_rows = []
    for doc in docs_of(reports):
        for md in _md_tables((reports / "tables" / f"{doc.name}.md").read_text()):
            md_rows += [[c.replace("**", "") for c in r] for r in md]
    for row in md_rows:
        assert row in html_rows, row


def test_overall_row_is_the_metrics_json(built_report):
    reports, _ = built_report
    doc = next(d for d in docs_of(reports) if d.name == "overall")
    table = next(t for t in doc.tables if t.heading.startswith("winobias"))
    row = next(r for r in table.rows if r.label == ["paper-gpt-j-6b"])
    m = json.loads((reports / "metrics/winobias/paper-gpt-j-6b.json").read_text())
    ece = row.cells[[c.key for c in table.columns].index("ece")]
    assert (ece.value, ece.low, ece.high) == (m["ece"], m["ece_ci_low"], m["ece_ci_high"])
    assert format_cell(ece, Column("ece", "ECE")) == (f"{m['ece']:.3f} [{m['ece_ci_low']:.3f}, {m['ece_ci_high']:.3f}]")
    assert "0.158 [" in format_cell(ece, Column("ece", "ECE"))  # the paper's 0.1576


# ---------------------------------------------------------------------- worst values
def test_mark_worst_marks_the_extreme_of_each_ranked_column():
    cols = [Column("ece", "ECE", "high"), Column("accuracy", "acc", "low"), Column("n", "n", None)]
    rows = [
        Row([name], [Cell(e), Cell(a), Cell(n)])
        for name, e, a, n in (("a", 0.1, 0.7, 10), ("b", 0.3, 0.6, 20), ("c", 0.3, None, 30), ("d", None, 0.9, 40))
    ]
    table = mark_worst(Table("t", ["model"], cols, rows))
    assert [r.cells[0].worst for r in table.rows] == ["", "high", "high", ""]  # ties: both
    assert [r.cells[1].worst for r in table.rows] == ["", "low", "", ""]
    assert all(r.cells[2].worst == "" for r in table.rows)  # not ranked
    single = mark_worst(Table("t", ["m"], [Column("ece", "ECE")], [Row(["a"], [Cell(0.5)]), Row(["b"], [Cell()])]))
    assert single.rows[0].cells[0].worst == ""  # one value is nobody's worst
    md = report_md.table_markdown(table)
    assert [r.cells[0].best for r in table.rows] == ["low", "", "", ""]  # the best is marked too
    assert [r.cells[1].best for r in table.rows] == ["", "", "", "high"]
    assert "| b | **0.300** ▲ | **0.600** ▼ | 20 |" in md and "| d | – | 0.900 ✓ | 40 |" in md
    assert "| a | 0.100 ✓ | 0.700 | 10 |" in md
    same = mark_worst(Table("t", ["m"], [Column("ece", "ECE")], [Row(["a"], [Cell(0.5)]), Row(["b"], [Cell(0.5)])]))
    assert [(c.worst, c.best) for r in same.rows for c in r.cells] == [("", ""), ("", "")]  # all equal: no marks


def test_worst_marks_in_the_generated_tables(built_report):
    reports, _ = built_report
    for doc in docs_of(reports):
        for table in doc.tables:
            for j, col in enumerate(table.columns):
                nums = [r.cells[j].value for r in table.rows if isinstance(r.cells[j].value, float | int)]
                marked = [r.cells[j].value for r in table.rows if r.cells[j].worst]
                best = [r.cells[j].value for r in table.rows if r.cells[j].best]
                if col.worst is None or len(set(nums)) < 2:  # unranked, or nothing to tell apart
                    assert not marked and not best
                else:
                    want = max(nums) if col.worst == "high" else min(nums)
                    assert marked and set(marked) == {want}, (doc.name, table.heading, col.label)
                    good = min(nums) if col.worst == "high" else max(nums)
                    assert best and set(best) == {good}, (doc.name, table.heading, col.label)


# ----------------------------------------------------------------------- the figures
@pytest.mark.parametrize("model", PAPER_MODELS)
@pytest.mark.parametrize("benchmark", PAPER_BENCHMARKS)
def test_bars_are_the_authors_buckets(benchmark, model, reference_scores, data_dir, tmp_path):
    """Drawn from the bins JSON, the blue bars are the authors' bucket accuracies (their
    'Normalized Probabilities' buckets, those of their figures) and the gap bars reach the
    diagonal at the bin centre."""
    _, buckets = parse_summary((data_dir / "reference" / benchmark / f"{model}.summary.txt").read_text())
    path = tmp_path / "bins.json"
    metrics_stage.metrics_stage(reference_scores[(benchmark, model)], None, path, MetricsParams())
    bins = read_json(path, BinsReport)
    bins = [b.model_dump() for b in bins]
    bars = plots.reliability_bars(bins)
    assert bars.count.tolist() == [int(s) for s in buckets["Sizes"]]
    assert bars.accuracy == pytest.approx(buckets["Accuracies"], abs=1e-12)  # empty buckets: 0 in both
    assert bars.center == pytest.approx(np.arange(10) / 10 + 0.05, abs=1e-12)

    fig = plots.reliability_figure(bins, f"paper-{model}", None)
    ax = fig.axes[0]
    outputs = [p for p in ax.patches if p.get_gid() == "outputs"]
    gaps = [p for p in ax.patches if p.get_gid() == "gap"]
    filled = [i for i, s in enumerate(buckets["Sizes"]) if s > 0]
    assert len(outputs) == len(gaps) == len(filled)
    for i, bar, gap in zip(filled, outputs, gaps, strict=True):
        assert bar.get_x() == pytest.approx(i / 10) and bar.get_width() == pytest.approx(0.1)
        assert bar.get_height() == pytest.approx(buckets["Accuracies"][i], abs=1e-12)
        assert gap.get_y() == pytest.approx(buckets["Accuracies"][i], abs=1e-12)
        assert gap.get_y() + gap.get_height() == pytest.approx(i / 10 + 0.05, abs=1e-12)
    counts = [p.get_height() for p in fig.axes[1].patches if p.get_gid() == "count"]
    assert counts == [float(s) for s in buckets["Sizes"]]
    plots.plt.close(fig)


def test_diagram_ece_is_the_metrics_ece(built_report):
    reports, _ = built_report
    for b in PAPER_BENCHMARKS:
        for m in ("paper-gpt-j-6b", "paper-gemma-2-9b"):
            bins = json.loads((reports / "bins" / b / f"{m}.json").read_text())
            assert plots.bins_ece(bins) == pytest.approx(
                json.loads((reports / "metrics" / b / f"{m}.json").read_text())["ece"], abs=1e-12
            )
            # the equal-mass diagram has the equal-mass ECE of the binning ablation
            scores, _ = runs.load_scores(load_params(reports.parent / "params.yaml"), b, m, root=reports.parent)
            table = metrics.reliability_table(scores["p"], scores["y"], 10, "equal_mass").records()
            grid = json.loads((reports / "ablation" / "binning" / b / f"{m}.json").read_text())
            assert plots.bins_ece(table) == pytest.approx(grid["equal_mass"]["10"]["ece"], abs=1e-12)
            assert sum(r["count"] for r in table) == len(scores)


def test_figure_bytes_are_deterministic(tmp_path):
    bins = metrics.reliability_table(np.linspace(0, 1, 50), (np.arange(50) % 3 == 0).astype(float)).records()
    from gece.io.files.readers import write_figure

    for name in ("a.png", "b.png"):
        write_figure(tmp_path / name, plots.reliability_figure(bins, "m", 0.1), dpi=100)
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


# -------------------------------------------------------------- partial builds, CLI
def test_missing_parts_are_listed_not_fatal(full_reports, tmp_path):
    """Only one paper run's metrics: the page builds and lists what it lacks."""
    reports = tmp_path / "reports"
    for sub in ("metrics", "bins"):
        src = full_reports / "reports" / sub / "winobias" / "paper-gpt-j-6b.json"
        (reports / sub / "winobias").mkdir(parents=True)
        (reports / sub / "winobias" / src.name).write_bytes(src.read_bytes())
    params = load_params(full_reports / "params.yaml")
    result = report_stage.report_stage(
        params, reports, tmp_path / "no-scores", data_dvc=tmp_path / "no-data.dvc", root=tmp_path
    )  # no released scores either
    text = report_data.report_text(reports)
    assert "Missing parts" in text and result["missing"]
    joined = " ".join(result["missing"])
    for part in (
        "calibration",
        "special-token ablation",
        "gender-neutral",
        "metrics: tiny-lm (all 5 benchmarks)",
        "scores (for the equal-mass diagrams): paper-gpt-j-6b on winobias",
    ):
        assert part in joined, part
    assert "Not available: no calibration reports" in text
    assert result["figures"] == [
        report_layout.fig_reliability("winobias", "paper-gpt-j-6b"),
        report_layout.fig_grid("winobias"),
    ]
    for path in report_data.report_pages(reports):
        assert all((path.parent / src).is_file() for src in parse_page(path).images)


def test_a_reference_run_is_known_by_its_registry_source_not_its_name(full_reports, tmp_path):
    """A run whose registry source is ``reference:<name>`` is one of the authors' runs whatever its id: renamed
    without the ``paper-`` prefix, it stays in the paper table, its Brier ranking and statistics, and the page
    names it among the released scores, not among the runs without extract metadata."""
    old, new = "paper-gpt-j-6b", "authors-gpt-j-6b"
    raw = yaml.safe_load((full_reports / "params.yaml").read_text())
    raw["references"] = [new if m == old else m for m in raw["references"]]
    raw["registry"][new] = raw["registry"].pop(old)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml")
    reports = tmp_path / "reports"
    for src in (full_reports / "reports").rglob("*.json"):
        dest = reports / src.relative_to(full_reports / "reports")
        dest = dest.with_name(f"{new}.json") if src.stem == old else dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src.read_bytes())
    scores = full_reports / "artifacts" / "scores"
    data = report_loader.load_report_data(params, reports, scores, reports, full_reports)
    assert data.references == {new, "paper-gemma-2-9b"}
    assert all(new in data.runs[b] for b in PAPER_BENCHMARKS)

    docs = report_tables.build_tables(data)
    paper = next(d for d in docs if d.name == "paper")
    assert {r.label[0] for t in paper.tables for r in t.rows} == {new, "paper-gemma-2-9b"}
    ranking = [t for t in paper.tables if "Brier ranking" in t.heading]
    assert len(ranking) == len(PAPER_BENCHMARKS) and all(new in [r.label[0] for r in t.rows] for t in ranking)
    # the statistics over the authors' runs are those of the original names
    original = report_loader.load_report_data(
        load_params(full_reports / "params.yaml"), full_reports / "reports", scores, reports, full_reports
    )
    assert report_stats.gap_agreement(data)["all"] == report_stats.gap_agreement(original)["all"]
    assert report_stats.gap_agreement(data)["tests"] > 0
    assert report_stats.mean_rmse(data) == report_stats.mean_rmse(original)

    page = report_html.render_html(data, docs, {})
    assert f"<p>{new}, paper-gemma-2-9b: the authors' released per-pair scores" in page
    assert "No extract metadata" not in page


def test_cli_report(full_reports, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "--params",
            str(full_reports / "params.yaml"),
            "report",
            "--reports",
            str(full_reports / "reports"),
            "--scores",
            str(full_reports / "artifacts" / "scores"),
            "--out",
            str(out),
            "--data-dvc",
            str(ROOT / "data.dvc"),
        ]
    )
    assert code == 0
    assert "figures" in capsys.readouterr().out
    page = parse_page(out / "index.html")
    for src in page.images:  # every image is inside --out: the page can be moved or published alone
        assert (out / src).is_file() and not src.startswith("../"), src
    for path in report_data.report_pages(out)[1:]:  # the detail pages' images too, one level up
        for src in parse_page(path).images:
            assert src.startswith("../figures/") and (path.parent / src).is_file(), src
    assert any(src.startswith("figures/sample_size/") for src in page.images)  # the sample-size PNGs, copied
    assert (out / "figures" / "sample_size").is_dir()


def test_text_is_escaped():
    table = Table("<b>", ["model"], [Column("ece", "E<C>E")], [Row(["<script>x</script>"], [Cell(0.1)])])
    html_text = report_markup.table_html(table)
    assert "<script>" not in html_text and "&lt;script&gt;" in html_text and "E&lt;C&gt;E" in html_text
    assert (
        report_md.table_markdown(Table("t", ["m"], [Column("e", "e")], [Row(["a|b"], [Cell("x|y")])])).count("\\|") == 2
    )


def test_special_tokens_statement_follows_the_data():
    side = {"ece": 0.1, "accuracy": 0.6, "mean_confidence": 0.6, "share_confidence_over_0_9": 0.05}
    worse = {"ece": 0.3, "accuracy": 0.55, "mean_confidence": 0.95, "share_confidence_over_0_9": 0.8}
    data = report_cells.ReportData(benchmarks=["b1", "b2"], runs={}, special_pairs={"m": "m-nobos"})
    data.special_tokens = {"m": {"b1": {"with": side, "without": worse}, "b2": {"with": side, "without": worse}}}
    assert "m looks grossly overconfident" in report_html.special_tokens_statement(data)
    better = {**side, "ece": 0.09}  # (without == with would be one run scored twice, left out)
    data.special_tokens = {"m": {"b1": {"with": side, "without": better}, "b2": {"with": side, "without": worse}}}
    assert "does not show" in report_html.special_tokens_statement(data)
    data.special_tokens = {}
    assert "No special-token ablation" in report_html.special_tokens_statement(data)


def test_reliability_bars_of_empty_and_partial_bins():
    bins = [
        {"bin": 1, "lower": 0.5, "upper": 1.0, "count": 2, "confidence": 0.8, "accuracy": 1.0, "gap": 0.2},
        {"bin": 0, "lower": 0.0, "upper": 0.5, "count": 0, "confidence": None, "accuracy": None, "gap": None},
    ]
    bars = plots.reliability_bars(bins)
    assert bars.filled.tolist() == [False, True] and bars.accuracy.tolist() == [0.0, 1.0]
    assert plots.bins_ece(bins) == pytest.approx(0.2) and plots.bins_ece([]) is None


def test_the_diagram_ece_is_correctly_rounded_whatever_the_python():
    """bins_ece sums with math.fsum: Python 3.12's built-in sum of floats is compensated, 3.11's is not, and the
    figure's inputs key (its PNG text chunk) moved between them. These bins are ones where the two sums differ."""
    import math

    gaps = [0.1, 0.2, 0.3, 1e-16, 0.7]
    bins = [{"count": 1, "gap": g} for g in gaps]
    assert plots.bins_ece(bins) == math.fsum(gaps) / 5
    naive = 0.0
    for g in gaps:
        naive += g
    assert naive != math.fsum(gaps)  # the plain left-to-right sum (3.11's) is off in the last bit


def test_a_figure_key_hashes_its_arrays_in_full_and_refuses_what_json_cannot_hold():
    """numpy's repr elides the middle of a long array: two arrays that differ there must give two keys."""
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0
    key = report_stage._figure_key
    assert key("c", "f", (a,), {}) != key("c", "f", (b,), {})
    assert key("c", "f", (np.float64(0.5), np.int64(3)), {}) == key("c", "f", (0.5, 3), {})
    with pytest.raises(TypeError, match="figure f: an input of type object"):
        key("c", "f", (object(),), {})
