"""What a protocol declares: one measurement of a benchmark beside the pronoun-gender metrics every run gets, with
its own block of numbers, its keys in ``reports/summary.json``, its pairwise comparison, its page and its answers.

The declarations are :data:`gece.protocols.declarations.PROTOCOLS` (one module per protocol,
``gece/protocols/<name>.py``, and one :class:`Protocol` entry); the stages loop over them and name none: metrics
writes each run's block, for the protocol that applies to the benchmark's params.yaml entry, under the protocol's
name in
``reports/metrics/<b>/<m>.json``, compare tests the protocol's numbers pairwise, and summary and report find the
protocol of a benchmark by the block its runs' reports carry (:func:`claimed`), so the report needs no params.yaml.
The report's code sits below the protocols' (``tests/test_stage_deps.py``, LAYERS): it reads the declarations from
:attr:`gece.report.cells.ReportData.protocols`, which the stage that loads the reports fills in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gece.catalog.metric_defs import Metric
from gece.io.settings.sections import BenchmarkSpec, MetricsParams
from gece.report.cells import ReportData, TableDoc
from gece.stats.ablation import Measure


@dataclass(frozen=True)
class Protocol:
    """One protocol's declaration (the fields, then the hooks the stages call).

    - ``name``: its block's key in a run's metrics report, its table page and the kind of its first-screen figure;
      ``title``: its page's title.
    - ``metrics``: every number of its block (:class:`gece.catalog.metric_defs.Metric`: label, worse end,
      interval).
    - ``summary``: a run's keys in ``reports/summary.json`` (``summary_ci``: those given with their interval).
    - ``compared``: the numbers the compare stage tests between every two runs (Holm's family of a pair), and
      ``panels`` those the first screen draws (a forest plot with the compact letter display of those tests).
    - ``labels``: what the per-benchmark metric tables call a pronoun-gender metric on its benchmarks;
      ``examples``: what y is, for the confidently wrong pairs; ``note``: the first screen's line above its
      answers; ``caption``: its figure's caption.
    - ``applies``: whether it measures a benchmark (its params.yaml entry); ``reads``: the files besides the
      benchmark's pairs and scores that its measurer and comparer read, from the entry (declared by the metrics
      and compare stages: ``gece.protocols.declarations.benchmark_reads``).
    - ``measurer``: from the entry, the prepared pairs (indexed by pair id) and the metrics settings, the function
      that turns a run's scores into its block; ``comparer`` likewise (with the draws and the seed) the
      :data:`gece.stats.ablation.Measure` of the compare stage.
    - ``doc``: its page (a :class:`gece.report.cells.TableDoc`); ``answers``: its first-screen sentences, one per
      run (label, text); ``headline``: its line of ``gece summary``'s answers table; ``finding``: its figure's
      finding in one sentence (from the figure's points).
    """

    name: str
    title: str
    metrics: tuple[Metric, ...]
    summary: tuple[str, ...]
    summary_ci: tuple[str, ...]
    compared: tuple[str, ...]
    panels: tuple[str, ...]
    applies: Callable[[BenchmarkSpec], bool]
    measurer: Callable[[BenchmarkSpec, pd.DataFrame, MetricsParams], Callable[[pd.DataFrame], dict]]
    comparer: Callable[[BenchmarkSpec, pd.DataFrame, MetricsParams, int, int], Measure]
    doc: Callable[[ReportData], TableDoc]
    answers: Callable[[ReportData], list[tuple[str, str]]]
    headline: Callable[[ReportData, str], str]
    finding: Callable[[ReportData, str, list], str]
    note: str = ""
    caption: str = ""
    examples: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    reads: Callable[[BenchmarkSpec], list[Path]] = lambda entry: []

    @property
    def metric(self) -> dict[str, Metric]:
        """Its numbers by key."""
        return {m.key: m for m in self.metrics}

    def run_summary(self, block: dict) -> dict:
        """A run's keys in ``reports/summary.json`` from its block: :attr:`summary`, each of :attr:`summary_ci`
        followed by its interval."""
        out: dict = {}
        for key in self.summary:
            out[key] = block.get(key)
            if key in self.summary_ci:
                out |= {f"{key}_ci_{end}": block.get(f"{key}_ci_{end}") for end in ("low", "high")}
        return out


def claimed(data: ReportData) -> dict[str, Protocol]:
    """Benchmark -> the protocol whose block its runs' metrics reports carry, in page order."""
    out = {}
    for b in data.benchmarks:
        reps = [data.metrics.get((b, m)) or {} for m in data.runs.get(b, [])]
        found = next((p for p in data.protocols if any(p.name in rep for rep in reps)), None)
        if found is not None:
            out[b] = found
    return out


def benchmarks_of(data: ReportData, name: str) -> list[str]:
    """The benchmarks of the protocol called ``name``, in page order."""
    return [b for b, p in claimed(data).items() if p.name == name]


def by_name(data: ReportData, name: str) -> Protocol | None:
    """The declared protocol called ``name`` (a first-screen figure's kind), or None."""
    return next((p for p in data.protocols if p.name == name), None)
