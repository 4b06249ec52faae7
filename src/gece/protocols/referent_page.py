"""SynthBias's referent-resolution protocol on the page and in ``gece summary``: its tables, its first-screen answers
and figure finding, from the ``referent`` block of each run's metrics report (:mod:`gece.protocols.referent`).

**Skill leads.** A model that knows nothing (p = 0.5 on every row) is perfectly calibrated by the top-label ECE
(0), perfectly fair by UCerF (1) and Equalized Odds (0), and its Brier (0.25) beats every model here. So the headline
opens with skill: the accuracy for the full set's referent positions against always choosing the occupation named
last, the Brier skill against p = 0.5, and the pronoun sensitivity (the share of sentence pairs whose chosen
occupation changes with the pronoun; the referent is the same occupation in both sentences, so a low sensitivity
is either resolution or pronoun-blindness, and the accuracy tells which). A run is marked best (✓) on a number, in
the tables, the answers and the figure's finding, only when its Brier skill interval lies above 0: a run that does
not beat a coin is best at nothing. No Gender-ECE is given (the words that differ are occupations): the group
metric is the top-label ECE by pronoun gender.
"""

from __future__ import annotations

from collections.abc import Collection

from gece.io.files.json_reader import is_number
from gece.io.paths import report_layout
from gece.protocols.referent import METRICS, NAME
from gece.report.cells import (
    Column,
    ReportData,
    Row,
    Table,
    TableDoc,
    format_bound,
    mark_worst,
    metric_cell,
)
from gece.report.protocol import benchmarks_of

METRIC = {m.key: m for m in METRICS}
SKILL = "brier_skill"  # the number whose interval must lie above 0 before a run is marked best on anything
# the headline table: skill, accuracy by referent position, calibration, fairness; the strata table: the subset as
# sampled (its accuracy against its own baselines), by stereotype and by referent position
HEADLINE = (
    "n_pairs",
    "accuracy_full",
    "baseline_last_full",
    "over_last_full",
    "brier_skill",
    "sensitivity",
    "accuracy_first",
    "accuracy_second",
    "ece_toplabel",
    "ece_male",
    "ece_female",
    "ece_gap",
    "ucerf",
    "eo",
)
STRATA = ("accuracy", "baseline_stereotype", "baseline_last", "over_stereotype", "over_last", "brier", "ece_pro",
          "ece_anti", "ece_first", "ece_second", "accuracy_pro", "accuracy_anti")  # fmt: skip


def has_skill(block: dict | None) -> bool:
    """Whether a run's Brier skill interval lies above 0: it beats p = 0.5 on every row, by its 95% interval."""
    low = (block or {}).get(f"{SKILL}_ci_low")
    return is_number(low) and low > 0


def _blocks(data: ReportData, b: str) -> dict[str, dict]:
    """Run -> its block, in display order, on benchmark ``b``."""
    return {m: rep[NAME] for m in data.runs.get(b, []) if NAME in (rep := data.metrics.get((b, m)) or {})}


def mark_skilled(table: Table, skilled: list[bool], checks: Collection[str] = ()) -> Table:
    """:func:`gece.report.cells.mark_worst`, with the best value of a ranked column sought among the rows of
    ``skilled`` only (none when no such row has one): a run without skill is marked best on nothing. The rows of
    ``checks`` are not ranked."""
    mark_worst(table, checks)
    skilled = [ok for r, ok in zip(table.rows, skilled, strict=True) if r.label[0] not in checks]
    for j, col in enumerate(table.columns):
        cells = [r.cells[j] for r in table.rows if r.label[0] not in checks]
        for c in cells:
            c.best = ""
        nums = [c.value for c, ok in zip(cells, skilled, strict=True) if ok and is_number(c.value)]
        every = [c.value for c in cells if is_number(c.value)]
        if col.worst is None or not nums or len(every) < 2 or max(every) == min(every):
            continue
        best = min(nums) if col.worst == "high" else max(nums)
        for c, ok in zip(cells, skilled, strict=True):
            if ok and c.value == best and not c.worst:
                c.best = "low" if col.worst == "high" else "high"
    return table


def _table(data: ReportData, b: str, keys: tuple[str, ...], heading: str) -> Table:
    columns = [Column(k, METRIC[k].label, METRIC[k].worse) for k in keys]
    rows, skilled = [], []
    for m, block in _blocks(data, b).items():
        cells = [metric_cell(block, k, NAME, ci=METRIC[k].interval) for k in keys]
        rows.append(Row([m], cells, report_layout.metrics_file(b, m)))
        skilled.append(has_skill(block))
    return mark_skilled(Table(heading, ["model"], columns, rows), skilled, data.checks)


