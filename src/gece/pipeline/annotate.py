"""Stage annotate: a benchmark's per-annotator labels -> per-pair soft and hard labels
(``artifacts/annotated/<b>.parquet``) and the annotators' agreement (``reports/annotations/<b>.json``).

The hard label (``annotate.rule``, ``annotate.tie``), the soft label and the agreement statistics are
defined in :mod:`gece.stats.annotations` and docs/annotations.md. A benchmark without annotations gets
null labels and a report that says so.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from gece.base.errors import GeceError
from gece.cmd import command, run_tables
from gece.io.files.json_writer import write_json
from gece.io.files.readers import read_table
from gece.io.files.writer import write_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.annotation_report import AnnotationReport
from gece.io.schemas.pair_rows import AnnotatedPair, AnnotationRow, PreparedPair
from gece.io.settings.params import require_params
from gece.io.settings.sections import AnnotateParams

log = logging.getLogger("gece")
MAX_SHOWN = 20


def annotate(
    benchmark: str,
    prepared_path: str | Path,
    annotations_path: str | Path,
    out: str | Path,
    report_out: str | Path,
    settings: AnnotateParams = AnnotateParams(),
) -> dict:
    """Prepared pairs + annotations -> annotated pairs and the agreement report. Nothing is written on error."""
    from gece.stats import annotations as A

    pairs, _ = read_table(prepared_path, PreparedPair)
    labels, _ = read_table(annotations_path, AnnotationRow)
    known = set(pairs["pair_id"])
    unknown = [i for i, p in enumerate(labels["pair_id"], start=1) if p not in known]
    if unknown:
        shown = [
            f"{annotations_path}: row {i}: pair_id {labels['pair_id'].iloc[i - 1]!r} (benchmark row "
            f"{labels['row'].iloc[i - 1]}) is not a pair of {prepared_path}"
            for i in unknown[:MAX_SHOWN]
        ]
        raise GeceError(
            f"{annotations_path}: {len(unknown)} annotation row(s) name pairs the benchmark lacks; nothing was written",
            problems=shown + ([f"... and {len(unknown) - MAX_SHOWN} more"] if len(unknown) > MAX_SHOWN else []),
            hint=f"prepare the benchmark and its annotations together (gece prepare --benchmark "
            f"{benchmark}), or remove the rows of pairs it does not have",
        )
    columns, numbers = A.derive(
        pairs["pair_id"].tolist(),
        pairs["bias_type"].tolist(),
        pairs["y"].to_numpy(),
        labels["pair_id"].tolist(),
        labels["annotator"].tolist(),
        [list(x) for x in labels["labels"]],
        settings.tie,
    )
    hard = columns["y_hard"]
    frame = pd.DataFrame(
        {
            "pair_id": columns["pair_id"],
            "n_annotators": columns["n_annotators"],
            "n_support": columns["n_support"],
            "y_soft": pd.array([None if np.isnan(v) else float(v) for v in columns["y_soft"]], dtype=object),
            "y_hard": pd.array([None if np.isnan(v) else int(v) for v in hard], dtype=object),
        }
    )
    report = {"benchmark": benchmark, "rule": settings.rule, "tie": settings.tie, **numbers}
    AnnotationReport.model_validate(report)
    write_table(out, frame, AnnotatedPair, meta={"benchmark": benchmark, "rule": settings.rule, "tie": settings.tie})
    write_json(report_out, report, AnnotationReport)
    if numbers["n_labels"]:
        log.info(
            "%s: %d of %d pairs annotated by %d annotators; alpha %.3f (binary) %.3f (nominal), kappa %.3f "
            "(binary) %.3f (nominal) -> %s",
            benchmark,
            numbers["n_annotated"],
            numbers["n_pairs"],
            numbers["n_annotators"],
            *(
                numbers[k][c] if numbers[k][c] is not None else float("nan")
                for k in ("alpha", "kappa")
                for c in ("binary", "nominal")
            ),
            report_out,
        )
    else:
        log.info("%s: no annotations: %d pairs with null labels -> %s", benchmark, numbers["n_pairs"], out)
    return report


# the line `gece --help` shows for this command (read without importing this module)
HELP = "per-pair soft and hard labels and the annotators' agreement from a benchmark's annotations (DVC stage annotate)"
EXAMPLES = ("gece annotate --benchmark crows_pairs",)
DESCRIPTION = (
    "Reads artifacts/prepared/<b>.parquet and artifacts/annotations/<b>.parquet (gece prepare --benchmark "
    "<b>); hard labels by annotate.rule ({params:annotate.rule}), ties by annotate.tie "
    "({params:annotate.tie})."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True, help="a benchmark of params.yaml")
    p.add_argument(
        "--tie", choices=["writer", "drop"], help="a tie: the writer's label or none (default: {params:annotate.tie})"
    )
    p.set_defaults(outputs={})


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say
STAGE = {
    "name": "annotate",
    "about": "a benchmark's per-pair labels from its annotators, and their agreement",
    "argv": ["annotate", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": ["annotate"],
    "outputs": {"report": {"note": "not DVC metrics: reports/summary.json is the one metrics file"}},
}


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the benchmark's prepared pairs and per-annotator labels."""
    try:
        return [layout.prepared_path(args.benchmark), layout.annotations(args.benchmark)]
    except GeceError:  # no plain id: run refuses it
        return []


def writes(args: argparse.Namespace) -> dict[str, Path]:
    """The benchmark's annotated pairs and its annotation report."""
    try:
        return {
            "annotated": layout.annotated(args.benchmark),
            "report": report_layout.annotation_report(args.benchmark),
        }
    except GeceError:  # no plain id: run refuses it
        return {}


def run(args: argparse.Namespace) -> int:
    params = require_params(args)
    b = run_tables.benchmark_of(args, params)
    settings = command.override(params.annotate, tie=args.tie)
    annotate(
        b,
        layout.prepared_path(b),
        layout.annotations(b),
        layout.annotated(b),
        report_layout.annotation_report(b),
        settings,
    )
    return 0
