"""Stage report: figures, markdown tables and the HTML page from every report."""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.catalog.calibration_methods import METHOD_NAMES
from gece.cmd import command
from gece.cmd.command import Output
from gece.io.files.destinations import clear_output_dir
from gece.io.files.inputs import check_input_dir
from gece.io.files.output_dirs import check_output_dir
from gece.io.files.outputs import write_bytes, write_text
from gece.io.files.readers import png_size, png_text, read_table, write_figure
from gece.io.paths import data_layout, layout, report_layout
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.params import Params, params_if_valid, require_params
from gece.pipeline import report_data, runs, summary
from gece.report import answer_plots, forest, plots, prompt_answers
from gece.report import examples as report_examples
from gece.report import html as report_html
from gece.report import markdown as report_md
from gece.report import pages as report_pages
from gece.report import tables as report_tables
from gece.report.cells import ReportData, TableDoc, answered
from gece.report.first_screen import AnswerFigure
from gece.report.protocol import by_name
from gece.report.readings import reading_of
from gece.stats import metrics

log = logging.getLogger("gece")


# -------------------------------------------------------------------------- report
REPORT_PACKAGES = (
    "gece",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "pydantic",
    "matplotlib",
    "scikit-learn",
    "betacal",
    "torch",
    "transformers",
    "gguf",
    "dvc",
)


def _package_versions() -> dict[str, str]:
    """The release of each package of :data:`REPORT_PACKAGES` (without a local label: torch's ``+cpu`` build and its
    CUDA build are one release). Not the interpreter's version: the same releases give the same bytes on every
    Python gece supports (tests/test_python_versions.py, ``make other-python``), so the page is the same too."""
    from importlib import metadata

    versions = {}
    for name in REPORT_PACKAGES:
        try:
            versions[name] = metadata.version(name).split("+", 1)[0]
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _code_sha256() -> str:
    """sha256 of the manifest of every stage's command (:func:`gece.code.manifests.fingerprint`: each module by what
    its code does) and of the page's CSS and template: names the code that built the results without the git
    revision, which changes with every commit, and without the comments and docstrings, which change no result."""
    import hashlib

    from gece.code.manifests import fingerprint

    h = hashlib.sha256(fingerprint().encode())
    for name in report_html.PAGE_DATA:
        h.update(b"\0" + name.encode() + b"\0" + report_html.package_data(name))
    return h.hexdigest()


def _data_snapshot(data_dvc: Path) -> dict:
    from gece.io.settings.params_file import load_yaml

    if not data_dvc.exists():
        return {"data_md5": "unknown (no data.dvc)", "data_nfiles": "?"}
    hint = "restore it with `git checkout data.dvc`"
    raw = load_yaml(data_dvc, hint=hint)
    outs = (raw.get("outs") if isinstance(raw, dict) else None) or [{}]
    if not isinstance(outs, list) or not isinstance(outs[0], dict):
        raise GeceError(f"{data_dvc}: not a DVC file (no outs: list of mappings)", hint=hint)
    return {"data_md5": outs[0].get("md5", "unknown"), "data_nfiles": outs[0].get("nfiles", "?")}


FIGURE_KEY = "gece-inputs"  # PNG text chunk: sha256 of what the figure was drawn from


FIGURE_DPI = 100


def _figure_code() -> str:
    """What every figure also depends on: the drawing code, matplotlib's version and the resolution."""
    import hashlib

    import matplotlib

    return hashlib.sha256(
        Path(plots.__file__).read_bytes() + f"{matplotlib.__version__}:{FIGURE_DPI}".encode()
    ).hexdigest()


