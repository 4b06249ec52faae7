"""The report's tables, in page order.

The table builders (:mod:`gece.report.metric_tables`, :mod:`gece.report.stat_tables`,
:mod:`gece.report.ablation_tables`, :mod:`gece.report.calibration_tables`, :mod:`gece.report.compare_tables`,
:mod:`gece.report.group_tables`, :mod:`gece.report.annotations`, each reading's page,
:attr:`gece.report.readings.Reading.doc`, and each protocol's, :attr:`gece.report.protocol.Protocol.doc`) turn the
JSON reports (a :class:`ReportData`) into rows of cells that remember where each number came from (file and JSON
pointer); :mod:`gece.report.markdown` and :mod:`gece.report.html` both render those rows, so the two never disagree
and a test can check every value against its JSON.

Every builder is pure: the report stage (:mod:`gece.pipeline.report`) reads the JSON files into a
``ReportData``, draws the figures, and writes what they return. A row's source is relative to the reports
directory (:mod:`gece.io.paths.layout`), the same string the stage reads from (so a test can check every value
against its file).
"""

from __future__ import annotations

from gece.report.ablation_tables import binning_table, neutral_table, sample_size_table, special_tokens_table
from gece.report.annotations import annotations_doc
from gece.report.calibration_tables import calibration_table
from gece.report.cells import ReportData, TableDoc
from gece.report.compare_tables import agreement_table, compare_table
from gece.report.group_tables import groups_doc
from gece.report.metric_tables import grouped_table, human_gender_table, overall_table, paper_table
from gece.report.readings import READINGS, reading_of
from gece.report.stat_tables import estimator_table, gender_gap_table


def build_tables(data: ReportData) -> list[TableDoc]:
    """Every table of the report, in page order: each reading's page before the overall metrics
    (:data:`gece.report.readings.READINGS`), each protocol's after them; the engine
    agreement beside the runs' metrics, where a run has one."""
    agreement = agreement_table(data)
    return [
        *(r.doc(data) for r in READINGS if r.doc is not None),
        overall_table(data),
        *(p.doc(data) for p in data.protocols),
        *([agreement] if agreement else []),
        paper_table(data),
        gender_gap_table(data),
        human_gender_table(data),
        grouped_table(data),
        neutral_table(data),
        sample_size_table(data),
        estimator_table(data),
        binning_table(data),
        calibration_table(data),
        special_tokens_table(data),
        compare_table(data),
        groups_doc(data.groups, {b for b in data.groups if not reading_of(data, b).calibration}),
        annotations_doc(data.annotations),
    ]
