"""Stage compare: paired bootstrap between every two runs of a benchmark (or two score files): the metrics of p, or,
on a benchmark a protocol measures (:mod:`gece.protocols.declarations`), the protocol's numbers."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gece.base.errors import GeceError
from gece.base.terminal import literal, plain, plural
from gece.base.terminal_table import Table
from gece.catalog import metric_defs
from gece.cmd import command, options, run_tables
from gece.io.files.json_writer import write_json
from gece.io.files.outputs import write_text
from gece.io.files.readers import read_table
from gece.io.paths import layout, report_layout
from gece.io.schemas.compare_report import CompareReport, PowerRuns
from gece.io.schemas.pair_rows import SYNTH_SCHEMAS, PreparedPair
from gece.io.settings.ids import is_id
from gece.io.settings.params import Params, params_or_defaults
from gece.io.settings.params_file import RUN_SECTIONS
from gece.io.settings.sections import AblateParams, BenchmarkSpec, CompareParams, MetricsParams
from gece.pipeline import clusters, runs
from gece.protocols import declarations
from gece.report import markdown as report_md
from gece.report.cells import format_significant
from gece.report.protocol import Protocol
from gece.stats import ablation
from gece.stats import engine_agreement as stats_agreement
from gece.stats.ablation import Run

log = logging.getLogger("gece")


def compare(
    loaded: list[tuple[Run, dict[str, str]]],
    out: str | Path | None,
    markdown_out: str | Path | None,
    metric_settings: MetricsParams,
    compare_settings: CompareParams,
    power_runs: list[str] = (),
    power_of: PowerRuns = "paper",
    sources: list[str] | None = None,
    pairs: pd.DataFrame | None = None,
    agreement: Sequence[dict] = (),
    protocol: Protocol | None = None,
    entry: BenchmarkSpec | None = None,
) -> dict:
    """Paired bootstrap between every two of the ``loaded`` runs (one benchmark's: run and metadata), each two
    on the pairs both score (:func:`gece.stats.ablation.compare`).

    ``pairs``: the prepared pairs indexed by pair_id (sentences and ``cluster``): the bootstrap resamples
    clusters, the same for every run, and the report counts the distinct pairs and clusters beside each n. None:
    every pair is its own cluster and the counts are null. ``agreement``: the entries of :func:`agreements`,
    written under ``agreement`` when there are any. ``protocol`` (with the benchmark's ``entry``): compare its
    numbers (:attr:`gece.report.protocol.Protocol.compared`, on its own units) instead of the metrics of p.

    The minimum detectable differences are summarized over the pairs of ``power_runs``, which ``power_of`` names
    (``paper``: the released reference runs, when the benchmark has them; ``all``: every run that is no check), or
    over every pair when fewer than two of them are loaded.
    """
    named: dict[str, Run] = {}
    benchmarks_seen = set()
    for i, (run, meta) in enumerate(loaded):
        name = meta.get("model") or f"run{i + 1}"
        while name in named:  # the same model twice (e.g. two revisions): keep both apart
            name = f"{name}'"
        named[name] = run
        benchmarks_seen.add(meta.get("benchmark") or "?")
    benchmark = " / ".join(sorted(benchmarks_seen))
    describe = clusters.describer(pairs)
    c = compare_settings
    what = (
        {"keys": protocol.compared, "measure": protocol.comparer(entry, pairs, metric_settings, c.draws, c.seed)}
        if protocol is not None
        else {}
    )
    try:
        scored = np.array(list(ablation.pair_ranks(named)), dtype=object)
        result = ablation.compare(
            named,
            c.draws,
            c.seed,
            c.ci,
            c.alpha,
            metric_settings.n_bins,
            metric_settings.binning,
            power=c.power,
            power_runs=[name for name in named if name in power_runs],
            power_of=power_of,
            describe=describe,
            **what,
        )
    except ValueError as e:
        raise GeceError(
            f"cannot compare {', '.join(sources or named)}: {e}",
            hint="compare score files of the same benchmark (the same labels on the pairs they share)",
        ) from e
    counts = describe(scored)[1] if describe is not None and len(scored) else {}
    partial = {name: len(r.pair_id) for name, r in named.items() if len(r.pair_id) != result["n"]}
    if partial:
        log.warning(
            "compare %s: each two runs are compared on the pairs both score, n beside each (%d pairs in all; %s)",
            benchmark,
            result["n"],
            ", ".join(f"{k} has {v}" for k, v in partial.items()),
        )
    result = {"benchmark": benchmark, **result, **counts}
    if agreement:  # absent when no run is checked against another: the report of a plain configuration is unchanged
        result["agreement"] = list(agreement)
    CompareReport.model_validate(result)
    if out:
        write_json(out, result, CompareReport)
    if markdown_out:
        write_text(markdown_out, report_md.compare_markdown(result, labels(protocol)))
    return result


def labels(protocol: Protocol | None) -> dict[str, str]:
    """The labels of a protocol's compared numbers (none without one: the registry's)."""
    return {} if protocol is None else {k: protocol.metric[k].label for k in protocol.compared}


def agreements(
    params: Params,
    benchmark: str,
    loaded: dict[str, Run],
    describe: ablation.Describe | None,
    metric_settings: MetricsParams,
    compare_settings: CompareParams,
) -> list[dict]:
    """Every run of ``loaded`` (run id -> its scores on ``benchmark``) whose registry entry is ``checked_against``
    another run of ``loaded``, against that run on the pairs both score (:func:`gece.stats.engine_agreement.agreement`):
    the same pairs, clusters and draws as their comparison."""
    out = []
    rank = ablation.pair_ranks(loaded)
    for m, run in loaded.items():
        against = params.registry[m].checked_against
        if against not in loaded:
            continue
        try:
            a, b = ablation.paired((m, against), run, loaded[against], rank)
        except ValueError as e:
            raise GeceError(
                f"registry.{m}.checked_against: {e} on {benchmark}",
                hint=f"check {m} against a run of the same model on the same benchmark, or remove checked_against",
            ) from e
        clusters, counts = describe(a.pair_id) if describe is not None else (None, {})
        c = compare_settings
        found = stats_agreement.agreement(
            a,
            b,
            _lld(params, benchmark, m, a.pair_id),
            _lld(params, benchmark, against, a.pair_id),
            c.draws,
            c.seed,
            c.ci,
            metric_settings.n_bins,
            metric_settings.binning,
            clusters=clusters,
        )
        out.append({"run": m, "against": against, "n": found.pop("n"), **counts, **found})
    return out


def _lld(params: Params, benchmark: str, model: str, ids: np.ndarray) -> np.ndarray:
    """Each pair's log-likelihood difference ``logprob_more − logprob_less`` in the run's score file, in ``ids``
    order."""
    scores = runs.load_scores(params, benchmark, model, ["pair_id", "logprob_more", "logprob_less"])[0]
    scores = scores.set_index("pair_id").loc[ids]
    return (scores["logprob_more"] - scores["logprob_less"]).to_numpy(np.float64)


def compare_files(
    score_paths: list[Path],
    out: str | Path | None,
    markdown_out: str | Path | None,
    metric_settings: MetricsParams,
    compare_settings: CompareParams,
) -> dict:
    """:func:`compare` of score files (each run named by its metadata). The bootstrap resamples the clusters of the
    benchmark the files name when its prepared pairs hold every scored pair (:func:`prepared_pairs`), else pairs."""
    loaded = [runs.load_run_file(path) for path in score_paths]
    ids = {i for run, _ in loaded for i in run.pair_id}
    names = {meta.get("benchmark") for _, meta in loaded}
    pairs = prepared_pairs(names.pop(), ids) if len(names) == 1 and None not in names else None
    if pairs is None:
        log.warning(
            "compare: no prepared pairs of one benchmark hold every pair of %s; the bootstrap resamples pairs as "
            "if none repeated",
            " and ".join(map(str, score_paths)),
        )
    return compare(
        loaded,
        out,
        markdown_out,
        metric_settings,
        compare_settings,
        sources=[str(path) for path in score_paths],
        pairs=pairs,
    )


def prepared_pairs(benchmark: str, ids: set[str] | None = None) -> pd.DataFrame | None:
    """The prepared pairs of ``benchmark`` (``layout.prepared_path``) indexed by pair_id, or None when the file is
    missing, is not a valid prepared file, or lacks one of ``ids``."""
    if not is_id(benchmark):
        return None
    path = layout.prepared_path(benchmark)
    if not path.is_file():
        return None
    try:
        pairs = read_table(path, PreparedPair)[0].set_index("pair_id")
    except GeceError:
        return None
    return pairs if ids is None or ids <= set(pairs.index) else None


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "paired bootstrap between two score files, or every run of a benchmark, with its verdict in words (DVC stage "
    "compare)"
)
EXAMPLES = (
    "gece compare --benchmark winogender     # every run of winogender (the DVC stage writes --out, --markdown-out)",
    "gece compare artifacts/scores/winobias/smollm2-135m.parquet artifacts/scores/winobias/gemma-3-270m.parquet",
    "gece compare --benchmark winobias --json > /tmp/compare.json",
)
DESCRIPTION = (
    "Differences A − B on the same pairs: for the errors (ECE, Gender-ECE, Brier) negative means A is "
    "better calibrated; for human alignment positive means A agrees more with people."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scores", type=Path, nargs="*", help="two score files of the same benchmark")
    p.add_argument("--benchmark", help="compare every run of this benchmark (models and references of params.yaml)")
    p.add_argument("--out", type=Path, help="write the JSON here (default: not written)")
    p.add_argument("--markdown-out", type=Path, help="write the markdown table here (default: not written)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table and verdicts")
    p.add_argument(
        "--draws",
        type=options.setting(CompareParams, "draws"),
        help="paired bootstrap resamples, 2000 to 1000000 (default: {params:ablate.compare.draws})",
    )
    p.set_defaults(outputs={"--out": "out", "--markdown-out": "markdown_out"}, inputs=("scores",))


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides its score files: with --benchmark, that benchmark's
    (:func:`gece.cmd.run_tables.run_reads`) and what its protocol reads;
    with score files, the prepared pairs of the benchmark their metadata names (one of artifacts/prepared/)."""
    if args.benchmark:
        return run_tables.run_reads(args) + declarations.benchmark_reads(args)
    return [layout.ARTIFACTS / "prepared"]


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads(), --out and --markdown-out say
STAGE = {
    "name": "compare",
    "about": "paired bootstrap between every two runs of a benchmark",
    "argv": [
        *("-q", "compare", "--benchmark", "{benchmark}"),
        *("--out", str(layout.REPORTS / report_layout.compare_file("{benchmark}"))),
        *("--markdown-out", str(layout.REPORTS / report_layout.compare_markdown("{benchmark}"))),
    ],
    "matrix": {"benchmark": "benchmarks"},
    "params": [
        *RUN_SECTIONS,
        "metrics.n_bins",
        "metrics.binning",
        "ablate.compare",
    ],
}


def run(args: argparse.Namespace) -> int:
    params = params_or_defaults(args)
    metric_settings = params.metrics if params else MetricsParams()
    compare_settings = command.override(params.ablate.compare if params else AblateParams().compare, draws=args.draws)
    if args.benchmark is not None:
        if args.scores:
            raise GeceError(
                f"compare got score files ({', '.join(map(str, args.scores))}) and --benchmark {args.benchmark}",
                hint="pass either two score files or --benchmark NAME, not both",
            )
        benchmark = run_tables.benchmark_of(args, params)
        entry = params.benchmarks[benchmark]
        protocol = declarations.of(entry)
        loaded = {name: runs.load_run(params, benchmark, name) for name in runs.runs(params, benchmark)}
        references = [name for name in loaded if runs.is_reference(params, name)]
        checks = runs.checks(params)  # the power summary's runs: the authors', else every run that is no check
        power_runs, power_of = (
            (references, "paper") if len(references) > 1 else ([m for m in loaded if m not in checks], "all")
        )
        pairs = read_table(layout.prepared_path(benchmark), SYNTH_SCHEMAS[entry.synthbias])[0].set_index("pair_id")
        checked = agreements(
            params,
            benchmark,
            {m: run for m, (run, _) in loaded.items()},
            clusters.describer(pairs),
            metric_settings,
            compare_settings,
        )
        result = compare(
            list(loaded.values()),
            args.out,
            args.markdown_out,
            metric_settings,
            compare_settings,
            power_runs=power_runs,
            power_of=power_of,
            pairs=pairs,
            agreement=checked,
            protocol=protocol,
            entry=entry,
        )
    elif len(args.scores) == 2:
        protocol = None
        result = compare_files(args.scores, args.out, args.markdown_out, metric_settings, compare_settings)
    else:
        raise GeceError(
            f"compare needs two score files, got {len(args.scores)}",
            hint="pass two score files, or --benchmark NAME for every run of a benchmark",
        )
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.quiet:
        _print_compare(result, protocol)
    return 0


def _print_compare(result: dict, protocol: Protocol | None = None) -> None:
    """The comparison as a table (A − B per metric) and its verdicts in words (a protocol's numbers by its labels)."""
    from gece.report.cells import format_p
    from gece.report.verdicts import verdict

    keys = list(result["pairs"][0]["metrics"]) if result["pairs"] else []
    table = Table(
        title=plain(
            f"{result['benchmark']}: A − B on the pairs both score (of {plural(result['n'], 'pair')}), "
            f"paired bootstrap ({result['draws']} resamples), {result['level']:.0%} intervals"
        ),
        title_justify="left",
        caption="bold: significant at α = "
        f"{result['alpha']}; †: also after Holm's correction. Errors: negative = A better calibrated; "
        "human alignment: positive = A agrees more",
        caption_justify="left",
    )
    table.add_column("A", ids=True)  # a run id is never cut (gece.base.terminal_table.Table)
    table.add_column("B", ids=True)
    table.add_column("pairs", justify="right")
    named = labels(protocol)
    for k in keys:
        table.add_column(f"Δ {named.get(k) or metric_defs.label(k)}", justify="right")
    for pair in result["pairs"]:
        cells = []
        for k in keys:
            c = pair["metrics"][k]
            text = (
                "null"
                if c["diff"] is None
                else f"{c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}], {format_p(c['p_value'])}"
            )
            text = literal(text) + (" †" if c["significant_holm"] else "")
            cells.append(f"[bold]{text}[/]" if c["significant"] else text)
        table.add_row(plain(pair["a"]), plain(pair["b"]), str(pair["n"]), *cells)
    command.out.print(table)
    lines = [
        verdict(pair["a"], pair["b"], k, pair["metrics"][k], result["level"], protocol and protocol.metric.get(k))
        for pair in result["pairs"]
        for k in keys
        if len(result["pairs"]) == 1 or pair["metrics"][k]["significant_holm"]
    ]
    if len(result["pairs"]) > 1:
        command.out.print(
            f"{plural(len(lines), 'difference')} significant after Holm's correction" + (":" if lines else "."),
            highlight=False,
        )
    for line in lines:
        command.out.print(f"  {literal(line)}", highlight=False)
    for e in result.get("agreement", []):
        what = "ECE" if e["metric"] == "ece" else "stereotype share"
        sig = [format_significant(e[k]) for k in ("diff", "ci_low", "ci_high")]
        change = "null" if e["diff"] is None else f"{sig[0]} [{sig[1]}, {sig[2]}]"
        command.out.print(
            literal(
                f"engine agreement: {e['run']} against {e['against']} on {plural(e['n'], 'pair')}: largest "
                f"|Δ log-likelihood difference| {format_significant(e['max_abs_lld_diff'])}, "
                f"{plural(e['flips'], 'verdict')} "
                f"flipped, Δ {what} {change}"
            ),
            highlight=False,
        )
