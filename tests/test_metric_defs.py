"""The metric and calibration-method tables (gece.catalog.metric_defs) are the single source of every
name: the schemas, the computed metrics, params.yaml's validation, the CLI, the calibrators, the
tables, the findings and the page's definitions all derive from them."""

from __future__ import annotations

import html
import inspect
import re
import typing

from gece.catalog import metric_defs
from gece.catalog.calibration_methods import METHOD_NAMES
from gece.catalog.metric_defs import METRIC, METRICS
from gece.io.schemas import calibration_files, metric_reports
from gece.io.settings.params import CalibrateParams
from gece.report import ablation_tables, calibration_tables, findings, metric_tables
from gece.report import cells as report_cells
from gece.report import html as report_html
from gece.report import stat_tables as report_stats
from gece.stats import calibration, metrics


def test_metric_table_names_are_unique_and_complete():
    assert len({m.key for m in METRICS}) == len(METRICS)
    assert len({m.label for m in METRICS}) == len(METRICS)
    assert len(set(METHOD_NAMES)) == len(METHOD_NAMES)
    for m in METRICS:
        assert m.worse in ("high", "low", None) and m.definition and "\n" not in m.definition
    assert all(m.worse is None for m in METRICS if m.signed)


def test_every_metrics_report_field_with_an_interval_is_registered_with_one():
    fields = list(metric_reports.MetricsReport.model_fields)
    with_interval = [k for k in fields if f"{k}_ci_low" in fields and f"{k}_ci_high" in fields]
    assert with_interval == [m.key for m in METRICS if m.interval] == list(metrics.SCALARS)
    assert set(metrics.SIGNED) == {m.key for m in METRICS if m.signed}
    for k in with_interval:
        assert metric_reports.MetricsReport.model_fields[k].description == METRIC[k].definition


def test_every_calibration_method_the_code_fits_is_registered():
    classes = {
        c.name
        for c in vars(calibration).values()
        if inspect.isclass(c) and issubclass(c, calibration.Calibrator) and not inspect.isabstract(c)
    }
    assert classes == set(METHOD_NAMES)
    assert tuple(calibration.CALIBRATORS) == calibration.METHODS == METHOD_NAMES
    assert tuple(calibration.factories()) == METHOD_NAMES
    assert tuple(CalibrateParams().methods) == METHOD_NAMES
    assert typing.get_args(calibration_files.CalibrationMethod) == METHOD_NAMES
    assert typing.get_args(calibration_files.CalibrationBinRecord.model_fields["method"].annotation) == (
        "uncalibrated",
        *METHOD_NAMES,
    )
    assert [k for k in calibration_files.CalibratedRow.model_fields if k.startswith(("split_", "crossfit_"))] == [
        f"{protocol}_{m}" for protocol in ("split", "crossfit") for m in METHOD_NAMES
    ]


def test_the_cli_offers_exactly_the_registered_methods():
    import argparse

    from gece import cli

    assert '"histogram"' not in inspect.getsource(cli)  # no method spelled in the CLI
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    methods = next(a for a in sub.choices["calibrate"]._actions if a.dest == "methods")
    assert tuple(methods.choices) == METHOD_NAMES


# labels a table spells its own way, on purpose (each next to the table that uses it)
OVERRIDES = {
    "PAPER": {"accuracy": "accuracy", "brier": "Brier (p − y)²"},  # beside the paper's Brier: its formula
    "GROUPED": {"ece": "ECE (ungrouped)"},
}


def test_the_tables_list_exactly_the_metric_table_labels_and_worst_ends():
    for module, name in (
        (metric_tables, "OVERALL"),
        (metric_tables, "PAPER"),
        (metric_tables, "HUMAN_GENDER"),
        (metric_tables, "GROUPED"),
        (ablation_tables, "NEUTRAL"),
        (calibration_tables, "CALIBRATION"),
        (ablation_tables, "SPECIAL"),
    ):
        for key, label, worse, _ in getattr(module, name):
            assert label == OVERRIDES.get(name, {}).get(key, METRIC[key].label), (name, key)
            assert worse == METRIC[key].worse, (name, key)
    for key, label, worse in report_stats.GAP_COLUMNS:
        assert worse == METRIC[key].worse
        assert label == {
            "ece_male": "ECE male (predicted)",
            "ece_female": "ECE female (predicted)",
            "ece_true_male": "ECE male (human)",
            "ece_true_female": "ECE female (human)",
        }.get(key, METRIC[key].label)
    assert {k: METRIC[k].label for k in report_stats.ESTIMATORS} | {
        "ece": "ECE (binned)",
        "gender_ece": "Gender-ECE (binned)",
    } == report_stats.ESTIMATOR_LABELS
    assert {k: METRIC[k].label for k in findings.HEADLINE} | {"n": "pairs"} == findings.LABELS
    assert {k for k in findings.HEADLINE if METRIC[k].worse == "low"} == findings.HIGHER_IS_BETTER


def test_the_page_defines_every_metric_with_an_interval_in_the_metric_table_order():
    covered = [k for d in metric_defs.DEFINITIONS for k in d.keys]
    assert all(k in METRIC for k in covered)
    assert {m.key for m in METRICS if m.interval} <= set(covered)
    page = report_html.render_html(report_cells.ReportData(benchmarks=[], runs={}), [], {})
    section = page[page.index('<section id="definitions">') : page.index('<section id="conventions">')]
    titles = [html.unescape(t) for t in re.findall(r"<dt>(.*?)</dt>", section)]
    assert titles == [d.title for d in metric_defs.DEFINITIONS]
