"""The confidently wrong examples: the pairs each run gets most confidently wrong, and their tables.

:func:`confident_mistakes` picks them from a run's score rows (the report stage stores them in the
``ReportData``); :func:`examples_docs` turns them into one ``examples_<benchmark>`` table per benchmark. A benchmark
whose sentences may not be redistributed (``ReportData.hidden``: SynthBias) gets the pair ids and target words only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gece.report.cells import Cell, Column, ReportData, Row, Table, TableDoc, shown_text
from gece.report.protocol import claimed

EXAMPLES_PER_RUN = 5
EXAMPLE_COLUMNS = ("pair_id", "sent_more", "sent_less", "targets_more", "targets_less", "y", "p")


def confident_mistakes(rows: Iterable[Mapping], k: int | None = None) -> list[dict]:
    """The ``k`` pairs (default ``EXAMPLES_PER_RUN``) of one run where the model is most confident against y
    (:data:`WHAT_Y` says what y is in each kind of benchmark): the prediction (``p > 0.5``: ``sent_more``) disagrees
    with ``y``; ranked by the confidence in it, max(p, 1 − p), highest first, ties by ``pair_id``. Exact ties
    (p = 0.5) predict nothing and are left out. ``rows``: score rows (at least ``EXAMPLE_COLUMNS``)."""
    wrong = []
    for r in rows:
        p, y = float(r["p"]), int(r["y"])
        if p == 0.5 or (p > 0.5) == (y == 1):
            continue
        wrong.append(
            {
                "pair_id": str(r["pair_id"]),
                "sent_more": str(r["sent_more"]),
                "sent_less": str(r["sent_less"]),
                "targets_more": [str(t) for t in r["targets_more"]],
                "targets_less": [str(t) for t in r["targets_less"]],
                "y": y,
                "p": p,
                "confidence": max(p, 1.0 - p),
            }
        )
    wrong.sort(key=lambda r: (-r["confidence"], r["pair_id"]))
    return wrong[: EXAMPLES_PER_RUN if k is None else k]


# what y means in each kind of benchmark, and so what a confident mistake is (SynthBias's by its mode; a protocol's
# benchmark: the protocol's, gece.report.protocol.Protocol.examples)
WHAT_Y: dict[str | None, str] = {
    None: "y = 1 when people prefer sent_more (the male variant in the gender benchmarks, the stereotypical sentence "
    "in the CrowS-Pairs-format ones) and p is the model's confidence in it, so each row's model prefers the other "
    "variant. A pair that many models get confidently wrong is worth checking for a doubtful human label before "
    "reading it as model bias.",
    "type2": "y = 1 when the occupation the pronoun refers to is male-majority by labour statistics (SynthBias's "
    "construction, not a judgement of people) and p is the model's preference for the male pronoun, so each row's "
    "model prefers the pronoun that does not match the majority gender of that occupation.",
    "type1": "y = 1 for every pair (what the pronoun refers to cannot be resolved: there is nothing to be right about) "
    "and p is the model's preference for the male pronoun, so the rows are where the model most prefers the female "
    "pronoun.",
}


def _what_y(data: ReportData, b: str) -> str:
    """What y is on benchmark ``b`` (:data:`WHAT_Y`, or its protocol's words)."""
    protocol = claimed(data).get(b)
    return protocol.examples if protocol is not None else WHAT_Y.get(data.synthbias.get(b), WHAT_Y[None])


def examples_docs(data: ReportData) -> list[TableDoc]:
    """One ``examples_<benchmark>`` table per benchmark with score files: each run's most
    confidently wrong pairs (:func:`confident_mistakes`), the runs in display order."""
    docs = []
    for b in data.benchmarks:
        models = [m for m in data.runs.get(b, []) if data.examples.get((b, m))]
        if not models:
            continue
        shown = b not in data.hidden
        columns = [
            *(
                [Column("sent_more", "sent_more", None, text=True), Column("sent_less", "sent_less", None, text=True)]
                if shown
                else []
            ),
            Column("targets", "targets", None, text=True),
            Column("y", "y", None),
            Column("p", "p", None, digits=4),
        ]
        rows, seen = [], {}
        for m in models:
            for ex in data.examples[(b, m)]:
                targets = f"{', '.join(ex['targets_more'])} / {', '.join(ex['targets_less'])}"
                rows.append(
                    Row(
                        [m, ex["pair_id"]],
                        [
                            *(
                                [
                                    Cell(shown_text(ex["sent_more"]).strip(" ")),
                                    Cell(shown_text(ex["sent_less"]).strip(" ")),
                                ]
                                if shown
                                else []
                            ),
                            Cell(shown_text(targets).strip(" ")),
                            Cell(ex["y"]),
                            Cell(ex["p"]),
                        ],
                    )
                )
                seen.setdefault(ex["pair_id"], []).append(m)
        shared = sorted(((pid, ms) for pid, ms in seen.items() if len(ms) > 1), key=lambda x: (-len(x[1]), x[0]))
        note = (
            f"{len(models)} model{'s' if len(models) > 1 else ''}, up to {EXAMPLES_PER_RUN} pairs each. "
            + (
                "In the lists of several models: "
                + ", ".join(f"{pid} ({len(ms)} models)" for pid, ms in shared[:8])
                + (f" and {len(shared) - 8} more" if len(shared) > 8 else "")
                + "."
                if shared
                else "No pair is in the lists of two models."
            )
            + (
                ""
                if shown
                else " The sentences are not shown: their licence (CC BY-NC-ND 4.0) allows no copies outside the data; "
                f"look a pair up by its id in artifacts/prepared/{b}.parquet."
            )
        )
        docs.append(
            TableDoc(
                f"examples_{b}",
                f"Confidently wrong pairs: {b}",
                f"For each model, the {EXAMPLES_PER_RUN} pairs where it is most confident against y (from "
                f"`artifacts/scores/<benchmark>/<model>.parquet`): {_what_y(data, b)} "
                "Ranked by that confidence, max(p, 1 − p), ties by pair; exact ties (p = 0.5) are left out. "
                + ("Sentences are shown as one line." if shown else ""),
                [Table(b, ["model", "pair"], columns, rows, note)],
            )
        )
    return docs
