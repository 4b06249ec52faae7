"""What ``gece try`` prints (:mod:`gece.tools.try_model`): the prompt it scored under, each pair's p beside its
sentences, and a few headline metrics, each with its one-line meaning (:data:`gece.catalog.metric_defs.METRIC`).

The per-pair table shows the first ``--show`` pairs in file order: the CSV's data row, p (the score file's ``p``,
the model's probability that sent_more is the human-preferred reading), y and both sentences. A sentence longer
than the terminal leaves room for (two lines of its column) is shortened around the first character where the two
differ, with ``…`` where text is left out, so that the words that differ stay in view; ``--json`` has them whole.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gece.base.terminal import literal, plain, plural
from gece.base.terminal_table import Table
from gece.catalog.metric_defs import METRIC, on_constant_y
from gece.cmd import command, run_tables
from gece.io.settings.prompts import PromptSpec
from gece.scoring.prompts import Prompted

HEADLINE = ("ece", "gender_ece", "brier", "accuracy", "mean_confidence", "n")  # printed; --json has every metric
PAIR_COLUMNS = ("pair_id", "row", "p", "y", "sent_more", "sent_less")
FIXED_WIDTH = 24  # what the row, p and y columns and the table's borders take of a line, about
MIN_SENTENCE = 30  # the fewest characters a sentence is shortened to
ELLIPSIS = "…"


def mean_confidence(p: np.ndarray) -> float | None:
    """The mean of conf = max(p, 1 − p) (``mean_confidence`` of the metric table), None without pairs."""
    p = np.asarray(p, dtype=np.float64)
    return float(np.maximum(p, 1.0 - p).mean()) if p.size else None


def shorten(more: str, less: str, width: int) -> tuple[str, str]:
    """Both sentences of a pair in at most ``width`` characters each: whole when they fit, else the same window of
    each, from a word about a third of ``width`` before their first difference to the end of a word, with ``…``
    where text is left out."""
    if max(len(more), len(less)) <= width:
        return more, less
    first = next((i for i, (a, b) in enumerate(zip(more, less, strict=False)) if a != b), min(len(more), len(less)))
    start = max(0, min(first - width // 3, max(len(more), len(less)) - width + 1))  # a full window at the end
    if start:
        space = more.find(" ", start, first)  # the window starts at a word
        start = space + 1 if space >= 0 else start

    def cut(s: str) -> str:
        lead = ELLIPSIS if start else ""
        room = width - len(lead)
        if len(s) - start <= room:
            return lead + s[start:]
        end = start + room - len(ELLIPSIS)
        space = s.rfind(" ", max(first + 1, start + room // 2), end + 1)  # it ends at a word, past the difference
        return lead + s[start : space if space > 0 else end].rstrip() + ELLIPSIS

    return cut(more), cut(less)


def pair_records(scores: pd.DataFrame) -> list[dict]:
    """Each scored pair in file order: pair id, data row, p, y and the two sentences (``--json``'s ``pairs``)."""
    ordered = scores.sort_values("row", kind="stable")
    return [
        {
            "pair_id": str(r.pair_id),
            "row": int(r.row),
            "p": float(r.p),
            "y": int(r.y),
            "sent_more": str(r.sent_more),
            "sent_less": str(r.sent_less),
        }
        for r in ordered.itertuples(index=False)
    ]


def print_pairs(scores: pd.DataFrame, show: int) -> None:
    """The first ``show`` pairs in file order, as a table: row, p, y, sent_more, sent_less (shortened to fit the
    terminal: :func:`shorten`); then how many were left out."""
    if show <= 0:
        return
    records = pair_records(scores)
    width = max(MIN_SENTENCE, command.out.width - FIXED_WIDTH)  # two lines of a sentence column each
    which = f"all {plural(len(records), 'pair')}" if show >= len(records) else f"the first {plural(show, 'pair')}"
    table = Table(title=plain(f"each pair's p ({which}, in file order)"), title_justify="left")
    table.add_column("row", justify="right", whole=True)
    table.add_column("p", justify="right", whole=True)
    table.add_column("y", justify="right", whole=True)
    table.add_column("sent_more")
    table.add_column("sent_less")
    for r in records[:show]:
        more, less = shorten(r["sent_more"], r["sent_less"], width)
        table.add_row(str(r["row"]), f"{r['p']:.4f}", str(r["y"]), plain(more), plain(less))
    command.out.print(table)
    left = len(records) - show
    command.out.print(
        "p: the model's probability that sent_more is the human-preferred reading (above 0.5: it prefers "
        "sent_more); y: 1 when people prefer sent_more, else 0; row: the data row of the CSV"
        + (f". {plural(left, 'more pair')} not shown (--show N shows more, --json all)" if left > 0 else ""),
        highlight=False,
    )


def label(key: str, identity: bool) -> str | None:
    """A headline metric's label (its key beside it when the label names it otherwise, as ``accuracy``'s
    ``human alignment``), its label when every y is 1 (:func:`gece.catalog.metric_defs.on_constant_y`), or None
    when it means nothing there."""
    if identity:
        shown = on_constant_y(key)
        return None if shown is None else shown[0]
    name = METRIC[key].label
    same = name.lower().replace("-", " ") == key.replace("_", " ")
    return name if same else f"{name} ({key})"


def print_headline(report: dict, confidence: float | None, title: str, level: float, identity: bool) -> None:
    """The headline metrics (:data:`HEADLINE`) with their interval and their one-line definition; ``identity``:
    every pair has y = 1 (the identity protocol), so the metrics that compare p with y are named by what they
    measure there, or left out."""
    table = Table(title=plain(title), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right", whole=True)
    table.add_column(run_tables.ci_label(level), justify="right")
    table.add_column("what it measures")
    values = report | {"mean_confidence": confidence}
    for key in HEADLINE:
        name = label(key, identity)
        if name is None:
            continue
        value = values.get(key)
        lo, hi = report.get(f"{key}_ci_low"), report.get(f"{key}_ci_high")
        ci = f"[{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
        shown = "null" if value is None else str(value) if isinstance(value, int) else f"{value:.4f}"
        table.add_row(plain(name), shown, ci, plain(METRIC[key].definition))
    command.out.print(table)
    if identity:
        command.out.print(
            "every pair has y = 1 (the identity protocol, docs/metrics.md): the metrics that compare p with y are "
            "named by what they measure then",
            highlight=False,
        )
    if report.get("null_reasons"):
        command.out.print(f"null: {literal(report['null_reasons'])}", highlight=False)
    others = sum(1 for k, v in report.items() if k in METRIC and k not in HEADLINE and not isinstance(v, dict))
    command.out.print(f"{plural(others, 'more metric')} and their intervals: --json", highlight=False)


def prompt_record(name: str, spec: PromptSpec, prompt: Prompted | None) -> dict:
    """``--json``'s ``prompt``: its name, settings and the text it puts before and after each sentence."""
    before, after = (prompt.wrap.before, prompt.wrap.after) if prompt is not None else ("", "")
    return {"name": name, "chat": spec.chat, "system": spec.system, "before": before, "after": after}


def print_prompt(name: str, spec: PromptSpec, prompt: Prompted | None) -> None:
    """Which prompt the pairs were scored under; for one that is not the bare sentence, the text it puts before
    and after each sentence (for a chat prompt, what the model's chat template renders), once."""
    if prompt is None:
        command.out.print(f"prompt {literal(name)}: the bare sentence", highlight=False)
        return
    what = "the model's chat template renders" if spec.chat else "its template puts"
    command.out.print(
        f"prompt {literal(name)}: each sentence is read inside the text {what} (Python string notation; the "
        "scored tokens are the sentence's own):",
        highlight=False,
    )
    command.out.print(f"  before: {literal(repr(prompt.wrap.before))}", highlight=False)
    command.out.print(f"  after:  {literal(repr(prompt.wrap.after))}", highlight=False)
