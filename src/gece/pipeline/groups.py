"""Stage groups: calibration by group (Gender-ECE generalised, the paper's Table 4) of every run of a benchmark.

For every run (:func:`gece.pipeline.runs.runs`), every grouping of ``groups.by`` and every protocol of
``groups.protocols`` (:mod:`gece.stats.by_group`): each group's ECE with its interval, and the largest gap
between groups -> ``reports/groups/<b>.json`` (``GroupsReport``) and the tables of ``reports/tables/groups.md``
(Table-4-style tables). The groupings other than the genders are columns of the prepared pairs (SynthBias's,
:data:`gece.catalog.groupings.SYNTH_COLUMNS`, only where its prepared file has them: elsewhere they are left out of
the report); the soft protocol reads the annotators' soft labels from ``artifacts/annotated/<b>.parquet``.

Under the identity protocol, on a run whose y varies, every pair and every group of a grouping that is not a
function of y also get the calibration tests of :mod:`gece.stats.calibration_tests` (Spiegelhalter's z and
consistency resampling of the ECE, both following the unit that was sampled: the pair, its exact repeats merged, or
the cluster of distinct pairs; :func:`unit_variance`), Holm-corrected over the groups of the grouping. A run with
one label for every pair gets none: its "ECE" is 1 − mean p.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gece.base.errors import GeceError
from gece.base.terminal import plain
from gece.catalog.groupings import DERIVED_GROUPINGS, OUTCOME_GROUPINGS, SYNTH_COLUMNS
from gece.cmd import command, run_tables
from gece.io.files.json_writer import write_json
from gece.io.files.readers import read_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.groups_report import GroupsReport
from gece.io.schemas.pair_rows import SYNTH_SCHEMAS, AnnotatedPair
from gece.io.settings.params import GroupsParams, Params, require_params
from gece.io.settings.params_file import RUN_SECTIONS
from gece.io.settings.sections import MetricsParams
from gece.pipeline import run_report, runs
from gece.stats import by_group, calibration_tests

log = logging.getLogger("gece")

NO_FILE = "no annotations: {path} does not exist (run `gece annotate --benchmark {b}`)"
NO_LABELS = "no annotations: no pair of {b} has a soft label (y_soft is null everywhere in {path})"
CONSTANT_Y = "y is {y:g} for every pair: no calibration to test (the identity protocol's cell is 1 − mean p)"
SHARE = "pct_stereotype"  # a group's stereotype share in the groups report (the metrics report's key)
OUTCOME_TEXT = "{grouping} is a function of y: a test inside its groups would condition on the outcome it tests"


@dataclass(frozen=True)
class GroupTarget:
    """A protocol of this stage (params.yaml ``groups.protocols``, :data:`gece.catalog.groupings.GROUP_PROTOCOLS`),
    declared once: what a group's calibration is measured against (``target``: from the run's labels y and the
    pairs' soft labels, None where the benchmark has none), whether it reads the annotate stage's soft labels
    (``soft``), and whether it is the labels themselves (``labels``: then each group also gets its distinct pairs,
    its calibration tests and its stereotype share)."""

    target: Callable[[np.ndarray, np.ndarray | None], np.ndarray | None]
    soft: bool = False
    labels: bool = False


TARGETS: dict[str, GroupTarget] = {
    "identity": GroupTarget(lambda y, soft: y, labels=True),  # the paper's: t = y
    "soft": GroupTarget(lambda y, soft: None if soft is None else by_group.soft_target(y, soft), soft=True),
}


def soft_labels(benchmark: str, pairs: pd.DataFrame, root: Path = Path()) -> tuple[pd.Series | None, str | None]:
    """Each prepared pair's ``y_soft`` (NaN where it has none) from ``artifacts/annotated/<b>.parquet``, or None
    and the reason when the benchmark has no soft labels. A file that names pairs the benchmark lacks is stale:
    a GeceError."""
    path = root / layout.annotated(benchmark)
    if not path.is_file():
        return None, NO_FILE.format(path=layout.annotated(benchmark), b=benchmark)
    table, _ = read_table(path, AnnotatedPair)
    unknown = sorted(set(table["pair_id"]) - set(pairs["pair_id"]))
    if unknown:
        raise GeceError(
            f"{path}: names {len(unknown)} pair(s) that {layout.prepared_path(benchmark)} lacks",
            problems=[f"pair_id {u!r}" for u in unknown[:20]],
            hint=f"the annotations are from another version of the benchmark: rerun `gece annotate "
            f"--benchmark {benchmark}` (dvc repro annotate@{benchmark})",
        )
    y_soft = table.set_index("pair_id")["y_soft"].astype("float64").reindex(pairs["pair_id"])
    if not np.isfinite(y_soft.to_numpy()).any():
        return None, NO_LABELS.format(b=benchmark, path=layout.annotated(benchmark))
    return y_soft, None


def group_counts(labels: np.ndarray, rows: pd.DataFrame) -> dict[str, dict]:
    """Per group (named as :func:`gece.stats.by_group.encode` names it): its distinct (sent_more, sent_less) pairs
    and clusters among the prepared ``rows`` (:func:`gece.pipeline.run_report.pair_counts`)."""
    names, codes = by_group.encode(labels)
    inside = codes >= 0
    counts = run_report.pair_counts(rows[inside], codes[inside])
    return {
        names[i]: {"n_distinct": int(counts.at[i, "n_distinct"]), "n_clusters": int(counts.at[i, "n_clusters"])}
        for i in counts.index
    }


def group_cell(g: by_group.GroupStat, identity: bool) -> dict:
    """A group of :func:`gece.stats.by_group.calibration_by_group` as a ``GroupCell`` dict: under a protocol against
    the labels (``identity``: :attr:`GroupTarget.labels`) its stereotype share (``pct_stereotype``, share of pairs
    with p > 0.5) and the share's interval (``pct_stereotype_ci_low`` / ``_ci_high``); under the soft protocol
    neither (its pairs are the annotated ones)."""
    cell = vars(g).copy()
    share = {
        SHARE: cell.pop("share"),
        f"{SHARE}_ci_low": cell.pop("share_low"),
        f"{SHARE}_ci_high": cell.pop("share_high"),
    }
    return cell | share if identity and share[SHARE] is not None else cell


def constant_reason(y: np.ndarray) -> str | None:
    """Why a run gets no calibration test: its pairs have one label (None when y varies, or there are no pairs)."""
    values = np.unique(y)
    return CONSTANT_Y.format(y=values[0]) if values.size == 1 else None


def unit_variance(rows: pd.DataFrame) -> str:
    """The variance of the calibration tests of the prepared ``rows`` (sentences and ``cluster``) a run scores:
    :func:`gece.stats.calibration_tests.variance_for` of their distinct pairs and clusters."""
    counts = run_report.pair_counts(rows).iloc[0]
    return calibration_tests.variance_for(int(counts["n_distinct"]), int(counts["n_clusters"]))


def overall_tests(p: np.ndarray, y: np.ndarray, clusters: np.ndarray, metric: MetricsParams, variance: str) -> dict:
    """The calibration tests of every pair of a run (``CalibrationTestReport``) with z's ``variance``
    (:func:`unit_variance`), or why there are none."""
    reason = constant_reason(y) or (None if p.size else "no pairs")
    if reason:
        return {
            "n": int(p.size),
            "z": None,
            "p_z": None,
            "ece": None,
            "p_consistency": None,
            "variance": None,
            "reason": reason,
        }
    (test,) = calibration_tests.calibration_tests(
        p, y, None, 1, None, metric.n_bins, metric.binning, metric.bootstrap, metric.seed, clusters, variance
    )
    return {
        "n": test.n,
        "z": test.z,
        "p_z": test.p_z,
        "ece": test.ece,
        "p_consistency": test.p_consistency,
        "variance": variance,
        "reason": None,
    }


def group_tests(
    grouping: str,
    labels: np.ndarray,
    p: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    min_size: int,
    metric: MetricsParams,
    variance: str,
) -> tuple[dict[str, dict], str | None, str | None]:
    """Per group (named as :func:`gece.stats.by_group.encode` names it) its calibration tests, Holm-corrected over
    the groups of at least ``min_size`` pairs; z's ``variance`` (None when there are no tests); why there are none
    (then ``{}``)."""
    reason = constant_reason(y) or (OUTCOME_TEXT.format(grouping=grouping) if grouping in OUTCOME_GROUPINGS else None)
    if reason:
        return {}, None, reason
    names, codes = by_group.encode(labels)
    tested = np.bincount(codes[codes >= 0], minlength=len(names)) >= min_size
    m = metric
    results = calibration_tests.calibration_tests(
        p, y, codes, len(names), tested, m.n_bins, m.binning, m.bootstrap, m.seed, clusters, variance
    )
    fields = ("z", "p_z", "p_z_holm", "p_consistency", "p_consistency_holm")
    tests = {name: {k: getattr(r, k) for k in fields} for name, r in zip(names, results, strict=True) if r}
    return tests, variance, None


def run_groups(
    scores: pd.DataFrame,
    pairs: pd.DataFrame,
    y_soft: pd.Series | None,
    soft_reason: str | None,
    settings: GroupsParams,
    metric: MetricsParams,
    source: str,
) -> list[dict]:
    """Every grouping and protocol of one run's scores (``RUN_COLUMNS``) as ``GroupingReport`` dicts.

    ``pairs``: the prepared pairs (the grouping columns) and ``y_soft`` their soft labels, both indexed
    by ``pair_id``; ``source`` names the run in errors.
    """
    ids = scores["pair_id"].to_numpy(object)
    missing = [i for i in ids if i not in pairs.index]
    if missing:
        raise GeceError(
            f"{source}: {len(missing)} scored pair(s) are not in the prepared benchmark",
            problems=[f"pair_id {m!r}" for m in missing[:20]],
            hint="scores and prepared pairs come from different versions of the benchmark: rerun extract (dvc repro)",
        )
    p = scores["p"].to_numpy(np.float64)
    y = scores["y"].to_numpy(np.float64)
    gm, gl = scores["gender_more"].to_numpy(object), scores["gender_less"].to_numpy(object)
    soft = None if y_soft is None else y_soft.reindex(ids).to_numpy(np.float64)
    targets = {name: declared.target(y, soft) for name, declared in TARGETS.items()}
    rows = pairs.loc[ids, ["sent_more", "sent_less", "cluster"]]
    variance = unit_variance(rows)
    out = []
    for grouping in settings.by:
        if grouping in SYNTH_COLUMNS and grouping not in pairs.columns:  # not a SynthBias benchmark of that protocol
            continue
        if grouping in DERIVED_GROUPINGS:
            labels, why = by_group.gender_grouping(grouping, p, y, gm, gl)
        else:
            labels, why = pairs.loc[ids, grouping].to_numpy(object), None
        for protocol in settings.protocols:
            target, declared = targets[protocol], TARGETS[protocol]
            if target is None:
                out.append(
                    {
                        "grouping": grouping,
                        "protocol": protocol,
                        "n": 0,
                        "n_left_out": len(p),
                        "left_out": None,
                        "groups": [],
                        "gap": None,
                        "reason": soft_reason,
                    }
                )
                continue
            extra, kind, tests_reason = {}, None, None
            if declared.labels:
                extra = group_counts(labels, rows)
                tested, kind, tests_reason = group_tests(
                    grouping, labels, p, y, rows["cluster"].to_numpy(object), settings.min_size, metric, variance
                )
                extra = {g: extra[g] | tested.get(g, {}) for g in extra}
            r = by_group.calibration_by_group(
                p,
                target,
                labels,
                settings.min_size,
                metric.n_bins,
                metric.binning,
                metric.bootstrap,
                metric.seed,
                metric.ci,
                left_out=why,
                clusters=rows["cluster"].to_numpy(object),
            )
            out.append(
                {
                    "grouping": grouping,
                    "protocol": protocol,
                    "n": r.n,
                    "n_left_out": r.n_left_out,
                    "left_out": r.left_out,
                    "groups": [group_cell(g, declared.labels) | extra.get(g.group, {}) for g in r.groups],
                    "gap": vars(r.gap),
                    "reason": None,
                    "variance": kind,
                    "tests_reason": tests_reason,
                }
            )
    return out


def groups_benchmark(params: Params, benchmark: str, reports: str | Path = layout.REPORTS, root: Path = Path()) -> dict:
    """Every run of ``benchmark`` -> ``reports/groups/<b>.json`` (the report stage renders its tables). Everything
    is computed before anything is written."""
    pairs, _ = read_table(root / layout.prepared_path(benchmark), SYNTH_SCHEMAS[params.benchmarks[benchmark].synthbias])
    soft = any(TARGETS[p].soft for p in params.groups.protocols)
    y_soft, soft_reason = soft_labels(benchmark, pairs, root) if soft else (None, None)
    indexed = pairs.set_index("pair_id", drop=False)
    m = params.metrics
    report = {
        "benchmark": benchmark,
        "n_bins": m.n_bins,
        "binning": m.binning,
        "draws": m.bootstrap,
        "seed": m.seed,
        "level": m.ci,
        "min_size": params.groups.min_size,
        "runs": {},
        "tests": {},
    }
    for name in runs.runs(params, benchmark, root):
        scores, _ = runs.load_scores(params, benchmark, name, runs.RUN_COLUMNS, root)
        report["runs"][name] = run_groups(
            scores, indexed, y_soft, soft_reason, params.groups, m, f"{benchmark} / {name}"
        )
        rows = indexed.loc[scores["pair_id"].to_numpy(object)]
        report["tests"][name] = overall_tests(
            scores["p"].to_numpy(np.float64),
            scores["y"].to_numpy(np.float64),
            rows["cluster"].to_numpy(object),
            m,
            unit_variance(rows),
        )
    GroupsReport.model_validate(report)
    out = report_layout.report_path(report_layout.groups_file(benchmark), reports)
    write_json(out, report, GroupsReport)
    log.info("%s: calibration by group of %d runs -> %s", benchmark, len(report["runs"]), out)
    return report


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "calibration by group (Gender-ECE generalised, the paper's Table 4): per-group ECE with intervals and the "
    "largest gap, every run of a benchmark (DVC stage groups)"
)
EXAMPLES = (
    "gece groups --benchmark winobias     # every run -> reports/groups/winobias.json (the DVC stage)",
    "gece groups --benchmark winobias --json | jq '.runs[\"paper-gpt-j-6b\"][0].gap'",
)
DESCRIPTION = (
    "Groupings, protocols and the smallest group come from the groups section of params.yaml; bins, "
    "resamples, seed and level from its metrics section. docs/metrics.md#calibration-by-group."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--benchmark",
        required=True,
        help="every run of this benchmark (models and references of params.yaml) -> reports/groups/<benchmark>.json",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the benchmark's prepared pairs, score files and released scores
    (:func:`gece.cmd.run_tables.run_reads`) and its annotated pairs."""
    try:
        return [*run_tables.run_reads(args), layout.annotated(args.benchmark)]
    except GeceError:  # no plain id: run refuses it
        return []


