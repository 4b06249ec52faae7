"""Readings of the pronoun-gender block (gece.report.readings) and the groups stage's protocols: each declared once,
and the report takes what it shows from the declaration. A toy reading added in one place reaches the summary, the
tables and the page's headings; the groups stage's protocols are the ones params.yaml may name."""

from __future__ import annotations

import typing
from dataclasses import replace

import pytest

from gece.catalog.groupings import GROUP_PROTOCOLS, GroupProtocol
from gece.pipeline import groups as groups_stage
from gece.report import findings, readings
from gece.report import tables as report_tables
from gece.report.readings import IDENTITY, PRONOUN_GENDER, READINGS, reading_of

from .test_constant_y import data  # noqa: F401  (the fixture: wb with varying labels, cp with y = 1)


def test_each_benchmark_has_the_reading_its_labels_call_for(data):  # noqa: F811
    assert reading_of(data, "wb") is PRONOUN_GENDER
    assert reading_of(data, "cp") is IDENTITY
    assert readings.calibrated(data) == ["wb"]
    assert [r.name for r in READINGS] == ["pronoun_gender", "identity"]
    assert len({r.name for r in READINGS}) == len(READINGS)


def test_a_reading_decides_the_summary_keys_and_names(data):  # noqa: F811
    out = findings.summary(data)
    assert set(out["runs"]["wb"]["m1"]) == set(readings.HEADLINE)
    assert set(out["runs"]["cp"]["m1"]) >= {"stereotype_share", "shortfall", "shortfall_gender"}
    assert "shortfall_significant" in out["compare"]["cp"] and "ece_significant" in out["compare"]["wb"]
    assert "cp" not in out.get("calibration", {}) and "wb" in out["calibration"]


TOY = replace(
    PRONOUN_GENDER,
    name="toy",
    claims=lambda d, b: b == "wb",
    calibration=False,
    heading="toy: read as a toy",
    run_summary=lambda rep: {"toy_n": rep.get("n")},
    renamed={"ece": "toy_ece"},
)


def test_a_toy_reading_declared_once_reaches_the_summary_and_the_tables(data, monkeypatch):  # noqa: F811
    """One entry in READINGS (and its module, docs and this test): no other file names it."""
    monkeypatch.setattr(readings, "READINGS", (*READINGS, TOY))
    assert reading_of(data, "wb") is TOY and reading_of(data, "cp") is IDENTITY
    out = findings.summary(data)
    assert out["runs"]["wb"]["m1"] == {"toy_n": data.metrics[("wb", "m1")]["n"]}
    assert "toy_ece_significant" in out["compare"]["wb"]
    assert "wb" not in out.get("calibration", {})  # its ECE is no calibration: no calibration summary
    docs = {doc.name: doc for doc in report_tables.build_tables(data)}
    overall = [t.heading for t in docs["overall"].tables]
    assert any(h.startswith("wb (") and h.endswith("; toy: read as a toy") for h in overall), overall
    assert not any(t.heading.startswith("wb") for t in docs["calibration"].tables)
    assert not any(t.heading.startswith("wb") for t in docs["gender_gap"].tables)


def test_the_groups_stage_declares_every_protocol_params_may_name():
    assert tuple(groups_stage.TARGETS) == GROUP_PROTOCOLS == typing.get_args(GroupProtocol)
    assert [name for name, t in groups_stage.TARGETS.items() if t.labels] == ["identity"]
    assert [name for name, t in groups_stage.TARGETS.items() if t.soft] == ["soft"]


@pytest.mark.parametrize("name", GROUP_PROTOCOLS)
def test_a_group_target_is_none_only_without_soft_labels(name):
    import numpy as np

    y = np.array([1.0, 0.0, 1.0])
    declared = groups_stage.TARGETS[name]
    with_soft = declared.target(y, np.array([0.8, 0.2, np.nan]))
    assert with_soft is not None and len(with_soft) == 3
    assert (declared.target(y, None) is None) == declared.soft