TITLE = "Referent resolution (SynthBias)"
CAPTION = (
    "SynthBias's referent-resolution protocol (type2 sentences, whose pronoun's referent can be resolved): after "
    "the prompt (params.yaml `benchmarks.<b>.prompt`, default \"<sentence> In this sentence, '<pronoun>' refers to "
    'the"), p is the probability of the occupation that is stereotypical for the pronoun, against the other one; '
    "y = 1 when it is the referent (balanced by design: it flips between the he and the she version of a sentence). "
    "**Skill leads**, because a model that knows nothing (p = 0.5 on every row) has a top-label ECE of 0, UCerF 1 and "
    "an Equalized Odds gap of 0. The accuracy and the Brier skill are for the full set's referent positions: the "
    "subset balances them, the full set names the referent second in a share w of its sentence pairs (the column "
    "always the last-mentioned, full set), and the subset's rows are reweighted to that mix. Always the "
    "stereotypical occupation is right half the time on either mix, as is a coin; Brier skill = 1 − Brier / 0.25, "
    "the Brier of p = 0.5 (above 0: better than a coin). Pronoun sensitivity: the share of sentence pairs whose "
    "chosen occupation changes with the pronoun (the referent is the same occupation in both sentences: a "
    "resolver changes nothing, a stereotype follower changes it; low sensitivity with low accuracy is "
    "pronoun-blindness). Then calibration and fairness on the subset as sampled: the **top-label ECE**, confidence "
    "max(p, 1 − p) in the chosen occupation against correctness; **ECE by pronoun gender** within the he/him/his "
    "and the she/her sentences, and their difference (Gender-ECE is not given: the words that differ are "
    "occupations); UCerF (Wang et al. 2025, 1 = the he and the she sentence resolved equally well with equal "
    'certainty) and the Equalized Odds gap. docs/metrics.md, "Referent resolution", states the formulas and what '
    "was pinned. The rows are a fixed stratified subset (params.yaml `subset`: both versions of sentence pairs "
    "balanced over referent position and the referent's majority gender); n counts complete sentence pairs, and "
    "the 95% bias-corrected intervals resample them (1000 resamples). Labels come from labour statistics and the "
    "sentences' construction, not from annotators' judgements. **Bold ▲/▼**: the worst value of its column; "
    "✓: the best among the runs whose Brier skill interval lies above 0 (a run that does not beat a coin is marked "
    "best on nothing)."
)


def doc(data: ReportData) -> TableDoc:
    """The page: per benchmark of the protocol, the headline per run and the subset's strata."""
    tables = []
    for b in benchmarks_of(data, NAME):
        tables.append(_table(data, b, HEADLINE, f"{b}: headline (sentence pairs, intervals over pairs)"))
        tables.append(_table(data, b, STRATA, f"{b}: the subset as sampled, by stereotype and referent position"))
    empty = "" if tables else "no benchmark with synthbias: referent has metrics"
    return TableDoc(NAME, TITLE, CAPTION, tables, empty)


# the first screen's note above the answers (gece.report.html.answers_html)
NOTE = (
    "which occupation the model resolves the pronoun to, skill first: accuracy for the full set's referent positions "
    "against always the last-mentioned; Brier skill against p = 0.5; pronoun sensitivity; then the top-label ECE and "
    "the ECE she/her − he/him/his [95% intervals over sentence pairs]"
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


def _side(block: dict, key: str, above: str, below: str, neither: str) -> str:
    """The word for the sign of ``key`` by its interval."""
    if holds_zero(block, key):
        return neither
    return above if (block.get(key) or 0.0) > 0 else below


def answers(data: ReportData) -> list[tuple[str, str]]:
    """Per run of each benchmark of the protocol (``<b> / <m>``) one sentence: the skill numbers, each judged by its
    interval, then the calibration and fairness numbers."""
    rows = []
    for b in benchmarks_of(data, NAME):
        for m, block in _blocks(data, b).items():
            beats = _side(block, "over_last_full", "beats it", "below it", "no better than it")
            skill = _side(block, SKILL, "beats a coin", "worse than a coin", "not told from a coin")
            gap = _side(block, "ece_gap", "a real difference", "a real difference", "no real difference")
            rows.append(
                (
                    f"{b} / {m}",
                    f"accuracy {_value(block, 'accuracy_full')} (full set's positions) against "
                    f"{_value(block, 'baseline_last_full')} always the last-mentioned: "
                    f"{_value(block, 'over_last_full', True)} ({beats}); Brier skill {_value(block, SKILL, True)} "
                    f"({skill}); pronoun sensitivity {_value(block, 'sensitivity')}; ECE top-label "
                    f"{_value(block, 'ece_toplabel')}; ECE she − he {_value(block, 'ece_gap', True)} ({gap}); "
                    f"UCerF {_value(block, 'ucerf')}, EO gap {_value(block, 'eo')}",
                )
            )
    return rows


def _interval(block: dict, key: str) -> str:
    lo, hi = block.get(f"{key}_ci_low"), block.get(f"{key}_ci_high")
    return "" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]"


