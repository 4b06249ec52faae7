"""``gece import``: a CrowS-Pairs-format file -> a gece benchmark CSV and, optionally, its annotations CSV.

For reading and editing: the pipeline itself reads CrowS-Pairs-format files directly (params.yaml
``benchmarks.<b>.source``). The benchmark CSV keeps every row in file order (so row ``i`` of the output is data
row ``i`` of the input) with columns ``sent_more``, ``sent_less``, ``y`` (1: identity protocol),
``bias_type`` and ``direction``. The annotations CSV has one line per pair and annotator: ``row``,
``annotator``, ``labels`` (a JSON list of bias types, ``[]`` = saw no stereotype).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
from io import StringIO
from pathlib import Path

from gece.io import crows
from gece.io.disk import write_text

log = logging.getLogger("gece")


def _csv(header: list[str], rows) -> str:
    buf = StringIO(newline="")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def import_pairs(source: str | Path, out: str | Path, annotations_out: str | Path | None = None) -> crows.Imported:
    """Convert ``source``; both files are checked before either is written."""
    data = crows.read_crows(source)
    p = data.pairs
    bench = _csv(
        ["sent_more", "sent_less", "y", "bias_type", "direction"],
        zip(p["sent_more"], p["sent_less"], p["y"], p["bias_type"], p["direction"], strict=True),
    )
    a = data.annotations
    labels = _csv(
        ["row", "annotator", "labels"],
        zip(a["row"], a["annotator"], (json.dumps(list(x), ensure_ascii=False) for x in a["labels"]), strict=True),
    )
    write_text(out, bench)
    if annotations_out is not None:
        write_text(annotations_out, labels)
    log.info(
        "%s: %d pairs -> %s%s",
        source,
        len(p),
        out,
        f"; {len(a)} annotation rows -> {annotations_out}" if annotations_out is not None else "",
    )
    if not data.has_annotations:
        log.info("%s: no annotations (every annotation list is empty)", source)
    return data


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "a CrowS-Pairs-format file (CrowS-Pairs, WinoQueer) -> a gece benchmark CSV and its annotations CSV, to read "
    "or edit"
)
EXAMPLES = ("gece import data/crows_pairs/crows_pairs_anonymized.csv crows_pairs.csv --annotations crows_labels.csv",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", type=Path, help="a CrowS-Pairs-format CSV")
    p.add_argument("out", type=Path, help="the gece benchmark CSV to write")
    p.add_argument("--annotations", type=Path, help="also write the per-annotator labels here (CSV)")
    p.set_defaults(outputs={"OUT": "out", "--annotations": "annotations"}, inputs=("source",))


def run(args: argparse.Namespace) -> int:
    import_pairs(args.source, args.out, args.annotations)
    return 0
