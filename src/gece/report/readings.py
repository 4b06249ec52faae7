"""How a benchmark's pronoun-gender block reads: each reading declared once.

The metrics stage gives every run of every benchmark the same block of numbers (:mod:`gece.catalog.metric_defs`:
ECE, Gender-ECE, accuracy, Brier, ...). What they measure depends on the benchmark's labels y:

- **pronoun gender** (:data:`PRONOUN_GENDER`): y varies between pairs (a human judgement, or the labour statistics
  on SynthBias type2). ECE is calibration, Gender-ECE the calibration averaged over the predicted genders, and
  every view of calibration applies: calibration maps, binnings, gender gaps, calibration tests, forest plots.
- **identity** (:data:`IDENTITY`, :mod:`gece.report.identity`): y = 1 for every pair (CrowS-Pairs, WinoQueer,
  SynthBias type1). ECE = 1 − mean p, accuracy is the stereotype share; no number is calibration and none ranks
  the runs.

A :class:`Reading` declares which benchmarks it claims (from the reports alone, so the report needs no
params.yaml), whether its ECE measures calibration, what its figures, headings and tables call each number, its
keys in ``reports/summary.json`` and its own page. The report's modules ask :func:`reading_of` and use those
fields; none tests a benchmark's labels or names a reading. A protocol with a block of its own
(:mod:`gece.protocols.declarations`) is shown beside its benchmark's reading.

**Adding a reading**: its module (what it claims, its page), its entry in :data:`READINGS`, its section in
docs/metrics.md and its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gece.catalog.metric_defs import METRIC
from gece.report import identity
from gece.report.cells import ReportData, TableDoc

# a run's keys in reports/summary.json under the pronoun-gender reading
HEADLINE = ("n", "ece", "gender_ece", "macro_ce", "brier", "accuracy")


@dataclass(frozen=True)
class Reading:
    """One reading of the pronoun-gender block (the fields the report's modules use).

    - ``name``: its name; ``claims``: whether it reads benchmark ``b`` of the report data.
    - ``calibration``: its ECE measures calibration and its numbers rank the runs (best and worst marks, the
      calibration, binning, gender-gap and calibration-test tables, the forest plots and the findings on them);
      False: those views leave its benchmarks out.
    - ``ece``: what its ECE is called on its figures and findings; ``heading``: what its benchmarks' table
      headings add (empty: nothing); ``grid_title``: its reliability grid's title, ``{b}`` for the benchmark.
    - ``renamed``: a metric key -> its key in reports/summary.json (the comparison counts, the special-token
      changes); ``run_summary``: a run's keys in reports/summary.json from its metrics report.
    - ``shown``: how a table shows a metric, from its key and the column's label and worse end: (label, worse end),
      or None to leave it out; ``columns``: a named metric table's columns on its benchmarks (None: no table).
    - ``ablation_heading``: what the special-token table of its benchmarks adds to its heading.
    - ``doc``: its own page, before the overall metrics (None: none).
    """

    name: str
    claims: Callable[[ReportData, str], bool]
    calibration: bool
    ece: str
    grid_title: str
    run_summary: Callable[[dict], dict]
    shown: Callable[[str, str, str | None], tuple[str, str | None] | None]
    columns: Callable[[str, list], list | None]
    heading: str = ""
    ablation_heading: str = ""
    renamed: dict[str, str] = field(default_factory=dict)
    doc: Callable[[ReportData], TableDoc] | None = None

    def spec(self, spec: Iterable[tuple]) -> list[tuple]:
        """Column specs (key, label, worse end, ...) as this reading shows them (:attr:`shown`)."""
        return [(k, *shown, *rest) for k, label, worse, *rest in spec if (shown := self.shown(k, label, worse))]

    def key(self, metric: str) -> str:
        """A metric's key in reports/summary.json under this reading."""
        return self.renamed.get(metric, metric)


PRONOUN_GENDER = Reading(
    name="pronoun_gender",
    claims=lambda data, b: True,
    calibration=True,
    ece=METRIC["ece"].label,
    grid_title="{b}: reliability diagrams",
    run_summary=lambda rep: {k: rep.get(k) for k in HEADLINE},
    shown=lambda key, label, worse: (label, worse),
    columns=lambda name, spec: spec,
)

IDENTITY = Reading(
    name="identity",
    claims=identity.claims,
    calibration=False,
    ece=identity.ECE_NAME,
    grid_title="{b}: confidence in the stereotypical sentence (y = 1 for every pair: 1 − mean p, not calibration)",
    run_summary=identity.run_summary,
    shown=identity.shown,
    columns=identity.columns,
    heading=identity.HEADING,
    ablation_heading=identity.ABLATION_HEADING,
    renamed=identity.RENAMED,
    doc=identity.identity_doc,
)

# every reading in page order; the last that claims a benchmark reads it (pronoun gender claims every one)
READINGS: tuple[Reading, ...] = (PRONOUN_GENDER, IDENTITY)


def reading_of(data: ReportData, b: str) -> Reading:
    """The reading of benchmark ``b``: the last of :data:`READINGS` that claims it."""
    return next(r for r in reversed(READINGS) if r.claims(data, b))


def calibrated(data: ReportData) -> list[str]:
    """The benchmarks whose reading's ECE measures calibration, in page order."""
    return [b for b in data.benchmarks if reading_of(data, b).calibration]


def bench_heading(data: ReportData, b: str) -> str:
    """``b (n pairs)``, followed by what its reading adds (:attr:`Reading.heading`)."""
    ns = sorted({data.metrics[(b, m)]["n"] for m in data.runs.get(b, []) if (b, m) in data.metrics})
    return _headed(data, b, f"{b} ({', '.join(map(str, ns))} pairs)" if ns else b)


def bench_title(data: ReportData, b: str, *parts: str) -> str:
    """``b: parts``, followed by what its reading adds."""
    return _headed(data, b, ": ".join((b, *parts)))


def _headed(data: ReportData, b: str, head: str) -> str:
    extra = reading_of(data, b).heading
    return f"{head}; {extra}" if extra else head
