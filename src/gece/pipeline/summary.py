"""Stage summary: ``reports/summary.json``, the one DVC metrics file, and the findings."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from gece.base.terminal import literal, plain
from gece.base.terminal_table import Table
from gece.cmd import command
from gece.io.files.inputs import check_input_dir
from gece.io.files.json_reader import flatten
from gece.io.files.json_writer import write_json
from gece.io.paths import data_layout, layout, report_layout
from gece.io.schemas.summary_report import SummaryReport
from gece.io.settings.params import Params, require_params
from gece.io.settings.params_file import RUN_SECTIONS
from gece.pipeline import report_data

log = logging.getLogger("gece")


def summary_stage(params: Params, reports_dir: str | Path = layout.REPORTS, out: str | Path | None = None):
    """reports/** -> reports/summary.json (the DVC metrics: :func:`gece.report.findings.summary`); returns
    the summary, the findings (:func:`gece.report.findings.findings`) and the page's headlines
    (:func:`gece.report.first_screen.headlines`)."""
    from gece.report import findings, first_screen

    reports_dir = Path(reports_dir)
    check_input_dir(reports_dir, "--reports", "the JSON reports")
    data = report_data.load_report_data(params, reports_dir, layout.scores_root(), reports_dir)
    result = findings.summary(data)
    if out:
        write_json(out, result, SummaryReport)
        log.info("summary: %d values -> %s", len(flatten(result)), out)
    return result, findings.findings(data), first_screen.headlines(data)


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "the findings (best and worst models, notable effects) and reports/summary.json, the one DVC metrics file "
    "(DVC stage summary)"
)
EXAMPLES = (
    "gece summary                                 # the findings as a table",
    "gece summary --out reports/summary.json      # what the DVC stage writes",
    "gece summary --json | jq '.runs.winobias'",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reports", type=Path, default=layout.REPORTS, help="the JSON reports (default: %(default)s)")
    p.add_argument("--out", type=Path, help="write the summary JSON here (default: not written)")
    p.add_argument("--json", action="store_true", help="print the summary JSON instead of the findings")
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params (:func:`gece.pipeline.report_data.load_report_data`): the stages' report
    folders below --reports (not --reports itself, whose summary.json is this command's output), the score files'
    meta files and the released scores (which runs the references have)."""
    folders = [Path(args.reports) / d for d in report_layout.STAGE_REPORTS]
    return [*folders, layout.scores_root(), data_layout.reference_dir()]


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and --out say
STAGE = {
    "name": "summary",
    "about": "the one DVC metrics file: headline metrics per run and a compact line per calibration, ablation, "
    "comparison and grouping (src/gece/report/findings.py); the detail stays in the files above",
    "argv": ["-q", "summary", "--out", str(report_layout.summary_path())],
    "params": ["benchmarks", *RUN_SECTIONS, "ablate.special_tokens"],
    "outputs": {"--out": {"kind": "metrics", "cache": False}},
    "notes": {
        "reports/ablation": "binning, neutral, special_tokens: whichever this configuration has",
        "artifacts/scores": "which runs have extract metadata",
    },
}


def run(args: argparse.Namespace) -> int:
    params = require_params(args)
    result, f, lines = summary_stage(params, args.reports, args.out)
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.quiet:
        print_headlines(lines)
        print_findings(f)
    return 0


def print_headlines(lines) -> None:
    """The first screen of the page in one table, a row per benchmark: the best run (lowest ECE, 95% interval), the
    runs tied with it after Holm and the largest gender gap that is a finding; or, on an identity benchmark, the
    side of 0.5 of the stereotype share under each rule; or, on a protocol's benchmark, the protocol's answer. Two
    columns, so that run names stay whole at 80."""
    table = Table(title="Answers (the figures that open reports/index.html)", title_justify="left")
    table.add_column("benchmark", ids=True)
    table.add_column("answer", whole=True)
    for h in lines:
        if h.protocol != "–":
            text = h.protocol
        elif h.rules != "–":
            text = f"stereotype share {h.rules}"
        else:
            text = f"lowest ECE {h.best}; tied after Holm: {h.tied}; largest gender gap: {h.gap}"
        table.add_row(plain(h.benchmark), plain(text))
    command.out.print(table)


def print_findings(f) -> None:
    """The findings as a table (one row per benchmark and ranked metric), then one line per effect."""
    from gece.report.findings import LABELS, RANKED

    table = Table(
        title="Findings: best and worst model per benchmark (lower is better; 95% bootstrap intervals)",
        title_justify="left",
    )
    for col in ("benchmark", "pairs", "metric", "best", "worst"):
        table.add_column(col, justify="right" if col == "pairs" else "left", ids=col in ("benchmark", "best", "worst"))
    for b in f.benchmarks:
        for i, k in enumerate(k for k in RANKED if k in b.best):
            table.add_row(
                plain(b.benchmark) if i == 0 else "",
                "/".join(map(str, b.n)) if i == 0 else "",
                LABELS[k],
                plain(b.best[k].text()),
                plain(b.worst[k].text()) if b.models > 1 else "–",
                end_section=i == len(RANKED) - 1,
            )
    command.out.print(table)
    if f.identity:
        from gece.report.findings import identity_sentence

        command.out.print("[bold]identity benchmarks[/] (y = 1 for every pair: no calibration to measure)")
        for b in f.identity:
            command.out.print(literal(identity_sentence(b)), highlight=False)
    for topic, text in f.effects:
        command.out.print(f"[bold]{literal(topic)}[/]: {literal(text)}", highlight=False)
