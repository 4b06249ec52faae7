"""The reports a page or a summary is built from, read and validated, with what is missing listed."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from gece.io.files import paired
from gece.io.files.json_reader import read_json
from gece.io.paths import data_layout, layout, report_layout
from gece.io.schemas.ablation_reports import BinningReport, NeutralReport, SampleSizeReport, SpecialTokensReport
from gece.io.schemas.annotation_report import AnnotationReport
from gece.io.schemas.calibration_files import CalibrationBinsReport, CalibrationReport
from gece.io.schemas.compare_report import CompareReport
from gece.io.schemas.groups_report import GroupsReport
from gece.io.schemas.lmeval_files import ImportMeta
from gece.io.schemas.metric_reports import BinsReport, MetricsReport
from gece.io.schemas.prompt_reports import PromptAblationReport
from gece.io.schemas.tokens import ExtractMeta
from gece.io.settings.params import Params
from gece.pipeline import runs
from gece.protocols import declarations
from gece.report import cells as report_cells
from gece.report.cells import ReportData

log = logging.getLogger("gece")


def _missing_line(what: str, items: list[tuple[str, str]], expected: dict[str, list[str]]) -> str | None:
    """'what: model (all benchmarks); model on b1, b2' from (benchmark, model) pairs."""
    if not items:
        return None
    by_model: dict[str, list[str]] = {}
    for b, m in items:
        by_model.setdefault(m, []).append(b)
    parts = []
    for m, bs in by_model.items():
        everywhere = [b for b, ms in expected.items() if m in ms]
        parts.append(
            f"{m} (all {len(bs)} benchmarks)"
            if len(bs) > 1 and sorted(bs) == sorted(everywhere)
            else f"{m} on {', '.join(bs)}"
        )
    return f"{what}: " + "; ".join(parts)


def _read_optional(path: Path, model=None) -> Any:
    """A JSON report, validated when a schema is given; None when the file does not exist."""
    if not path.exists():
        return None
    data = read_json(path)
    if model is not None:
        read_json(path, model)  # validation only: the tables read the raw JSON, the values as written
    return data


# what a run's missing reports are listed under on the page, in this order
LOST = (
    "metrics",
    "bins",
    "sample-size ablation",
    "binning ablation",
    "calibration",
    "calibration bins",
    "scores (for the equal-mass diagrams)",
    "extract metadata",
)


def load_report_data(
    params: Params, reports_dir: Path, scores_dir: Path, out_dir: Path, root: Path = Path()
) -> ReportData:
    """Every JSON report the page is built from; what is missing is listed, not an error. ``root``: the
    repository whose data/ holds the released scores of the references."""
    benchmarks = _benchmarks(params, reports_dir)
    expected = {b: runs.runs(params, b, root) for b in benchmarks}
    data = report_cells.ReportData(
        benchmarks=benchmarks,
        runs={},
        references=runs.reference_ids(params),
        lmeval=set(runs.lmeval_ids(params)),
        checks={m: check_setting(params, m) for m in sorted(runs.checks(params))},
        special_pairs=dict(params.ablate.special_tokens),
        rules=params.rules,
        variants=data_layout.rule_variants(params),
        hidden={b for b, entry in params.benchmarks.items() if not entry.sentences_shown},
        synthbias={b: entry.synthbias for b, entry in params.benchmarks.items() if entry.synthbias},
        headline_method=params.calibrate.headline,
        protocols=declarations.PROTOCOLS,
    )
    lost: dict[str, list[tuple[str, str]]] = {k: [] for k in LOST}
    for b in benchmarks:
        found = sorted(p.stem for p in (reports_dir / report_layout.metrics_dir(b)).glob("*.json"))
        data.runs[b] = [m for m in expected[b] if m in found] + [m for m in found if m not in expected[b]]
        lost["metrics"] += [(b, m) for m in expected[b] if m not in found]
        for m in data.runs[b]:
            _read_run(params, data, (b, m), reports_dir, scores_dir, out_dir, root, lost)
    _read_model_reports(params, data, reports_dir)
    for b in benchmarks:
        _read_benchmark_reports(data, b, reports_dir)
    data.missing = _missing_lines(params, data, lost, expected)
    return data


def check_setting(params: Params, m: str) -> str:
    """What makes run ``m`` a check, as its registry entry writes it: ``limit: 12, checked_against: smollm2-135m``."""
    spec = params.registry[m]
    return ", ".join(
        f"{key}: {value}" for key, value in (("limit", spec.limit), ("checked_against", spec.checked_against)) if value
    )


def _benchmarks(params: Params, reports_dir: Path) -> list[str]:
    """The benchmarks of params.yaml, then (sorted) those that only have metrics reports."""
    benchmarks = list(params.benchmarks)
    if (reports_dir / report_layout.METRICS_DIR).is_dir():
        benchmarks += sorted(
            d.name
            for d in (reports_dir / report_layout.METRICS_DIR).iterdir()
            if d.is_dir() and d.name not in benchmarks
        )
    return benchmarks


def _read_run(
    params: Params,
    data: ReportData,
    key: tuple[str, str],
    reports_dir: Path,
    scores_dir: Path,
    out_dir: Path,
    root: Path,
    lost: dict[str, list[tuple[str, str]]],
) -> None:
    """Read run ``key``'s reports, sample-size figure and extract metadata into ``data``; what it lacks goes to
    ``lost``."""
    b, m = key
    data.metrics[key] = _read_optional(reports_dir / report_layout.metrics_file(b, m), MetricsReport)
    for what, store, rel, schema in (
        ("bins", data.bins, report_layout.bins_file(b, m), BinsReport),
        ("sample-size ablation", data.sample_size, report_layout.sample_size_file(b, m), SampleSizeReport),
        ("binning ablation", data.binning, report_layout.binning_file(b, m), BinningReport),
        ("calibration", data.calibration, report_layout.calibration_file(b, m), CalibrationReport),
        ("calibration bins", data.calibration_bins, report_layout.calibration_bins_file(b, m), CalibrationBinsReport),
    ):
        value = _read_optional(reports_dir / rel, schema)
        if value is not None:
            store[key] = value
        elif not (m in data.checks and what.startswith("calibration")):  # a check's slice may be skipped: not lost
            lost[what].append(key)
    png = reports_dir / report_layout.sample_size_figure(b, m)
    if png.exists():
        data.sample_size_figures[key] = Path(os.path.relpath(png, out_dir)).as_posix()
    if runs.is_reference(params, m):  # read from data/reference; nothing extracted
        if not runs.has_scores(params, b, m, root):
            lost["scores (for the equal-mass diagrams)"].append(key)
        return
    scores = scores_dir / layout.scores_file(b, m)
    if not scores.exists():
        lost["scores (for the equal-mass diagrams)"].append(key)
    meta = _read_optional(layout.meta_path(scores), ImportMeta if m in data.lmeval else ExtractMeta)
    if meta is not None and scores.exists():
        writer = (
            f"gece lmeval-import --model {m} --benchmark {b} (or gece lmeval-run)"
            if m in data.lmeval
            else f"gece score --benchmark {b} --model {m}"
        )
        paired.check_pair(scores, layout.meta_path(scores), meta, f"rerun {writer}")
    if meta is None:
        lost["extract metadata"].append(key)
    else:  # an import's unscored pair ids stay in its meta file: the page shows their count
        data.meta[key] = {k: v for k, v in meta.items() if k != "unscored"}


def _read_model_reports(params: Params, data: ReportData, reports_dir: Path) -> None:
    """Read the per-model ablations into ``data``: gender-neutral wording, special tokens and prompts."""
    for m in params.models:
        rep = _read_optional(reports_dir / report_layout.neutral_file(m), NeutralReport)
        if rep is not None:
            data.neutral[m] = rep
    for m in params.ablate.special_tokens:
        rep = _read_optional(reports_dir / report_layout.special_tokens_file(m), SpecialTokensReport)
        if rep is not None:
            data.special_tokens[m] = rep
    for m in params.ablate.prompts:
        rep = _read_optional(reports_dir / report_layout.prompts_file(m), PromptAblationReport)
        if rep is not None:
            data.prompts[m] = rep


def _read_benchmark_reports(data: ReportData, b: str, reports_dir: Path) -> None:
    """Read benchmark ``b``'s model comparison, annotation (when any pair is annotated) and groups reports."""
    rep = _read_optional(reports_dir / report_layout.compare_file(b), CompareReport)
    if rep is not None:
        data.compare[b] = rep
    rep = _read_optional(reports_dir / report_layout.annotation_file(b), AnnotationReport)
    if rep is not None and rep.get("n_annotated"):
        data.annotations[b] = rep
    rep = _read_optional(reports_dir / report_layout.groups_file(b), GroupsReport)
    if rep is not None:
        data.groups[b] = rep


def _missing_lines(
    params: Params, data: ReportData, lost: dict[str, list[tuple[str, str]]], expected: dict[str, list[str]]
) -> list[str]:
    """The page's "Missing parts": the runs' missing reports, then the missing ablations and comparisons."""
    missing = [_missing_line(what, items, expected) for what, items in lost.items()]
    if params.models and not data.neutral:
        missing.append(
            f"gender-neutral wording ablation (reports/ablation/neutral/): none of {', '.join(params.models)}"
        )
    else:
        missing.append(
            _missing_line(
                "gender-neutral wording ablation",
                [("genderlex", m) for m in params.models if m not in data.neutral],
                {},
            )
        )
    missing.append(
        _missing_line(
            "special-token ablation",
            [("all benchmarks", m) for m in params.ablate.special_tokens if m not in data.special_tokens],
            {},
        )
    )
    missing.append(
        _missing_line(
            "prompt ablation", [("all benchmarks", m) for m in params.ablate.prompts if m not in data.prompts], {}
        )
    )
    lacking = [b for b in data.benchmarks if len(data.runs[b]) > 1 and b not in data.compare]
    if lacking:
        missing.append(f"model comparison (reports/compare/): {', '.join(lacking)}")
    return [x for x in missing if x]