def _figure_key(code: str, name: str, args: tuple, kwargs: dict) -> str:
    """sha256 of a figure's drawing function and inputs (JSON; tuple keys as lists, NumPy arrays and scalars as
    their values in full) and of ``code``. An input JSON cannot hold exactly is refused (TypeError) rather than
    hashed by its ``repr``, which may leave values out (NumPy elides long arrays) or hold an address."""
    import hashlib

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return [[plain(k), plain(v)] for k, v in x.items()]
        if isinstance(x, np.ndarray):  # its values as Python numbers, in one call
            return plain(x.tolist())
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        if isinstance(x, np.generic):
            return x.item()
        return x

    def refuse(x: Any) -> Any:
        raise TypeError(f"figure {name}: an input of type {type(x).__name__} has no exact JSON form")

    text = json.dumps([code, name, plain(args), plain(kwargs)], default=refuse, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _draw_figure(task: tuple) -> None:
    path, key, draw, args, kwargs = task
    fig = draw(*args, **kwargs)
    write_figure(path, fig, dpi=FIGURE_DPI, text={FIGURE_KEY: key})
    plots.plt.close(fig)


def _draw_figures(todo: list[tuple]) -> None:
    """Draw the figures of ``todo``, in as many processes as there are CPUs (matplotlib is single-threaded);
    each figure is a function of its task alone, so the bytes do not depend on the number of processes."""
    workers = min(len(todo), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if workers < 2 or len(todo) < 4:
        for task in todo:
            _draw_figure(task)
        return
    import multiprocessing
    import sys
    from concurrent.futures import ProcessPoolExecutor

    # fork is cheap; a process that has loaded torch (its thread pools do not survive a fork) starts fresh ones
    fork = "fork" in multiprocessing.get_all_start_methods() and "torch" not in sys.modules
    context = multiprocessing.get_context("fork" if fork else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        list(pool.map(_draw_figure, todo, chunksize=max(1, len(todo) // (4 * workers))))


@dataclass
class _Figures:
    """The figures of one build: those drawn (``written``, in page order), those whose PNG already held the same
    inputs (``reused``) and those still to draw (``todo``: path, key, draw, args, kwargs)."""

    out_dir: Path
    code: str = field(default_factory=_figure_code)
    written: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    todo: list[tuple] = field(default_factory=list)

    def save(self, rel: str, draw: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        """Draw ``draw(*args, **kwargs)`` into ``rel`` unless the PNG there was drawn from the same inputs
        (its ``FIGURE_KEY`` text chunk): an unchanged figure is not drawn again."""
        key = _figure_key(self.code, draw.__name__, args, kwargs)
        path = self.out_dir / rel
        if png_text(path).get(FIGURE_KEY) == key:
            self.reused.append(rel)
        else:
            self.todo.append((path, key, draw, args, kwargs))
        self.written.append(rel)
        return rel


def report_stage(
    params: Params,
    reports_dir: str | Path = layout.REPORTS,
    scores_dir: str | Path = layout.scores_root(),
    out_dir: str | Path | None = None,
    data_dvc: str | Path = Path("data.dvc"),
    root: str | Path = Path(),
) -> dict:
    """reports/** (+ artifacts/scores for the equal-mass diagrams and the confidently wrong
    pairs) -> reports/figures/, reports/tables/*.md, reports/pages/*.html, reports/index.html and the README's
    figure (``report_layout.README_FIGURE``). Returns what was written."""
    reports_dir, scores_dir = Path(reports_dir), Path(scores_dir)
    check_input_dir(reports_dir, "--reports", "the JSON reports")
    check_input_dir(scores_dir, "--scores", "the score files")
    out_dir = check_output_dir(Path(out_dir) if out_dir is not None else reports_dir, "--out")
    root = Path(root)
    data = report_data.load_report_data(params, reports_dir, scores_dir, out_dir, root)
    data.provenance = _provenance(params, Path(data_dvc))
    _clear_outputs(out_dir)
    figs = _Figures(out_dir)
    figures: dict[str, dict] = {"grid": {}, "calibration": {}, "runs": {}, "sizes": {}}
    figures["sizes"] = _copy_sample_size_figures(data, reports_dir, out_dir, figs.written)
    for b in data.benchmarks:
        _reliability_figures(params, data, b, scores_dir, root, figs, figures)
        _calibration_figure(data, b, figs, figures)
    _draw_figures(figs.todo)
    figures["sizes"].update({rel: png_size(out_dir / rel) for rel in figs.written})
    figures["answers"] = _answer_figures(data, out_dir)
    keep = [out_dir / rel for rel in figs.written] + [out_dir / f.csv for f in figures["answers"]]
    clear_output_dir(out_dir / report_layout.FIGURES_DIR, FIGURE_SUFFIXES, "--out", keep=keep)
    readme = _readme_figure(out_dir, figures["grid"])
    docs, examples = report_tables.build_tables(data), report_examples.examples_docs(data)
    pages, page = _write_documents(data, out_dir, docs, examples, figures)
    log.info(
        "report: %d figures (%d unchanged, not redrawn), %d tables -> %s",
        len(figs.written),
        len(figs.reused),
        len(docs) + len(examples),
        page,
    )
    for line in data.missing:
        log.warning("report: missing %s", line)
    from gece.report.findings import findings

    return {
        "figures": figs.written,
        "readme_figure": readme,
        "tables": [report_layout.table_file(d.name) for d in docs + examples],
        "pages": list(pages),
        "missing": data.missing,
        "html": str(page),
        "reused": figs.reused,
        "findings": findings(data),
    }


def _provenance(params: Params, data_dvc: Path) -> dict:
    """What the page names as its provenance: the data snapshot, the code, the parameters and the packages."""
    return {
        **_data_snapshot(data_dvc),
        "code_sha256": _code_sha256(),
        "gece_version": _package_versions().get("gece"),
        "params": params.model_dump(mode="json"),
        "packages": _package_versions(),
    }


def _clear_outputs(out_dir: Path) -> None:
    """Remove the stale tables and pages of removed runs; check the figures, whose stale ones go after drawing."""
    figures_dir = out_dir / report_layout.FIGURES_DIR
    clear_output_dir(out_dir / report_layout.TABLES_DIR, (".md",), "--out")  # stale tables of removed runs go too
    clear_output_dir(out_dir / report_layout.PAGES_DIR, (".html",), "--out")  # and the pages of removed tables
    # the figures are checked here; those that are not drawn again are removed after drawing
    clear_output_dir(figures_dir, FIGURE_SUFFIXES, "--out", keep=list(figures_dir.rglob("*")))


FIGURE_SUFFIXES = (".png", ".csv")  # what gece writes into the figures directory: figures and their data


def _answer_figures(data: ReportData, out_dir: Path) -> list[AnswerFigure]:
    """The first screen's figures (inline SVG, drawn every time: they are small) and their CSVs, written beside
    the other figures (``report_layout.fig_data``)."""
    out = []
    for kind, b, points in forest.first_screen(data):
        name = forest.figure_name(kind, b)
        if kind == "rules":
            svg = answer_plots.rules_svg(name, b, points)
        else:  # the calibration figure with its gender gaps, or a protocol's (its panels)
            svg = answer_plots.calibration_svg(name, b, points, by_name(data, kind), forest.gap_titles(data, b))
        out.append(AnswerFigure(kind, b, name, points, svg, _figure_csv(out_dir, name, points)))
    for m in sorted(answered(data).prompts):  # the prompt ablation's figure of each model (prompt_answers)
        name = forest.figure_name(prompt_answers.KIND, m)
        points = prompt_answers.prompt_points(answered(data), m)
        svg = answer_plots.prompts_svg(name, m, points)
        out.append(AnswerFigure(prompt_answers.KIND, m, name, points, svg, _figure_csv(out_dir, name, points)))
    return out


def _figure_csv(out_dir: Path, name: str, points: list) -> str:
    """A figure's CSV (``report_layout.fig_data``), written when it changed; its path relative to ``out_dir``."""
    csv = report_layout.fig_data(name)
    text = forest.points_csv(points)
    if not (out_dir / csv).exists() or (out_dir / csv).read_text(encoding="utf-8") != text:
        write_text(out_dir / csv, text)
    return csv


def _copy_sample_size_figures(data: ReportData, reports_dir: Path, out_dir: Path, written: list[str]) -> dict:
    """With --out elsewhere the page takes a copy of each sample-size figure along (appended to ``written``;
    ``data.sample_size_figures`` then points at the copy). Returns each figure's pixel size by its path."""
    sizes = {}
    for key, rel in list(data.sample_size_figures.items()):
        if rel.startswith("../") or Path(rel).is_absolute():
            src = reports_dir / report_layout.sample_size_figure(*key)
            copy = report_layout.fig_sample_size(*key)
            if not (out_dir / copy).exists() or (out_dir / copy).read_bytes() != src.read_bytes():
                write_bytes(out_dir / copy, src.read_bytes())
            written.append(copy)
            data.sample_size_figures[key] = copy
        sizes[data.sample_size_figures[key]] = png_size(out_dir / data.sample_size_figures[key])
    return sizes


def _run_scores(params: Params, b: str, m: str, scores_dir: Path, root: Path) -> pd.DataFrame | None:
    """The score rows of run (b, m): a reference run's from its registry source; None when there are none."""
    if runs.is_reference(params, m):
        return runs.load_scores(params, b, m, root=root)[0] if runs.has_scores(params, b, m, root) else None
    scores = scores_dir / layout.scores_file(b, m)
    return read_table(scores, ScoreRow)[0] if scores.exists() else None


def _reliability_figures(
    params: Params, data: ReportData, b: str, scores_dir: Path, root: Path, figs: _Figures, figures: dict
) -> None:
    """Benchmark ``b``'s confidently wrong pairs (into ``data.examples``), each run's reliability diagrams
    (``figures["runs"]``) and their grid (``figures["grid"]``)."""
    panels, entries = [], []
    reading = reading_of(data, b)  # y = 1 for every pair: the diagrams show 1 − mean p, not calibration
    metric = reading.ece
    for m in data.runs[b]:
        key = (b, m)
        df = _run_scores(params, b, m, scores_dir, root)
        if df is not None:
            data.examples[key] = report_examples.confident_mistakes(
                df[list(report_examples.EXAMPLE_COLUMNS)].to_dict("records")
            )
        if key not in data.bins:
            continue
        entries.append((m, _run_diagrams(data, key, df, metric, figs)))
        panels.append((m, data.bins[key], data.metrics[key]["ece"]))
    if panels:
        title = reading.grid_title.format(b=b)
        figures["grid"][b] = figs.save(report_layout.fig_grid(b), plots.reliability_grid, panels, title, metric=metric)
        figures["runs"][b] = entries


def _run_diagrams(
    data: ReportData, key: tuple[str, str], df: pd.DataFrame | None, metric: str, figs: _Figures
) -> list[tuple[str, str]]:
    """Run ``key``'s figures, (path, label) each: the reliability diagram of its report's binning, the other
    binning's (from its score rows, when there are any) and its sample-size figure (when there is one)."""
    b, m = key
    rep = data.metrics[key]
    n_bins, binning = rep["n_bins"], rep["binning"]
    label = f"{n_bins} {binning.replace('_', '-')} bins"
    images = [
        (
            figs.save(
                report_layout.fig_reliability(b, m),
                plots.reliability_figure,
                data.bins[key],
                m,
                rep["ece"],
                subtitle=f"{b} · {label}",
                metric=metric,
            ),
            label,
        )
    ]
    if df is not None:
        other = "equal_mass" if binning == "equal_width" else "equal_width"
        table = (
            metrics.reliability_table(
                df["p"].to_numpy(np.float64), df["y"].to_numpy(np.float64), n_bins, other
            ).records()
            if len(df)
            else []
        )
        other_label = f"{n_bins} {other.replace('_', '-')} bins"
        images.append(
            (
                figs.save(
                    report_layout.fig_reliability(b, m, other),
                    plots.reliability_figure,
                    table,
                    m,
                    plots.bins_ece(table),
                    subtitle=f"{b} · {other_label}",
                    metric=metric,
                ),
                other_label,
            )
        )
    if key in data.sample_size_figures:
        images.append((data.sample_size_figures[key], f"{metric} against sample size"))
    return images


def _calibration_figure(data: ReportData, b: str, figs: _Figures, figures: dict) -> None:
    """Benchmark ``b``'s grid of reliability diagrams before and after each calibration method, on the held-out
    split (``figures["calibration"]``), when any run has a calibration report and y varies (on a benchmark with
    constant y no map can be fitted: there is nothing to draw)."""
    cal_models = [m for m in data.runs[b] if (b, m) in data.calibration_bins and (b, m) in data.calibration]
    if not cal_models or not reading_of(data, b).calibration:
        return
    methods = [
        x
        for x in METHOD_NAMES
        if any(x in data.calibration[(b, m)].get("split", {}).get("methods", {}) for m in cal_models)
    ]
    cells = {}
    for m in cal_models:
        split = data.calibration[(b, m)].get("split", {})
        records = [r for r in data.calibration_bins[(b, m)] if r.get("protocol") == "split"]
        unc = split.get("uncalibrated") or {}
        cells[(m, "uncalibrated")] = ([r for r in records if r["method"] == "uncalibrated"], unc.get("ece"), "ok")
        for x in methods:
            mrep = split.get("methods", {}).get(x, {})
            cells[(m, x)] = (
                [r for r in records if r["method"] == x],
                (mrep.get("metrics") or {}).get("ece"),
                mrep.get("status", "missing"),
            )
    figures["calibration"][b] = figs.save(
        report_layout.fig_calibration(b),
        plots.calibration_grid,
        cal_models,
        methods,
        cells,
        f"{b}: before and after calibration (held-out split)",
    )


def _write_documents(
    data: ReportData, out_dir: Path, docs: list[TableDoc], examples: list[TableDoc], figures: dict
) -> tuple[dict[str, str], Path]:
    """Write the markdown tables, the detail pages and the page; return the pages (by path) and the page's path."""
    for doc in docs + examples:
        write_text(out_dir / report_layout.table_file(doc.name), report_md.doc_markdown(doc))
    pages = report_pages.render_pages(data, docs, examples, figures)
    for rel, text in pages.items():
        write_text(out_dir / rel, text)
    page = out_dir / report_layout.PAGE_FILE
    write_text(page, report_html.render_html(data, docs, figures))
    return pages, page


def _readme_figure(out_dir: Path, grids: dict[str, str]) -> str | None:
    """The README's figure (``report_layout.README_FIGURE``, kept in git while ``figures/`` is DVC-cached): a copy of
    the grid of the first benchmark of params.yaml that has one; None, and no file, when none has."""
    path = out_dir / report_layout.README_FIGURE
    if not grids:
        path.unlink(missing_ok=True)
        return None
    write_bytes(path, (out_dir / next(iter(grids.values()))).read_bytes())  # an output, never read: the same bytes
    return report_layout.README_FIGURE


# the line `gece --help` shows for this command (read without importing this module)
HELP = "figures, tables and reports/index.html from every report (DVC stage report)"
EXAMPLES = ("gece report", "gece report --out /tmp/page     # the page elsewhere, with its figures")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reports", type=Path, default=layout.REPORTS, help="the JSON reports (default: %(default)s)")
    p.add_argument(
        "--scores",
        type=Path,
        default=layout.scores_root(),
        help="score files, for the equal-mass diagrams and extract metadata (default: %(default)s)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="where index.html, figures/, tables/ and pages/ go; the last three are replaced (default: --reports)",
    )
    p.add_argument("--data-dvc", type=Path, default=Path("data.dvc"), help="for the data hash (default: %(default)s)")


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the stages' report folders below --reports, the prepared pairs, --scores, the
    data snapshot (the benchmarks' sources, wherever an entry's source lies, and the released scores: the reference
    runs' pairs are read as the other stages read them), --data-dvc, and the figures it wrote (drawn by worker
    processes, read back for their sizes and texts; one whose inputs are unchanged is kept)."""
    params = params_if_valid(args)
    benchmarks = list(params.benchmarks) if params is not None else []
    return [
        *(args.reports / d for d in report_layout.STAGE_REPORTS),
        layout.ARTIFACTS / "prepared",
        *(layout.prepared_path(b) for b in benchmarks),
        args.scores,
        layout.DATA,
        *(data_layout.benchmark_source(params, b) for b in benchmarks),
        data_layout.reference_dir(),
        args.data_dvc,
        (args.out or args.reports) / report_layout.FIGURES_DIR,
    ]


def writes(args: argparse.Namespace) -> dict[str, Path | Output]:
    """In --out (default: --reports): the tables and the detail pages (replaced whole), the page, the README's
    figure and the figures (kept to those of the current page; those it does not draw again are read back first).
    Nothing when --out is no directory: run refuses it."""
    out = args.out or args.reports
    if out.exists() and not out.is_dir():
        return {}
    return {
        "the tables": Output(out / report_layout.TABLES_DIR, "folder"),
        "the page": out / report_layout.PAGE_FILE,
        "the README's figure": out / report_layout.README_FIGURE,
        "the detail pages": Output(out / report_layout.PAGES_DIR, "folder"),
        "the figures": Output(out / report_layout.FIGURES_DIR, "folder", updated=True),
    }


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say; its code dep is
# every stage's manifest, whose hash the page shows, and the page's CSS and template
STAGE = {
    "name": "report",
    "about": "figures, tables and the HTML page from every report (docs/pipeline.md)",
    "argv": ["-q", "report"],
    "params": ["params.yaml"],
    "code": "stages",
    "package_data": [f"report/{name}" for name in report_html.PAGE_DATA],
    "outputs": {
        "the tables": {"cache": False},
        "the page": {"cache": False},
        "the README's figure": {"cache": False, "note": "a copy of the first grid: git keeps it, DVC the figures"},
        "the detail pages": {"note": "one per table, and the confidently wrong pairs: DVC keeps them"},
        "the figures": {
            "kind": "plots",
            "persist": True,
            "note": "gece report redraws only the figures whose inputs changed",
        },
    },
    "notes": {
        "artifacts/prepared": "with data/reference: the released scores of the references",
        "artifacts/scores": "equal-mass diagrams, confidently wrong pairs, extract metadata",
        "data": "the released scores, and the snapshot hash (from data.dvc) on the page",
        "params.yaml": "all of it: the page shows the validated parameters",
    },
}


def run(args: argparse.Namespace) -> int:
    params = require_params(args)
    result = report_stage(params, args.reports, args.scores, args.out, args.data_dvc)
    command.out.print(
        f"[green]report[/]: {plural(len(result['figures']), 'figure')}, "
        f"{plural(len(result['tables']), 'table')} -> {literal(result['html'])}",
        highlight=False,
    )
    if result["missing"]:
        command.out.print(f"{plural(len(result['missing']), 'part')} missing (listed on the page)", highlight=False)
    if not args.quiet and result.get("findings") is not None:
        summary.print_findings(result["findings"])
    return 0
