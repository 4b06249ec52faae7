"""``gece import``: a CrowS-Pairs-format file -> a gece benchmark CSV and, optionally, its annotations CSV.

For reading and editing: the pipeline itself reads CrowS-Pairs-format files directly (params.yaml
``benchmarks.<b>.source``). The benchmark CSV keeps the rows in file order with columns ``sent_more``,
``sent_less``, ``y`` (1: identity protocol), ``bias_type`` and ``direction``; a row that cannot form a pair
(empty, identical or punctuation-only sentences) is left out with a warning naming its line, as ``gece prepare
--crows`` leaves it out, so that ``gece validate`` and ``gece prepare`` accept what is written. The annotations CSV
has one line per pair and annotator: ``row`` (the row of the benchmark CSV written), ``annotator``, ``labels`` (a
JSON list of bias types, ``[]`` = saw no stereotype).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
from io import StringIO
from pathlib import Path

from gece.base.errors import GeceError
from gece.io.files.outputs import write_text
from gece.io.formats import benchmarks, crows

log = logging.getLogger("gece")


def _csv(header: list[str], rows) -> str:
    buf = StringIO(newline="")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def import_pairs(source: str | Path, out: str | Path, annotations_out: str | Path | None = None) -> crows.Imported:
    """Convert ``source``; both files are checked before either is written: what is written is what ``gece
    validate`` and ``gece prepare`` (``--labels``) accept. Rows that cannot form a pair (empty, identical or
    punctuation-only sentences) are left out with a warning, as ``gece prepare --crows`` leaves them out; a file
    with no pair left is an error and nothing is written."""
    data = crows.read_crows(source)
    p, warnings = _scorable(data.pairs, str(source))
    for w in warnings:
        log.warning("%s", w)
    bench = _csv(
        ["sent_more", "sent_less", "y", "bias_type", "direction"],
        zip(p["sent_more"], p["sent_less"], p["y"], p["bias_type"], p["direction"], strict=True),
    )
    new_row = {int(old): new for new, old in enumerate(p["row"], start=1)}  # data row -> row of the output
    a = data.annotations[data.annotations["row"].isin(list(new_row))]
    labels = _csv(
        ["row", "annotator", "labels"],
        zip(
            (new_row[int(r)] for r in a["row"]),
            a["annotator"],
            (json.dumps(list(x), ensure_ascii=False) for x in a["labels"]),
            strict=True,
        ),
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


def _scorable(pairs, source: str):
    """The pairs of a CrowS-Pairs-format file that a gece benchmark CSV can hold (with their 1-based data ``row``)
    and the warnings on the rows left out; a GeceError when a pair would still be refused, or none is left."""
    rows, problems, warnings = benchmarks.check_rows(pairs, source, "keep", imported=True)
    if not problems and not rows.empty:  # what gece validate and gece prepare (no --crows) check besides
        problems = benchmarks.check_rows(rows.drop(columns="row"), source, "keep")[1]
    if problems or rows.empty:
        raise GeceError(
            f"{source}: "
            + (
                f"{len(problems)} problem(s); nothing was written"
                if problems
                else "no pair left: no row can form a pair; nothing was written"
            ),
            problems=problems[: benchmarks.MAX_SHOWN] + benchmarks.more_shown(len(problems)) + warnings,
            hint="a benchmark needs at least one pair of sentences that differ in a word on each side; "
            "rows are numbered from 1 after the header line",
        )
    return rows, warnings


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
