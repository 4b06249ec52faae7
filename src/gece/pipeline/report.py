"""Stage report: figures, markdown tables and the HTML page from every report."""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gece import command, registry
from gece.errors import GeceError
from gece.io import layout
from gece.io.atomic import write_bytes, write_text
from gece.io.disk import check_input_dir, check_output_dir, clear_output_dir
from gece.io.files import png_size, png_text, read_table, write_figure
from gece.io.params import Params
from gece.io.schemas import ScoreRow
from gece.pipeline import report_data, runs, summary
from gece.report import html as report_html
from gece.report import markdown as report_md
from gece.report import pages as report_pages
from gece.report import plots
from gece.report import tables as report_tables
from gece.report.cells import constant_y
from gece.stats import metrics
from gece.terminal import literal, plural

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
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in REPORT_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _code_sha256() -> str:
    """sha256 over the package's Python sources and page templates (relative path and bytes, sorted): names the code
    that built the report without the git revision, which changes with every commit."""
    import hashlib

    import gece

    root = Path(gece.__file__).parent
    h = hashlib.sha256()
    for f in sorted(f for f in root.rglob("*") if f.suffix in (".py", ".css", ".html")):  # code and package data
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _data_snapshot(data_dvc: Path) -> dict:
    from gece.io.params import load_yaml

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
    """sha256 of a figure's drawing function and inputs (JSON; tuple keys as lists) and of ``code``."""
    import hashlib

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return [[plain(k), plain(v)] for k, v in x.items()]
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        return x

    text = json.dumps([code, name, plain(args), plain(kwargs)], default=repr, allow_nan=True)
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
    figure (``layout.README_FIGURE``). Returns what was written."""
    reports_dir, scores_dir = Path(reports_dir), Path(scores_dir)
    check_input_dir(reports_dir, "--reports", "the JSON reports")
    check_input_dir(scores_dir, "--scores", "the score files")
    out_dir = check_output_dir(Path(out_dir) if out_dir is not None else reports_dir, "--out")
    root = Path(root)
    data = report_data.load_report_data(params, reports_dir, scores_dir, out_dir, root)
    data.provenance = {
        **_data_snapshot(Path(data_dvc)),
        "code_sha256": _code_sha256(),
        "gece_version": _package_versions().get("gece"),
        "params": params.model_dump(mode="json"),
        "packages": _package_versions(),
    }
    tables_dir, figures_dir = out_dir / layout.TABLES_DIR, out_dir / layout.FIGURES_DIR
    clear_output_dir(tables_dir, (".md",), "--out")  # stale tables of removed runs go too
    clear_output_dir(out_dir / layout.PAGES_DIR, (".html",), "--out")  # and the pages of removed tables
    # the figures are checked here; those that are not drawn again are removed below
    clear_output_dir(figures_dir, (".png",), "--out", keep=list(figures_dir.rglob("*")))

    figures: dict[str, dict] = {"grid": {}, "calibration": {}, "runs": {}, "sizes": {}}
    written: list[str] = []
    reused: list[str] = []
    todo: list[tuple] = []  # figures to draw: (path, key, draw, args, kwargs)
    code = _figure_code()

    def save(rel: str, draw: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        """Draw ``draw(*args, **kwargs)`` into ``rel`` unless the PNG there was drawn from the same inputs
        (its ``FIGURE_KEY`` text chunk): an unchanged figure is not drawn again."""
        key = _figure_key(code, draw.__name__, args, kwargs)
        path = out_dir / rel
        if png_text(path).get(FIGURE_KEY) == key:
            reused.append(rel)
        else:
            todo.append((path, key, draw, args, kwargs))
        written.append(rel)
        return rel

    for key, rel in list(data.sample_size_figures.items()):  # --out elsewhere: the page takes a copy along
        if rel.startswith("../") or Path(rel).is_absolute():
            src = reports_dir / layout.sample_size_figure(*key)
            copy = layout.fig_sample_size(*key)
            if not (out_dir / copy).exists() or (out_dir / copy).read_bytes() != src.read_bytes():
                write_bytes(out_dir / copy, src.read_bytes())
            written.append(copy)
            data.sample_size_figures[key] = copy
        figures["sizes"][data.sample_size_figures[key]] = png_size(out_dir / data.sample_size_figures[key])

    for b in data.benchmarks:
        panels, entries = [], []
        honest = constant_y(data, b)  # y = 1 for every pair: the diagrams show 1 − mean p, not calibration
        metric = "1 − mean p" if honest else "ECE"
        for m in data.runs[b]:
            key = (b, m)
            scores = scores_dir / layout.scores_file(b, m)
            if runs.is_reference(params, m):
                df = runs.load_scores(params, b, m, root=root)[0] if runs.has_scores(params, b, m, root) else None
            else:
                df = read_table(scores, ScoreRow)[0] if scores.exists() else None
            if df is not None:
                data.examples[key] = report_tables.confident_mistakes(
                    df[list(report_tables.EXAMPLE_COLUMNS)].to_dict("records")
                )
            if key not in data.bins:
                continue
            rep = data.metrics[key]
            n_bins, binning = rep["n_bins"], rep["binning"]
            label = f"{n_bins} {binning.replace('_', '-')} bins"
            images = [
                (
                    save(
                        layout.fig_reliability(b, m),
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
                        save(
                            layout.fig_reliability(b, m, other),
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
            entries.append((m, images))
            panels.append((m, data.bins[key], rep["ece"]))
        if panels:
            title = (
                f"{b}: confidence in the stereotypical sentence (y = 1 for every pair: 1 − mean p, not calibration)"
                if honest
                else f"{b}: reliability diagrams"
            )
            figures["grid"][b] = save(layout.fig_grid(b), plots.reliability_grid, panels, title, metric=metric)
            figures["runs"][b] = entries
        cal_models = [m for m in data.runs[b] if (b, m) in data.calibration_bins and (b, m) in data.calibration]
        if cal_models:
            methods = [
                x
                for x in registry.METHOD_NAMES
                if any(x in data.calibration[(b, m)].get("split", {}).get("methods", {}) for m in cal_models)
            ]
            cells = {}
            for m in cal_models:
                split = data.calibration[(b, m)].get("split", {})
                records = [r for r in data.calibration_bins[(b, m)] if r.get("protocol") == "split"]
                unc = split.get("uncalibrated") or {}
                cells[(m, "uncalibrated")] = (
                    [r for r in records if r["method"] == "uncalibrated"],
                    unc.get("ece"),
                    "ok",
                )
                for x in methods:
                    mrep = split.get("methods", {}).get(x, {})
                    cells[(m, x)] = (
                        [r for r in records if r["method"] == x],
                        (mrep.get("metrics") or {}).get("ece"),
                        mrep.get("status", "missing"),
                    )
            figures["calibration"][b] = save(
                layout.fig_calibration(b),
                plots.calibration_grid,
                cal_models,
                methods,
                cells,
                f"{b}: before and after calibration (held-out split)",
            )
    _draw_figures(todo)
    figures["sizes"].update({rel: png_size(out_dir / rel) for rel in written})
    clear_output_dir(figures_dir, (".png",), "--out", keep=[out_dir / rel for rel in written])
    readme = _readme_figure(out_dir, figures["grid"])

    docs, examples = report_tables.build_tables(data), report_tables.examples_docs(data)
    for doc in docs + examples:
        write_text(out_dir / layout.table_file(doc.name), report_md.doc_markdown(doc))
    pages = report_pages.render_pages(data, docs, examples, figures)
    for rel, text in pages.items():
        write_text(out_dir / rel, text)
    page = out_dir / layout.PAGE_FILE
    write_text(page, report_html.render_html(data, docs, figures))
    log.info(
        "report: %d figures (%d unchanged, not redrawn), %d tables -> %s",
        len(written),
        len(reused),
        len(docs) + len(examples),
        page,
    )
    for line in data.missing:
        log.warning("report: missing %s", line)
    from gece.report.findings import findings

    return {
        "figures": written,
        "readme_figure": readme,
        "tables": [layout.table_file(d.name) for d in docs + examples],
        "pages": list(pages),
        "missing": data.missing,
        "html": str(page),
        "reused": reused,
        "findings": findings(data),
    }


def _readme_figure(out_dir: Path, grids: dict[str, str]) -> str | None:
    """The README's figure (``layout.README_FIGURE``, kept in git while ``figures/`` is DVC-cached): a copy of
    the grid of the first benchmark of params.yaml that has one; None, and no file, when none has."""
    path = out_dir / layout.README_FIGURE
    if not grids:
        path.unlink(missing_ok=True)
        return None
    src = (out_dir / next(iter(grids.values()))).read_bytes()
    if not path.exists() or path.read_bytes() != src:
        write_bytes(path, src)
    return layout.README_FIGURE


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


def run(args: argparse.Namespace) -> int:
    params = command.require_params(args)
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
