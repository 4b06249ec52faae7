"""SynthBias's referent-resolution protocol in the report: the runs' keys in ``reports/summary.json`` and the
"Referent resolution" tables, from the ``referent`` block of each run's metrics report (:mod:`gece.stats.referent`).

A benchmark is shown here when its runs' metrics reports have that block (``benchmarks.<b>.synthbias:
referent``); no Gender-ECE is given for it (the words that differ are occupations): the group metric is the
top-label ECE by pronoun gender.
"""

from __future__ import annotations

from gece.catalog.metric_defs import REFERENT, REFERENT_HEADLINE, REFERENT_SUMMARY, REFERENT_SUMMARY_CI
from gece.io.paths import report_layout
from gece.report.cells import Column, ReportData, Row, Table, TableDoc, format_bound, mark_worst, metric_cell

BLOCK = "referent"  # the key of the block in reports/metrics/<b>/<m>.json
# the strata table's columns, after the headline table's
STRATA = ("ece_pro", "ece_anti", "ece_first", "ece_second", "accuracy_pro", "accuracy_anti", "accuracy_first",
          "accuracy_second", "over_stereotype")  # fmt: skip


def referent_benchmarks(data: ReportData) -> list[str]:
    """The benchmarks whose runs' metrics reports carry the referent block, in page order."""
    return [b for b in data.benchmarks if any(BLOCK in data.metrics.get((b, m), {}) for m in data.runs.get(b, []))]


def run_summary(rep: dict) -> dict:
    """One run's keys in ``reports/summary.json`` on a referent benchmark:
    :data:`gece.catalog.metric_defs.REFERENT_SUMMARY`,
    and the interval (``<key>_ci_low``/``<key>_ci_high``) of those in ``REFERENT_SUMMARY_CI``; no ``gender_ece``."""
    block = rep[BLOCK]
    out: dict = {}
    for key in REFERENT_SUMMARY:
        out[key] = block.get(key)
        if key in REFERENT_SUMMARY_CI:
            out |= {f"{key}_ci_{end}": block.get(f"{key}_ci_{end}") for end in ("low", "high")}
    return out


def _table(data: ReportData, b: str, keys: tuple[str, ...], heading: str) -> Table:
    columns = [Column(k, REFERENT[k].label, REFERENT[k].worse) for k in keys]
    rows = []
    for m in data.runs.get(b, []):
        rep = data.metrics.get((b, m), {})
        if BLOCK in rep:
            cells = [metric_cell(rep[BLOCK], k, BLOCK, ci=REFERENT[k].interval) for k in keys]
            rows.append(Row([m], cells, report_layout.metrics_file(b, m)))
    return mark_worst(Table(heading, ["model"], columns, rows))


CAPTION = (
    "SynthBias's referent-resolution protocol (type2 sentences, whose pronoun's referent can be resolved): after "
    "the prompt (params.yaml `benchmarks.<b>.prompt`, default \"<sentence> In this sentence, '<pronoun>' refers to "
    'the"), p is the probability of the occupation that is stereotypical for the pronoun, against the other one; '
    "y = 1 when it is the referent (balanced by design: it flips between the he and the she version of a sentence). "
    "The headline is the **top-label ECE**, confidence max(p, 1 − p) in the chosen occupation against correctness, "
    "with the referent accuracy and Brier. Two baselines: always the stereotypical occupation, always the occupation "
    "named last; Δ accuracy − last-mentioned says whether the model beats the second. **ECE by pronoun gender**: "
    "the top-label ECE within the he/him/his and the she/her sentences, and their difference (Gender-ECE is not "
    "given: the words that differ are occupations). UCerF (Wang et al. 2025, 1 = the he and the she sentence "
    'resolved equally well with equal certainty) and the Equalized Odds gap: docs/metrics.md, "Referent '
    'resolution", states the formulas and what was pinned. The rows are a fixed stratified subset (params.yaml '
    "`subset`: both versions of sentence pairs balanced over referent position and the referent's majority gender, "
    "so over pronoun gender, stereotype and referent position); n counts complete sentence pairs, and the 95% "
    "bias-corrected intervals resample them (1000 resamples). Labels come from labour statistics and the "
    "sentences' construction, not from annotators' judgements. **Bold ▲/▼**: the worst value of its column; "
    "✓: the best."
)


def referent_doc(data: ReportData) -> TableDoc:
    """The "Referent resolution" page: per referent benchmark, the headline per run and the strata."""
    tables = []
    for b in referent_benchmarks(data):
        tables.append(_table(data, b, REFERENT_HEADLINE, f"{b}: headline (sentence pairs, intervals over pairs)"))
        tables.append(_table(data, b, STRATA, f"{b}: by stereotype and referent position"))
    empty = "" if tables else "no benchmark with synthbias: referent has metrics"
    return TableDoc("referent", "Referent resolution (SynthBias)", CAPTION, tables, empty)


# the first screen's note above the referent answers (gece.report.html.answers_html)
NOTE = (
    "which occupation the model resolves the pronoun to: top-label ECE; the ECE by pronoun gender, she/her − "
    "he/him/his; accuracy minus always choosing the occupation named last; [95% intervals over sentence pairs]"
)


def _value(block: dict, key: str, signed: bool = False) -> str:
    v, lo, hi = block.get(key), block.get(f"{key}_ci_low"), block.get(f"{key}_ci_high")
    if v is None:
        return "–"
    text = f"{v:+.3f}" if signed else f"{v:.3f}"
    return text + ("" if lo is None or hi is None else f" [{format_bound(lo)}, {format_bound(hi)}]")


def holds_zero(block: dict, key: str) -> bool:
    """Whether the 95% interval of ``key`` holds 0 (or is missing): the data do not tell its sign."""
    lo, hi = block.get(f"{key}_ci_low"), block.get(f"{key}_ci_high")
    return lo is None or hi is None or lo <= 0 <= hi


def answer_rows(data: ReportData) -> list[tuple[str, str]]:
    """Per run of each referent benchmark (``<b> / <m>``) one sentence: the top-label ECE, the ECE by pronoun
    gender (female − male, and whether its interval holds 0) and the accuracy over the last-mentioned baseline."""
    rows = []
    for b in referent_benchmarks(data):
        for m in data.runs.get(b, []):
            block = data.metrics.get((b, m), {}).get(BLOCK)
            if block is None:
                continue
            gap = "no real difference" if holds_zero(block, "ece_gap") else "a real difference"
            over = block.get("over_last") or 0.0
            beats = "no better than it" if holds_zero(block, "over_last") else ("beats it" if over > 0 else "below it")
            rows.append(
                (
                    f"{b} / {m}",
                    f"ECE top-label {_value(block, 'ece_toplabel')}; ECE she − he {_value(block, 'ece_gap', True)} "
                    f"({gap}); accuracy {_value(block, 'accuracy')} against {_value(block, 'baseline_last')} "
                    f"always the last-mentioned: {_value(block, 'over_last', True)} ({beats}); "
                    f"UCerF {_value(block, 'ucerf')}, EO gap {_value(block, 'eo')}",
                )
            )
    return rows
