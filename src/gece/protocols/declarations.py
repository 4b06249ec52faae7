"""Every protocol, declared once (:class:`gece.report.protocol.Protocol`): which benchmarks it measures, its block,
its summary keys, its comparison, its page and its answers. The stages loop over :data:`PROTOCOLS` and name none.

**Adding a protocol** is a module beside these (``gece/protocols/<name>.py``: its numbers and hooks), one entry
here, its section in docs/metrics.md and its test (tests/test_protocols.py adds a toy one in those four places and
finds it in ``reports/summary.json`` and on the page).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gece.io.settings.params import params_if_valid
from gece.io.settings.sections import BenchmarkSpec
from gece.protocols import referent, referent_page
from gece.report.protocol import Protocol

PROTOCOLS: tuple[Protocol, ...] = (
    Protocol(
        name=referent.NAME,
        title=referent_page.TITLE,
        metrics=referent.METRICS,
        summary=referent.SUMMARY,
        summary_ci=referent.SUMMARY_CI,
        compared=referent.COMPARED,
        panels=referent.PANELS,
        applies=referent.applies,
        measurer=referent.measurer,
        comparer=referent.comparer,
        doc=referent_page.doc,
        answers=referent_page.answers,
        headline=referent_page.headline,
        finding=referent_page.finding,
        note=referent_page.NOTE,
        caption=referent_page.FIGURE_CAPTION,
        examples=referent_page.EXAMPLES,
        labels=referent_page.LABELS,
        reads=referent.reads,
    ),
)


def of(entry: BenchmarkSpec | None) -> Protocol | None:
    """The protocol that measures a benchmark with params.yaml entry ``entry`` (None: none does, or no entry)."""
    return next((p for p in PROTOCOLS if entry is not None and p.applies(entry)), None)


def benchmark_reads(args: argparse.Namespace) -> list[Path]:
    """The files the protocol of ``--benchmark`` reads (:attr:`Protocol.reads`), for a stage's ``reads(args)``: of
    that benchmark's entry in params.yaml; of every entry's when ``--benchmark`` names none of them (a matrix stage
    declared for any benchmark: ``gece stage-deps``); nothing without --benchmark or a valid params.yaml."""
    params = params_if_valid(args) if getattr(args, "benchmark", None) else None
    if params is None:
        return []
    entries = [params.benchmarks[args.benchmark]] if args.benchmark in params.benchmarks else params.benchmarks.values()
    return [path for entry in entries if (p := of(entry)) is not None for path in p.reads(entry)]