def writes(args: argparse.Namespace) -> dict[str, Path]:
    """The benchmark's groups report."""
    try:
        return {"the groups report": layout.REPORTS / report_layout.groups_file(layout.benchmark_id(args.benchmark))}
    except GeceError:  # no plain id: run refuses it
        return {}


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say
STAGE = {
    "name": "groups",
    "about": "calibration by group (Gender-ECE generalised, the paper's Table 4): every run, grouping (groups.by) and "
    "protocol (groups.protocols); the soft protocol reads the annotators' soft labels of the annotate stage",
    "argv": ["-q", "groups", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": [
        *RUN_SECTIONS,
        "groups",
        *("metrics.n_bins", "metrics.binning", "metrics.bootstrap", "metrics.seed", "metrics.ci"),
    ],
    "notes": {"data/reference": "the released scores of the references"},
}


def run(args: argparse.Namespace) -> int:
    params = require_params(args)
    benchmark = run_tables.benchmark_of(args, params)
    report = groups_benchmark(params, benchmark)
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.quiet:
        for name, results in report["runs"].items():
            rows = {
                f"{r['grouping']} / {r['protocol']} / {g['group']}": {
                    "n": g["n"],
                    "ece": g["ece"],
                    "ci_low": g["ci_low"],
                    "ci_high": g["ci_high"],
                }
                for r in results
                for g in r["groups"]
            }
            rows |= {
                f"{r['grouping']} / {r['protocol']}: largest gap": {
                    "n": r["n"],
                    "ece": r["gap"]["gap"],
                    "ci_low": r["gap"]["ci_low"],
                    "ci_high": r["gap"]["ci_high"],
                }
                for r in results
                if r["gap"] is not None
            }
            command.out.print(
                run_tables.rows_table(
                    f"{benchmark} / {name}", "grouping / protocol / group", rows, ["n", "ece", "ci_low", "ci_high"]
                )
            )
            for r in results:
                if r["reason"]:
                    command.out.print(plain(f"{r['grouping']} / {r['protocol']}: {r['reason']}"), highlight=False)
    return 0