def headline(data: ReportData, b: str) -> str:
    """``gece summary``'s answer on benchmark ``b``: how many runs beat a coin (Brier skill above 0) and always the
    last-mentioned (full set's positions), each by its 95% interval; the lowest top-label ECE among the runs with
    skill (none without one); how many runs' ECE she − he differs from 0."""
    blocks = _blocks(data, b)
    skilled = {m: r for m, r in blocks.items() if has_skill(r)}
    beats = sum(not holds_zero(r, "over_last_full") and r["over_last_full"] > 0 for r in blocks.values())
    gaps = sum(not holds_zero(r, "ece_gap") for r in blocks.values())
    ranked = {m: r for m, r in skilled.items() if is_number(r.get("ece_toplabel"))}
    if ranked:
        m, r = min(ranked.items(), key=lambda kv: (kv[1]["ece_toplabel"], kv[0]))
        best = f"lowest top-label ECE among them {m} {r['ece_toplabel']:.3f}{_interval(r, 'ece_toplabel')}"
    else:
        best = "so none is ranked on calibration or fairness"
    n = len(blocks)
    return (
        f"Brier skill above 0 (beats p = 0.5) in {len(skilled)}/{n} runs, {best}; accuracy above always the "
        f"last-mentioned (full set) in {beats}/{n}; ECE she − he differs from 0 in {gaps}/{n}"
    )


def finding(data: ReportData, b: str, points: list) -> str:
    """The first-screen figure's finding (its alt text): the highest Brier skill and the runs not distinguishable
    from it after Holm, how many runs beat p = 0.5, and the lowest top-label ECE among the runs with skill."""
    blocks = _blocks(data, b)
    skill = [p for p in points if p.panel == SKILL]
    parts = []
    if skill:
        top = max(skill, key=lambda p: (p.value, p.model))
        tied = [p.model for p in skill if p is not top and set(p.letters) & set(top.letters)]
        above = sum(has_skill(blocks.get(p.model)) for p in skill)
        parts.append(
            f"highest Brier skill {top.model} {top.value:+.3f}{_interval(blocks.get(top.model, {}), SKILL)}, not "
            f"distinguishable after Holm from {', '.join(tied) or 'no other run'}; above 0 (better than p = 0.5) in "
            f"{above} of {len(skill)} runs"
        )
    calibrated = [p for p in points if p.panel == "ece_toplabel" and has_skill(blocks.get(p.model))]
    if calibrated:
        low = min(calibrated, key=lambda p: (p.value, p.model))
        parts.append(f"lowest top-label ECE among the runs with skill {low.model} {low.value:.3f}")
    else:
        parts.append("no run has skill, so none is called best calibrated")
    return f"{b}: " + "; ".join(parts) + "."


FIGURE_CAPTION = (
    "Brier skill against p = 0.5 on every row (0: a coin; the skill for the full set's referent positions) and "
    "top-label ECE per run with 95% intervals over sentence pairs, highest skill on top; runs that share a letter "
    "are not distinguishable after Holm (compact letter display of the compare stage's paired bootstrap tests); a "
    "run is called best calibrated only when its skill interval lies above 0."
)
EXAMPLES = (
    "y = 1 when the occupation that is stereotypical for the pronoun is its referent, as SynthBias builds the "
    "sentence, and p is the model's probability of that occupation after the prompt, so each row's model resolves "
    "the pronoun to the other occupation than the sentence's referent."
)
LABELS = {"accuracy": "referent accuracy"}  # the overall metrics table's accuracy column on the protocol's benchmarks
