"""The models' provenance: what the page lists for each model, from its extract metadata."""

from __future__ import annotations

import json

from gece.io.files.json_reader import flatten
from gece.report.cells import ReportData


def _flatten(obj: object) -> dict[str, str]:
    """:func:`flatten`, each leaf as text (lists as JSON, None as null)."""
    return {
        k: json.dumps(v) if isinstance(v, list) else "null" if v is None else str(v) for k, v in flatten(obj).items()
    }


SAME_FOR_ALL = "every model"  # the heading of the rows every model shares (:func:`shared`)


def model_provenance(data: ReportData) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per model: (key, value) rows from the extract metadata (``ExtractMeta``: no timings); a value
    that differs between benchmarks is listed per benchmark. The ``benchmark`` key, each benchmark's own name,
    is no row."""
    models: dict[str, dict[str, dict[str, str]]] = {}
    for b in data.benchmarks:
        for m in data.runs.get(b, []):
            if (b, m) in data.meta:
                models.setdefault(m, {})[b] = _flatten(data.meta[(b, m)])
    out = []
    for m, per_bench in models.items():
        keys = [k for k in dict.fromkeys(k for flat in per_bench.values() for k in flat) if k != "benchmark"]
        rows = []
        for k in keys:
            values = {b: flat.get(k, "–") for b, flat in per_bench.items()}
            distinct = set(values.values())
            rows.append(
                (k, distinct.pop() if len(distinct) == 1 else "; ".join(f"{b}: {v}" for b, v in values.items()))
            )
        out.append((m, rows))
    return out


def shared(provs: list[tuple[str, list[tuple[str, str]]]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """:func:`model_provenance` with the rows that every model of several has alike (the same key and value: the
    prepared data's hashes, the libraries, the rules) listed once, first, under :data:`SAME_FOR_ALL`."""
    if len(provs) < 2:
        return provs
    common = set.intersection(*(set(rows) for _, rows in provs))
    first = [row for row in provs[0][1] if row in common]
    return [(SAME_FOR_ALL, first)] + [(m, [row for row in rows if row not in common]) for m, rows in provs]
