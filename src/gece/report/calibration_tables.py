"""The calibration table: the metrics before and after each post-hoc calibration method.

One table per benchmark and protocol (held-out split, cross-fitting) of ``reports/calibration/``, a row per
model and method; pure, like :mod:`gece.report.metric_tables`, whose metric columns it uses.
"""

from __future__ import annotations

from gece.io.paths import report_layout
from gece.report.cells import (
    Cell,
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    mark_worst,
    metric_cell,
    ptr,
)
from gece.report.metric_tables import CI_NOTE, WITH_CI, metric_columns
from gece.report.readings import bench_title, calibrated

PROTOCOLS = {"split": "held-out split", "crossfit": "cross-fitting"}
CALIBRATION = metric_columns(
    ("ece", "ece_toplabel", "gender_ece", "ece_male", "ece_female", "brier", "accuracy"), ci=WITH_CI
)


def calibration_table(data: ReportData) -> TableDoc:
    tables = []
    for b in calibrated(data):
        models = [m for m in data.runs.get(b, []) if (b, m) in data.calibration]
        for protocol, protocol_label in PROTOCOLS.items():
            present = [m for m in models if protocol in data.calibration[(b, m)]]
            if not present:
                continue
            columns = [Column("status", "status", None)] + [Column(k, label, w) for k, label, w, _ in CALIBRATION]
            rows, sizes = [], set()
            for m in present:
                rep = data.calibration[(b, m)][protocol]
                sizes.add((rep.get("n_fit"), rep.get("n_eval"), rep.get("folds")))
                unc = rep.get("uncalibrated")
                rows.append(
                    Row(
                        [m, "uncalibrated"],
                        [Cell("–")]
                        + [metric_cell(unc, k, protocol, "uncalibrated", ci=ci) for k, _, _, ci in CALIBRATION],
                        report_layout.calibration_file(b, m),
                    )
                )
                for method, mrep in rep.get("methods", {}).items():
                    status = Cell(mrep.get("status"), ref={"value": ptr(protocol, "methods", method, "status")})
                    met = mrep.get("metrics")
                    rows.append(
                        Row(
                            [m, method],
                            [status]
                            + [
                                metric_cell(met, k, protocol, "methods", method, "metrics", ci=ci)
                                for k, _, _, ci in CALIBRATION
                            ],
                            report_layout.calibration_file(b, m),
                        )
                    )
            note = "; ".join(
                (f"{k} folds, " if k else "")
                + f"fitted on {f} and evaluated on {e} pairs"
                + (" (summed over the folds)" if k else "")
                for f, e, k in sorted(sizes, key=str)
            )
            tables.append(
                mark_worst(
                    Table(bench_title(data, b, protocol_label), ["model", "method"], columns, rows, note), data.checks
                )
            )
    return TableDoc(
        "calibration",
        "Calibration before and after",
        "Metrics of the uncalibrated scores and of each post-hoc calibration method on held-out pairs "
        "(`reports/calibration/<benchmark>/<model>.json`): the held-out split fits on one half and evaluates on "
        "the other; cross-fitting evaluates every pair out of fold. Status `degenerate`: the fit collapsed (e.g. "
        f"a constant map); `failed`: no scores (metrics null). {CI_NOTE} Benchmarks with the same label for "
        "every pair (y = 1, the identity protocol) are left out: no map can be fitted to one label, and there is "
        "no calibration to measure.",
        tables,
        "" if tables else "no calibration reports (reports/calibration/) found",
    )
