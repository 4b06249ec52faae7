"""The findings: what a reviewer and a reader should see first.

Two views of the same reports, both pure functions of a :class:`gece.report.cells.ReportData`:

- :func:`summary` is ``reports/summary.json`` (``SummaryReport``), the only file dvc.yaml declares as
  DVC metrics: the headline metrics of every run and a compact line per calibration, ablation and
  comparison, so that ``dvc metrics diff`` after re-scoring one model on one benchmark shows at
  most :data:`MAX_ROWS_PER_RUN` rows. The detail stays in the per-stage JSON files (plain outputs).
- :func:`findings` is the generated summary that opens the HTML page and ``gece summary``: per
  benchmark whose labels vary the best and the worst model by ECE and by Gender-ECE with their intervals;
  per benchmark with the same label for every pair (:mod:`gece.report.identity`: there ECE is 1 − mean p, not
  calibration) the lowest and highest stereotype share and 1 − mean p, and whether the share stays on the
  same side of 0.5 under every scoring rule; then one line per notable effect (special tokens, Brier against
  ECE ranking, calibration, comparisons, neutral wording, gaps between groups).

A largest gap between groups is headlined only when it is a finding (:func:`gece.report.gaps.gap_refusal`: its
smaller group has enough distinct pairs and its interval is narrow enough); the groups table still shows the
others, marked † (docs/metrics.md, Identity benchmarks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scipy.stats import kendalltau

from gece.base.terminal import plural
from gece.catalog.groupings import GROUP_PROTOCOLS
from gece.catalog.metric_defs import METRIC
from gece.report import identity, prompt_answers
from gece.report.cells import ReportData, answered, distinct_runs, repeats, significant_count, variant_of
from gece.report.gaps import (
    GAP_MARK,
    GAP_MAX_WIDTH,
    GAP_MIN_DISTINCT,
    gap_refusal,
    gap_rules,
    group_size,
    grouping_result,
)
from gece.report.protocol import claimed
from gece.report.readings import HEADLINE, calibrated, reading_of

# every headline metric is an error (lower is better) except human alignment (the metric table's worse end)
HIGHER_IS_BETTER = frozenset(k for k in HEADLINE if METRIC[k].worse == "low")
# the metric table's labels; n reads "pairs" here
LABELS = {k: METRIC[k].label for k in HEADLINE} | {"n": "pairs"}
RANKED = ("ece", "gender_ece")  # the metrics the findings rank the models by
# the most keys of reports/summary.json one run can move (tests/test_findings.py checks it)
MAX_ROWS_PER_RUN = 30


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _best_calibrated(protocol: dict | None) -> float | None:
    """The lowest held-out ECE over the methods of one protocol whose fit is ``ok``."""
    if not protocol:
        return None
    values = [
        _num((m.get("metrics") or {}).get("ece"))
        for m in protocol.get("methods", {}).values()
        if m.get("status") == "ok"
    ]
    values = [v for v in values if v is not None]
    return min(values) if values else None


def _diff(a: object, b: object) -> float | None:
    a, b = _num(a), _num(b)
    return None if a is None or b is None else a - b


def summary(data: ReportData) -> dict:
    """``reports/summary.json``: nested {section: {benchmark or model: {...: number}}}.

    - ``runs.<b>.<m>``: the run's keys under its benchmark's reading
      (:attr:`gece.report.readings.Reading.run_summary`: the :data:`gece.report.readings.HEADLINE` metrics; on a
      benchmark with constant y the honest names of :data:`gece.report.identity.IDENTITY_HEADLINE`,
      ``stereotype_share``, ``shortfall`` = 1 − mean p, ``shortfall_gender``);
    - on a benchmark of a protocol (its metrics reports carry the protocol's block:
      :func:`gece.report.protocol.claimed`) the protocol's keys instead
      (:meth:`gece.report.protocol.Protocol.run_summary`);
    - ``rules.<b>.<m>``: the stereotype share and 1 − mean p under each scoring rule of such a benchmark and its
      variants, and their differences (:func:`gece.report.identity.rules_summary`);
    - ``calibration.<b>.<m>``: the lowest held-out ECE after calibration, per protocol, and ``binning.<b>.<m>``:
      the lowest and highest ECE over the binnings of the binning ablation, where the reading's ECE is calibration
      (not with constant y: a map fitted to one label is no calibration, and 1 − mean p does not depend on the
      binning);
    - ``neutral.<m>.<variant>``: ECE and Gender-ECE of each gender-neutral rewrite minus the occupation
      wording (the benchmark that the ``neutral_of`` entries of params.yaml name);
    - ``special_tokens.<m>.<b>``: ECE (``shortfall_change``, 1 − mean p, on a benchmark with constant y) and
      mean confidence without the special tokens minus with them;
    - ``prompts.<m>.<prompt>``: the prompt ablation's bounded digest (:func:`gece.report.prompt_answers.summary`);
    - ``compare.<b>``: per metric, how many model pairs differ significantly after Holm's correction (with the
      reading's names, :meth:`gece.report.readings.Reading.key`), the checks
      (:func:`gece.report.cells.answered`) left out;
    - ``agreement.<b>.<m>``: a run with ``checked_against`` against that run (:func:`agreement_summary`);
      absent when no run has one;
    - ``groups.<b>.<m>``: per protocol, the largest gap between groups of the first grouping that splits the
      benchmark (:func:`first_gap`); null, not applicable, where only one of its groups is large enough.
    """
    out: dict[str, dict] = {
        "runs": {},
        "calibration": {},
        "binning": {},
        "neutral": {},
        "special_tokens": {},
        "compare": {},
        "groups": {},
        "rules": identity.rules_summary(data),
        "agreement": {},
        "prompts": prompt_answers.summary(data),
    }
    protocols = claimed(data)
    counted = answered(data)  # the comparison counts leave the checks out
    for b in data.benchmarks:
        reading, protocol = reading_of(data, b), protocols.get(b)
        for m in data.runs.get(b, []):
            rep = data.metrics.get((b, m))
            if rep is not None:
                out["runs"].setdefault(b, {})[m] = (
                    protocol.run_summary(rep[protocol.name])
                    if protocol is not None and protocol.name in rep
                    else reading.run_summary(rep)
                )
            if not reading.calibration:
                continue
            cal = data.calibration.get((b, m))
            if cal is not None:
                out["calibration"].setdefault(b, {})[m] = {
                    f"best_ece_{protocol}": _best_calibrated(cal.get(protocol)) for protocol in ("split", "crossfit")
                }
            grid = data.binning.get((b, m))
            if grid is not None:
                values = [_num(cell.get("ece")) for cells in grid.values() for cell in cells.values()]
                values = [v for v in values if v is not None]
                out["binning"].setdefault(b, {})[m] = {
                    "ece_min": min(values) if values else None,
                    "ece_max": max(values) if values else None,
                }
        rep = counted.compare.get(b)
        if rep and rep.get("pairs"):
            keys = list(rep["pairs"][0]["metrics"])
            out["compare"][b] = {
                f"{reading.key(k)}_significant": significant_count(rep["pairs"], k) for k in keys
            }  # an identical pair (one run scored twice) differs in nothing: it adds 0; None: not applicable
        for e in (data.compare.get(b) or {}).get("agreement", []):
            out["agreement"].setdefault(b, {})[e["run"]] = agreement_summary(e)
    for m, rep in sorted(data.neutral.items()):
        base_name = next(iter(rep), None)
        base = rep.get(base_name, {}) if base_name else {}
        out["neutral"][m] = {
            variant: {
                "ece_change": _diff(row.get("ece"), base.get("ece")),
                "gender_ece_change": _diff(row.get("gender_ece"), base.get("gender_ece")),
            }
            for variant, row in rep.items()
            if variant != base_name
        }
    for m, rep in sorted(data.special_tokens.items()):
        out["special_tokens"][m] = {
            b: {
                # under the benchmark's reading's name (1 − mean p where y is constant: shortfall_change)
                f"{reading_of(data, b).key('ece')}_change": _diff(
                    sides.get("without", {}).get("ece"), sides.get("with", {}).get("ece")
                ),
                "mean_confidence_change": _diff(
                    sides.get("without", {}).get("mean_confidence"), sides.get("with", {}).get("mean_confidence")
                ),
            }
            for b, sides in rep.items()
        }
    for b, rep in data.groups.items():
        for m in rep.get("runs", {}):
            found = {protocol: first_gap(rep, m, protocol)[1] for protocol in GROUP_PROTOCOLS}
            if any(g is not None for g in found.values()):  # a gap between groups needs two groups: else null
                out["groups"].setdefault(b, {})[m] = {
                    f"gap_{protocol}": g["gap"] if g and g["n_groups"] > 1 else None for protocol, g in found.items()
                }
    return {k: v for k, v in out.items() if v}


def agreement_summary(entry: dict) -> dict:
    """A run's engine agreement on one benchmark (an ``agreement`` entry of ``reports/compare/<b>.json``) as
    summary numbers: n, the largest |Δ log-likelihood difference|, the flipped verdicts and the change of the
    ECE (or stereotype share) run − against with its interval."""
    change = f"{entry['metric']}_change"
    return {
        "n": entry["n"],
        "max_abs_lld_diff": entry["max_abs_lld_diff"],
        "flips": entry["flips"],
        change: entry["diff"],
        f"{change}_low": entry["ci_low"],
        f"{change}_high": entry["ci_high"],
    }


def first_gap(report: dict, model: str, protocol: str) -> tuple[str | None, dict | None]:
    """(grouping, gap) of the first grouping of a groups report that splits the benchmark under ``protocol``
    (params.yaml's order: the identity contrast or bias type first for the CrowS-Pairs-format benchmarks)."""
    for r in report.get("runs", {}).get(model, []):
        if r["protocol"] == protocol and len(r["groups"]) >= 2 and r.get("gap"):
            return r["grouping"], r["gap"]
    return None, None


# ------------------------------------------------------------------------------ findings
@dataclass
class Ranked:
    """One end of a ranking: the model, its value and the value's interval (None when the JSON has none)."""

    model: str
    value: float
    low: float | None = None
    high: float | None = None

    def interval(self, digits: int = 3) -> str:
        """`` [0.031, 0.071]``, or "" without an interval."""
        return (
            f" [{self.low:.{digits}f}, {self.high:.{digits}f}]"
            if self.low is not None and self.high is not None
            else ""
        )

    def text(self, digits: int = 3) -> str:
        return f"{self.model} {self.value:.{digits}f}{self.interval(digits)}"


@dataclass
class BenchmarkFinding:
    benchmark: str
    n: list[int]
    models: int
    best: dict[str, Ranked] = field(default_factory=dict)  # metric -> best model
    worst: dict[str, Ranked] = field(default_factory=dict)


@dataclass
class IdentityFinding:
    """A benchmark with the same label for every pair: the lowest and highest stereotype share and 1 − mean p
    (:data:`IDENTITY_RANKED`), and whether the share stays on the same side of 0.5 under every rule."""

    benchmark: str
    n: list[int]
    n_distinct: list[int]
    n_clusters: list[int]
    models: int
    lowest: dict[str, Ranked] = field(default_factory=dict)
    highest: dict[str, Ranked] = field(default_factory=dict)
    rules: str | None = None  # :func:`gece.report.identity.rule_verdict`


@dataclass
class Findings:
    benchmarks: list[BenchmarkFinding]
    effects: list[tuple[str, str]]  # (topic, one sentence)
    identity: list[IdentityFinding] = field(default_factory=list)


# the metrics JSON keys an identity finding ranks by, with their labels
IDENTITY_RANKED = {"pct_stereotype": identity.LABEL["stereotype_share"], "ece": identity.LABEL["shortfall"]}


def ranking(data: ReportData, b: str, key: str) -> list[Ranked]:
    """The runs of benchmark ``b`` with a value of ``key``, best first (ties by model id); a run scored twice
    once (:func:`gece.report.cells.repeats`)."""
    rows = []
    for m in distinct_runs(data, b):
        rep = data.metrics.get((b, m)) or {}
        v = _num(rep.get(key))
        if v is not None:
            rows.append(Ranked(m, v, _num(rep.get(f"{key}_ci_low")), _num(rep.get(f"{key}_ci_high"))))
    sign = -1 if key in HIGHER_IS_BETTER else 1
    return sorted(rows, key=lambda r: (sign * r.value, r.model))


def _benchmark(data: ReportData, b: str) -> BenchmarkFinding | None:
    """Not on a benchmark of a protocol: its numbers answer there, and rank only runs with skill."""
    reps = [data.metrics[(b, m)] for m in distinct_runs(data, b) if (b, m) in data.metrics]
    if not reps or not reading_of(data, b).calibration or b in claimed(data):
        return None
    out = BenchmarkFinding(b, sorted({int(r["n"]) for r in reps}), len(reps))
    for key in RANKED:
        ranked = ranking(data, b, key)
        if ranked:
            out.best[key], out.worst[key] = ranked[0], ranked[-1]
    return out


def _identity(data: ReportData, b: str) -> IdentityFinding | None:
    reps = [data.metrics[(b, m)] for m in distinct_runs(data, b) if (b, m) in data.metrics]
    if not reps:
        return None

    def counts(key: str) -> list[int]:
        return sorted({int(r[key]) for r in reps if _num(r.get(key)) is not None})

    out = IdentityFinding(
        b, counts("n"), counts("n_distinct"), counts("n_clusters"), len(reps), rules=identity.rule_verdict(data, b)
    )
    for key in IDENTITY_RANKED:
        ranked = ranking(data, b, key)
        if ranked:
            out.lowest[key], out.highest[key] = ranked[0], ranked[-1]
    return out


def _special_tokens_effect(data: ReportData) -> str | None:
    """The ECE with and without the special tokens on the benchmarks whose labels vary; the benchmarks where both
    runs give the same metrics (one run scored twice) are named, not counted."""
    parts = []
    for m, rep in sorted(data.special_tokens.items()):
        without = data.special_pairs.get(m, f"{m} without special tokens")
        both = {b: (s["with"], s["without"]) for b, s in rep.items() if s.get("with") and s.get("without")}
        same = [b for b, (w, wo) in both.items() if w == wo]
        rows = [
            (b, w, wo)
            for b, (w, wo) in both.items()
            if b not in same
            and reading_of(data, b).calibration
            and _num(w.get("ece")) is not None
            and _num(wo.get("ece")) is not None
        ]
        if not rows and not same:
            continue
        worse = [b for b, w, wo in rows if wo["ece"] > w["ece"]]
        span = ", ".join(f"{b} {w['ece']:.3f} → {wo['ece']:.3f}" for b, w, wo in rows)
        text = f"without its special tokens ({without}), {m} " + (
            f"has a higher ECE on {len(worse)} of {plural(len(rows), 'benchmark')} ({span})" if rows else "scores alike"
        )
        if same:  # the sentence rule puts the prefix token (the BOS) in front of every sentence either way
            why = (
                " (the sentence rule: the BOS opens every sentence either way)"
                if all(data.meta.get((b, m), {}).get("rule") == "sentence" for b in same)
                else ""
            )
            text += f"; {without} is {m} on {', '.join(same)}, the same score on every pair{why}"
        parts.append(text)
    return "; ".join(parts) + "." if parts else None


def _kendall_tau(a: list[str], b: list[str]) -> float | None:
    """Kendall's tau between two rankings of the same items (None for fewer than two): scipy's, on their positions."""
    items = [x for x in a if x in b]
    if len(items) < 2:
        return None
    return float(kendalltau(range(len(items)), [b.index(x) for x in items]).statistic)


def _brier_effect(data: ReportData) -> str | None:
    differ, taus, shown = [], [], []
    for b in calibrated(data):
        by_ece = [r.model for r in ranking(data, b, "ece")]
        by_brier = [r.model for r in ranking(data, b, "brier")]
        tau = _kendall_tau(by_ece, by_brier)
        if tau is None:
            continue
        taus.append(tau)
        if by_ece[0] != by_brier[0]:
            differ.append(b)
            shown.append(f"{b}: {by_brier[0]} by Brier, {by_ece[0]} by ECE")
    if not taus:
        return None
    head = f"Brier and ECE pick a different best model on {len(differ)} of {plural(len(taus), 'benchmark')}" + (
        f" ({'; '.join(shown)})" if shown else ""
    )
    return f"{head}; Kendall's τ between the two rankings is {min(taus):.2f} to {max(taus):.2f}."


def _calibration_effect(data: ReportData) -> str | None:
    """How often the headline method (params.yaml ``calibrate.headline``, fixed in advance) lowers the held-out ECE,
    on the benchmarks whose labels vary; and which method is most often lowest, said to be chosen on the same
    pairs."""
    method = data.headline_method
    lower, total, methods = 0, 0, {}
    for (b, _m), rep in sorted(data.calibration.items()):
        split = rep.get("split") or {}
        before = _num((split.get("uncalibrated") or {}).get("ece"))
        ok = {
            name: _num((x.get("metrics") or {}).get("ece"))
            for name, x in split.get("methods", {}).items()
            if x.get("status") == "ok"
        }
        ok = {k: v for k, v in ok.items() if v is not None}
        if not reading_of(data, b).calibration or before is None or method not in ok:
            continue
        total += 1
        lower += ok[method] < before
        best = min(ok, key=lambda k: (ok[k], k))
        methods[best] = methods.get(best, 0) + 1
    if not total:
        return None
    common = max(methods, key=lambda k: (methods[k], k))
    return (
        f"{method} (the method params.yaml fixes in advance) lowers the held-out ECE of {lower} of "
        f"{plural(total, 'run')}; the method with the lowest held-out ECE, chosen on the pairs it is evaluated on "
        f"and so flattered by the choice, is most often {common} ({methods[common]} of {total})."
    )


def _compare_effect(data: ReportData) -> str | None:
    sig, total, benches = 0, 0, 0
    for b in calibrated(data):
        rep = data.compare.get(b)
        if not rep or not rep.get("pairs") or "ece" not in rep["pairs"][0]["metrics"]:
            continue
        pairs = [p for p in rep["pairs"] if not p.get("identical")]  # one run scored twice is no pair
        benches += 1
        total += len(pairs)
        sig += sum(bool(p["metrics"]["ece"]["significant_holm"]) for p in pairs)
    if not total:
        return None
    return (
        f"{sig} of {plural(total, 'model pair')} on {plural(benches, 'benchmark')} differ in ECE "
        "significantly after Holm's correction (paired bootstrap): most rankings by ECE are within noise"
        if sig * 2 < total
        else f"{sig} of {plural(total, 'model pair')} on {plural(benches, 'benchmark')} differ in ECE "
        "significantly after Holm's correction (paired bootstrap)."
    )


def _neutral_effect(data: ReportData) -> str | None:
    parts = []
    for m, rep in sorted(data.neutral.items()):
        names = list(rep)
        if len(names) < 2 or _num(rep[names[0]].get("ece")) is None:
            continue
        base = rep[names[0]]["ece"]
        changes = [f"{v} {rep[v]['ece'] - base:+.3f}" for v in names[1:] if _num(rep[v].get("ece")) is not None]
        parts.append(f"{m} ({names[0]} {base:.3f}; " + ", ".join(changes) + ")")
    if not parts:
        return None
    return "ECE with gender-neutral wording instead of the occupation: " + "; ".join(parts) + "."


def _groups_effect(data: ReportData) -> str | None:
    """Per benchmark with a grouping other than gender: how many runs have a largest gap with a permutation
    p-value below 0.05 (identity protocol), and the largest gap that is a finding
    (:func:`gece.report.gaps.gap_refusal`), with both groups' sizes and, on a benchmark scored under several
    rules, whether its sign holds under each."""
    parts = []
    for b, rep in data.groups.items():
        if variant_of(data, b) is not None:  # its numbers are in its first entry's line
            continue
        found = []
        twice = repeats(data, b)
        for m in (m for m in rep.get("runs", {}) if m not in twice):
            grouping, gap = first_gap(rep, m, "identity")
            if grouping in (None, "pred_gender", "true_gender") or _num(gap.get("gap")) is None:
                continue
            found.append((m, grouping, gap, grouping_result(rep, m, grouping, "identity")))
        if not found:
            continue
        sig = sum(_num(gap.get("p_perm")) is not None and gap["p_perm"] < 0.05 for _, _, gap, _ in found)
        kept = [x for x in found if gap_refusal(x[3]) is None]
        refused = len(found) - len(kept)
        text = f"{b} by {found[0][1]}: {sig} of {plural(len(found), 'run')} with a gap at p < 0.05 (permutation)"
        if kept:
            m, grouping, gap, result = max(kept, key=lambda x: (x[2]["gap"], x[0]))
            (nh, dh), (nl, dl) = group_size(result, gap["high"]), group_size(result, gap["low"])
            what = reading_of(data, b).ece
            text += (
                f"; largest {m} {gap['gap']:.3f} [{gap['ci_low']:.3f}, {gap['ci_high']:.3f}] in {what}, "
                f"{gap['high']} ({nh} pairs, {dh} distinct) vs {gap['low']} ({nl} pairs, {dl} distinct)"
                + gap_rules(data, b, m, grouping, gap)
            )
        if refused:
            text += (
                f"; {refused} of the gaps not a finding (small group or wide interval, marked {GAP_MARK} in the "
                "groups table)"
            )
        parts.append(text)
    return "; ".join(parts) + "." if parts else None


def _annotators_effect(data: ReportData) -> str | None:
    parts = []
    for b, rep in data.annotations.items():
        alpha, kappa = (rep.get("alpha") or {}), (rep.get("kappa") or {})
        if _num(alpha.get("binary")) is None:
            continue
        parts.append(
            f"{b}: Krippendorff's α {alpha['binary']:.2f} on whether the writer's bias type is recognised "
            f"({alpha.get('nominal', float('nan')):.2f} on the label itself), Fleiss' κ "
            f"{kappa.get('binary', float('nan')):.2f}; {rep['n_annotated']} pairs by "
            f"{rep['n_annotators']} annotators"
        )
    return "; ".join(parts) + "." if parts else None


def _repeats_effect(data: ReportData) -> str | None:
    """The runs that are another run scored twice (the same p on every pair), per benchmark: counted once."""
    same: dict[tuple[str, str], list[str]] = {}
    for b in data.benchmarks:
        for later, first in repeats(data, b).items():
            same.setdefault((later, first), []).append(b)
    parts = [f"{later} is {first} on {', '.join(bs)}" for (later, first), bs in same.items()]
    return (
        "; ".join(parts) + " (the same p on every pair): one run, counted once in every finding and count above."
        if parts
        else None
    )


EFFECTS = (
    ("the same run twice", _repeats_effect),
    ("special tokens", _special_tokens_effect),
    ("Brier ranking", _brier_effect),
    ("calibration", _calibration_effect),
    ("comparisons", _compare_effect),
    ("neutral wording", _neutral_effect),
    ("prompts", prompt_answers.effect),
    ("gaps between groups", _groups_effect),
    ("annotators", _annotators_effect),
)


def findings(data: ReportData) -> Findings:
    """Per benchmark whose labels vary the best and worst model by ECE and Gender-ECE; per benchmark with constant
    y (not a variant of another) the stereotype share and 1 − mean p under its rules; then the notable effects. The
    checks are left out (:func:`gece.report.cells.answered`)."""
    data = answered(data)
    benches = [f for f in (_benchmark(data, b) for b in data.benchmarks) if f is not None]
    ident = [f for f in (_identity(data, b) for b in identity.identity_benchmarks(data)) if f is not None]
    effects = [(topic, text) for topic, fn in EFFECTS if (text := fn(data))]
    return Findings(benches, effects, ident)


def identity_sentence(f: IdentityFinding) -> str:
    """``crows_pairs (1505 pairs, 1505 distinct, 1505 clusters, 3 models; y = 1 for every pair): stereotype share
    (p > 0.5) 0.555 [...] (m1) to 0.575 [...] (m2); 1 − mean p ...; holds under both rules ...``."""
    sizes = [f"{'/'.join(map(str, f.n))} pairs"]
    sizes += [f"{'/'.join(map(str, v))} {w}" for v, w in ((f.n_distinct, "distinct"), (f.n_clusters, "clusters")) if v]
    parts = []
    for key, label in IDENTITY_RANKED.items():
        if key in f.lowest:
            lo, hi = f.lowest[key], f.highest[key]
            same = f.models < 2 or lo.model == hi.model
            parts.append(f"{label} {lo.text()}" if same else f"{label} {lo.text()} to {hi.text()}")
    if f.rules:
        parts.append(f"the share {f.rules}")
    head = f"{f.benchmark} ({', '.join(sizes)}, {plural(f.models, 'model')}; y = 1 for every pair)"
    return f"{head}: " + "; ".join(parts)


def benchmark_sentence(f: BenchmarkFinding) -> str:
    """``winobias (771 pairs, 9 models): ECE best paper-x 0.045 [0.031, 0.071], worst ...``."""
    parts = []
    for key in RANKED:
        if key in f.best:
            same = f.models < 2 or f.best[key].model == f.worst[key].model
            parts.append(
                f"{LABELS[key]} "
                + (f"{f.best[key].text()}" if same else f"best {f.best[key].text()}, worst {f.worst[key].text()}")
            )
    n = "/".join(map(str, f.n))
    return f"{f.benchmark} ({n} pairs, {plural(f.models, 'model')}): " + "; ".join(parts)


FINDINGS_CAPTION = (
    "Generated from the reports below. Per benchmark whose labels vary, the best and the worst model by ECE and by "
    "Gender-ECE (lower is better), with the 95% bootstrap interval in brackets; overlapping intervals mean the "
    "ranking may be noise (see the model comparison). Then, per identity benchmark (y = 1 for every pair, so "
    "nothing there is calibration), the lowest and highest stereotype share and 1 − mean p (the paper's identity "
    "ECE), and whether the share stays on the same side of 0.5 under each scoring rule (judged by its interval: "
    "a share whose interval holds 0.5 is on neither side). Then one line per notable "
    f"effect; a gap between groups is one only when its smaller group has at least {GAP_MIN_DISTINCT} distinct "
    f"pairs and its interval is at most {GAP_MAX_WIDTH} wide."
)


def findings_lines(f: Findings) -> list[str]:
    """The findings as plain lines (``gece summary``, ``gece report``)."""
    return (
        [benchmark_sentence(b) for b in f.benchmarks]
        + [identity_sentence(b) for b in f.identity]
        + [f"{topic}: {text}" for topic, text in f.effects]
    )
