"""The annotators' tables (gece.report.annotations): every cell is its JSON value; names are escaped."""

from __future__ import annotations

from gece.report.annotations import annotations_doc
from gece.report.cells import resolve
from gece.report.markdown import doc_markdown

CROWS = {
    "benchmark": "crows_pairs",
    "rule": "majority",
    "tie": "writer",
    "n_pairs": 1505,
    "n_annotated": 1505,
    "n_annotators": 287,
    "n_labels": 7525,
    "support_rate": 0.8027906976744186,
    "n_hard": {"1": 1344, "0": 161, "tie": 0, "none": 0},
    "annotator_agreement": {
        "n": 287,
        "min": 0.0,
        "q25": 0.8,
        "median": 0.8947368421052632,
        "q75": 1.0,
        "max": 1.0,
        "mean": 0.83,
    },
    "vote_shares": {"0/5": 10, "1/5": 31, "2/5": 120, "3/5": 236, "4/5": 478, "5/5": 630},
    "alpha": {"binary": 0.12463262048954782, "nominal": 0.6339410032449302, "items": 1505, "reason": None},
    "kappa": {"binary": 0.12451627713767244, "nominal": 0.6338923510656698, "items": 1505, "reason": None},
    "reason": None,
}
NONE = {
    **CROWS,
    "benchmark": "a|b",
    "n_pairs": 10,
    "n_annotated": 0,
    "n_annotators": 0,
    "n_labels": 0,
    "support_rate": None,
    "annotator_agreement": None,
    "vote_shares": {},
    "alpha": {"binary": None, "nominal": None, "items": 0, "reason": "none"},
    "kappa": {"binary": None, "nominal": None, "items": 0, "reason": "none"},
    "reason": "none",
}


def test_cells_are_their_json_values():
    reports = {"crows_pairs": CROWS, "a|b": NONE}
    doc = annotations_doc(reports)
    agreement, votes = doc.tables
    for row in agreement.rows + votes.rows:
        for cell in row.cells:
            if not cell.ref:  # a null (its parent is null too)
                assert cell.value is None
                continue
            assert cell.value == resolve(reports[row.label[0]], cell.ref["value"])
    assert [r.label[0] for r in votes.rows] == ["crows_pairs"]  # no vote shares without annotations
    md = doc_markdown(annotations_doc(reports))
    assert "| crows_pairs | 1505 | 1505 | 287 | 0.803 | 0.125 | 0.634 | 0.125 | 0.634 | 0.895 |" in md
    assert "| crows_pairs | 10 | 31 | 120 | 236 | 478 | 630 |" in md
    assert "| a\\|b | 10 | 0 | 0 | – (no annotations) |" in md


def test_no_reports():
    assert "Not available: no annotation reports" in doc_markdown(annotations_doc({}))
