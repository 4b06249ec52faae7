"""A protocol is one module plus one declaration (gece.protocols.declarations): a toy protocol, its module and its
declaration written here, is measured, compared, summarised and shown by the stages as they are.

A real protocol adds the same pieces in four files: ``src/gece/protocols/<name>.py`` (what :mod:`ToyModule` below
holds), its entry in ``PROTOCOLS``, its section in docs/metrics.md and its test. The stages run here on the
authors' released scores of winobias (no model), with the toy's declaration added to ``PROTOCOLS``."""

from __future__ import annotations

import contextlib
import json
import logging

import numpy as np
import pandas as pd
import pytest
import yaml

from gece.catalog.metric_defs import Metric
from gece.io.settings.sections import BenchmarkSpec, MetricsParams
from gece.protocols import declarations
from gece.report.cells import Column, ReportData, Row, Table, TableDoc, metric_cell
from gece.report.protocol import Protocol, benchmarks_of
from gece.stats.bootstrap import bootstrap
from gece.stats.intervals import bias_corrected_interval

from .conftest import ROOT


# ---------------------------------------------------------------- the toy protocol's module
class ToyModule:
    """How sure a model is: the mean confidence max(p, 1 − p) and the share of pairs it is over 0.9 sure of."""

    NAME = "toy"
    METRICS = (
        Metric("sure", "mean confidence", None, True, "mean of max(p, 1 − p)"),
        Metric("very_sure", "share over 0.9", "high", True, "share of pairs with max(p, 1 − p) > 0.9"),
    )

    @staticmethod
    def kernel(p: np.ndarray) -> dict[str, np.ndarray]:
        conf = np.maximum(p, 1 - p)
        return {"sure": conf.mean(axis=-1), "very_sure": (conf > 0.9).mean(axis=-1)}

    @staticmethod
    def applies(entry: BenchmarkSpec) -> bool:
        return entry.source is None  # the gece CSV benchmarks

    @classmethod
    def measurer(cls, entry, pairs: pd.DataFrame, settings: MetricsParams):
        def measure(scores: pd.DataFrame) -> dict:
            p = scores["p"].to_numpy(np.float64)
            value = {k: float(v[0]) for k, v in cls.kernel(p[None, :]).items()}
            draws = bootstrap(cls.kernel, {"p": p}, settings.bootstrap, settings.seed)
            out: dict = {"n_pairs": len(p)}
            for k, v in value.items():
                out[k] = v
                out[f"{k}_ci_low"], out[f"{k}_ci_high"] = bias_corrected_interval(draws[k], v, settings.ci, (0, 1))
            return out

        return measure

    @classmethod
    def comparer(cls, entry, pairs, settings, draws: int, seed: int):
        def measure(run, _clusters):
            return cls.kernel(run.p[None, :]), bootstrap(cls.kernel, {"p": run.p}, draws, seed)

        return measure

    @classmethod
    def doc(cls, data: ReportData) -> TableDoc:
        tables = []
        for b in benchmarks_of(data, cls.NAME):
            columns = [Column(m.key, m.label, m.worse) for m in cls.METRICS]
            rows = [
                Row([m], [metric_cell(data.metrics[(b, m)][cls.NAME], k, cls.NAME) for k in ("sure", "very_sure")])
                for m in data.runs[b]
            ]
            tables.append(Table(b, ["model"], columns, rows))
        return TableDoc(cls.NAME, "Toy protocol: how sure", "Mean confidence per run.", tables)

    @classmethod
    def answers(cls, data: ReportData) -> list[tuple[str, str]]:
        return [
            (f"{b} / {m}", f"toy: mean confidence {data.metrics[(b, m)][cls.NAME]['sure']:.3f}")
            for b in benchmarks_of(data, cls.NAME)
            for m in data.runs[b]
        ]


TOY = Protocol(
    name=ToyModule.NAME,
    title="Toy protocol: how sure",
    metrics=ToyModule.METRICS,
    summary=("n_pairs", "sure", "very_sure"),
    summary_ci=("sure",),
    compared=("sure", "very_sure"),
    panels=("very_sure", "sure"),
    applies=ToyModule.applies,
    measurer=ToyModule.measurer,
    comparer=ToyModule.comparer,
    doc=ToyModule.doc,
    answers=ToyModule.answers,
    headline=lambda data, b: f"toy headline of {b}",
    finding=lambda data, b, points: f"toy finding of {b}: {len(points)} points",
    note="toy note above the answers",
    caption="toy figure caption",
    examples="toy: y as in winobias",
)


# ---------------------------------------------------------------- the stages, with the toy declared
@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory, data_dir):
    """winobias scored by two of the authors' released runs, through prepare, metrics, compare, summary and report,
    with the toy protocol declared beside the others."""
    from gece.cli import main

    root = tmp_path_factory.mktemp("toy")
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    refs = params["references"][:2]
    params |= {"models": [], "references": refs, "benchmarks": {"winobias": {}}}
    params["registry"] = {m: params["registry"][m] for m in refs}
    params["ablate"]["special_tokens"] = {}
    params["ablate"]["prompts"] = {}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (root / "data").symlink_to(data_dir, target_is_directory=True)
    (root / "artifacts" / "scores").mkdir(parents=True)
    handlers = list(logging.getLogger().handlers)
    with pytest.MonkeyPatch.context() as mp, contextlib.chdir(root):
        mp.setattr(declarations, "PROTOCOLS", (*declarations.PROTOCOLS, TOY))
        try:
            for argv in (
                ["prepare", "--benchmark", "winobias"],
                ["metrics", "--benchmark", "winobias"],
                ["compare", "--benchmark", "winobias", "--out", "reports/compare/winobias.json"],
                ["summary", "--out", "reports/summary.json"],
                ["report"],
            ):
                assert main(["-q", *argv]) == 0, argv
        finally:
            logging.getLogger().handlers[:] = handlers
    return root, refs


def test_the_toy_protocol_is_in_the_metrics_compare_and_summary(toy_tree):
    root, refs = toy_tree
    block = json.loads((root / "reports/metrics/winobias" / f"{refs[0]}.json").read_text())["toy"]
    assert block["n_pairs"] == 771 and block["sure_ci_low"] <= block["sure"] <= block["sure_ci_high"]
    (pair,) = json.loads((root / "reports/compare/winobias.json").read_text())["pairs"]
    assert list(pair["metrics"]) == ["sure", "very_sure"]  # the toy's numbers, not the metrics of p
    assert pair["metrics"]["sure"]["a"] == pytest.approx(block["sure"])
    summary = json.loads((root / "reports/summary.json").read_text())
    run = summary["runs"]["winobias"][refs[0]]
    assert run == {"n_pairs": 771, "sure": block["sure"], "sure_ci_low": block["sure_ci_low"]} | {
        "sure_ci_high": block["sure_ci_high"],
        "very_sure": block["very_sure"],
    }
    assert set(summary["compare"]["winobias"]) == {"sure_significant", "very_sure_significant"}


def test_the_toy_protocol_is_on_the_page(toy_tree):
    root, _ = toy_tree
    page = (root / "reports/index.html").read_text(encoding="utf-8")
    assert "toy note above the answers" in page and "toy: mean confidence" in page
    assert 'id="toy_winobias"' in page and "toy figure caption" in page and "toy finding of winobias" in page
    assert 'id="calibration_winobias"' not in page  # the protocol's figure instead of the calibration figure
    assert (root / "reports/tables/toy.md").read_text(encoding="utf-8").startswith("# Toy protocol: how sure")
