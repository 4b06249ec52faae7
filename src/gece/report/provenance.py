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


def model_provenance(data: ReportData) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per model: (key, value) rows from the extract metadata (``ExtractMeta``: no timings); a value
    that differs between benchmarks is listed per benchmark."""
    models: dict[str, dict[str, dict[str, str]]] = {}
    for b in data.benchmarks:
        for m in data.runs.get(b, []):
            if (b, m) in data.meta:
                models.setdefault(m, {})[b] = _flatten(data.meta[(b, m)])
    out = []
    for m, per_bench in models.items():
        keys = list(dict.fromkeys(k for flat in per_bench.values() for k in flat))
        rows = []
        for k in keys:
            values = {b: flat.get(k, "–") for b, flat in per_bench.items()}
            distinct = set(values.values())
            rows.append(
                (k, distinct.pop() if len(distinct) == 1 else "; ".join(f"{b}: {v}" for b, v in values.items()))
            )
        out.append((m, rows))
    return out
