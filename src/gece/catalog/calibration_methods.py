"""The post-hoc calibration methods, each name written once.

:data:`CALIBRATION_METHODS` lists them in their order everywhere (params.yaml's default, the reports, the
tables and figures); params.yaml's validation, the CLI's choices, the calibrators
(``gece.stats.calibration.CALIBRATORS``) and the schema columns (``CalibratedRow``, the method literals)
derive from it. Kept apart from the metric table (:mod:`gece.catalog.metric_defs`) so that the settings
(:mod:`gece.io.settings.params`), which every stage imports, import no metric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class CalibrationMethod:
    """A post-hoc calibration method (``gece.stats.calibration`` fits it): its name in params.yaml, the
    CLI, the reports and the column names (``split_<name>``), a label and a one-line definition."""

    name: str
    label: str
    definition: str


CALIBRATION_METHODS: tuple[CalibrationMethod, ...] = (
    CalibrationMethod("beta", "beta calibration", "p' = 1 / (1 + 1 / (e^c · p^a / (1 − p)^b)) (Kull et al. 2017)"),
    CalibrationMethod("isotonic", "isotonic regression", "p' = the non-decreasing step function of p fitted by PAVA"),
    CalibrationMethod("temperature", "temperature scaling", "p' = σ(logit(p) / T)"),
    CalibrationMethod("platt", "Platt scaling", "p' = σ(a · logit(p) + b)"),
    CalibrationMethod(
        "histogram", "histogram binning", "p' = mean of y over the calibration pairs in p's bin (equal-mass bins)"
    ),
)
METHOD_NAMES: tuple[str, ...] = tuple(m.name for m in CALIBRATION_METHODS)
# Literal[METHOD_NAMES] is Literal["beta", "isotonic", ...] (a tuple subscript spreads)
MethodName = Literal[METHOD_NAMES]  # type: ignore[valid-type]
# the reason of a fit to pairs of one label (calibration.one_label_reason); the report recognises it
ONE_LABEL = "a calibration map needs both labels"
