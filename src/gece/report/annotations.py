"""The annotators' tables (``reports/tables/annotations.md`` and its section of the page) from the
annotate stage's reports (``reports/annotations/<b>.json``, ``gece.io.schemas.annotation_report.AnnotationReport``).

Two tables: agreement (pairs annotated, annotators, share of labels naming the writer's bias type,
Krippendorff's alpha and Fleiss' kappa on the binary and the nominal coding, the median annotator's
agreement with the majority) and vote shares (pairs by how many of their annotators recognised the
writer's bias type). Every cell remembers its file and JSON pointer, like the other tables.
"""

from __future__ import annotations

from collections.abc import Mapping

from gece.io.paths import report_layout
from gece.report.cells import Cell, Column, Row, Table, TableDoc, ptr

AGREEMENT = (  # (label, JSON pointer parts, digits)
    ("pairs", ("n_pairs",), 0),
    ("annotated", ("n_annotated",), 0),
    ("annotators", ("n_annotators",), 0),
    ("support", ("support_rate",), 3),
    ("α binary", ("alpha", "binary"), 3),
    ("α nominal", ("alpha", "nominal"), 3),
    ("κ binary", ("kappa", "binary"), 3),
    ("κ nominal", ("kappa", "nominal"), 3),
    ("median agreement with the majority", ("annotator_agreement", "median"), 3),
)


def _get(doc: Mapping, parts: tuple[str, ...]):
    for p in parts:
        if not isinstance(doc, Mapping) or doc.get(p) is None:
            return None
        doc = doc[p]
    return doc


def _vote_keys(reports: Mapping[str, Mapping]) -> list[str]:
    """Every ``k/n`` of the reports, by n then k."""
    keys = {k for r in reports.values() for k in r.get("vote_shares", {})}
    return sorted(keys, key=lambda s: (int(s.split("/")[1]), int(s.split("/")[0])))


def annotations_doc(reports: Mapping[str, Mapping]) -> TableDoc:
    """The agreement and vote-share tables of ``reports`` (benchmark -> AnnotationReport as a dict)."""
    columns = [Column(label, label, None, digits) for label, _, digits in AGREEMENT]
    rows = []
    for b, rep in reports.items():
        cells = [
            Cell(value=v, ref={"value": ptr(*parts)} if v is not None else {})
            for _, parts, _ in AGREEMENT
            for v in [_get(rep, parts)]
        ]
        if not rep.get("n_annotated"):
            cells[3].note = "(no annotations)"
        rows.append(Row([b], cells, report_layout.annotation_file(b)))
    tables = [Table("Agreement", ["benchmark"], columns, rows)] if rows else []
    keys = _vote_keys(reports)
    annotated = {b: r for b, r in reports.items() if r.get("vote_shares")}
    if annotated:
        vote_rows = [
            Row(
                [b],
                [Cell(value=r["vote_shares"].get(k), ref={"value": ptr("vote_shares", k)}) for k in keys],
                report_layout.annotation_file(b),
            )
            for b, r in annotated.items()
        ]
        tables.append(
            Table(
                "Vote shares",
                ["benchmark"],
                [Column(k, k, None, 0) for k in keys],
                vote_rows,
                note="pairs by the number of their annotators who recognised the writer's bias type (k of n)",
            )
        )
    return TableDoc(
        "annotations",
        "Annotators",
        "Per-annotator labels (CrowS-Pairs' validation: five annotators per pair name the bias types they see). "
        "*support*: the share of labels that name the writer's bias type. α: Krippendorff's alpha (nominal), "
        "κ: Fleiss' kappa, on the binary coding (recognises the writer's bias type or not) and on the nominal "
        "one (the label set as a category). When most labels fall in one class (most annotators recognise the "
        "writer's bias type), the binary α and κ stay low even where raw agreement is high (the prevalence "
        "effect). *median agreement with the majority*: the median over "
        "annotators of the share of their pairs where their binary label equals the majority's "
        "(`reports/annotations/<benchmark>.json`; docs/annotations.md).",
        tables,
        "" if tables else "no annotation reports (reports/annotations/) found",
    )
