"""Stage extract: score every prepared pair of every benchmark with a model, loaded once ->
``artifacts/tokens/<m>/<b>.parquet`` (every target token's log-probability and logit) and its metadata.

A word's and a side's probability are not computed here but by the score stage (:mod:`gece.pipeline.score`),
so changing ``extract.word_prob`` runs no model. A benchmark is scored by :mod:`gece.scoring.extraction`, whose
import closure is the code that determines a token file's bytes. When the stage runs, a benchmark whose token
file still fits is not scored again (docs/dvc.md, "Reuse by content"), in this order:

1. a variant of a benchmark scored in this run (the same pairs under a rule that extracts the same tokens):
   its file is copied;
2. the file the last recorded run of this stage wrote (``dvc.lock`` and DVC's cache, :mod:`gece.pipeline.reuse`)
   whose fingerprint (:func:`gece.scoring.extraction.fingerprint`: the pairs, the entry, the settings, the
   library versions and the hash of the scoring code) is this run's;
3. the file of another registry entry that fed the same token ids to the same weights
   (:func:`gece.scoring.extraction.content_key`, checked with the tokenizer alone, and the weights' hashes):
   its rows, under this entry's name.

Only the others load the model. So an edit outside the scoring code re-scores nothing, and every token
file stays byte-identical.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.catalog.scoring_rules import RULE_NAMES, RuleName
from gece.cmd import command, options
from gece.cmd.command import Output
from gece.io.files import paired
from gece.io.files.json_reader import read_json
from gece.io.files.json_writer import write_json
from gece.io.files.output_dirs import check_output_dir
from gece.io.files.outputs import check_output
from gece.io.files.readers import check_unique_ids, iter_table, pair_ids, parquet_rows, read_table
from gece.io.files.writer import write_table
from gece.io.paths import layout
from gece.io.schemas.pair_rows import PreparedPair
from gece.io.schemas.tokens import ExtractMeta, ExtractTiming, TokenRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.params import params_if_valid, require_params
from gece.pipeline import reuse
from gece.scoring import extraction, planning
from gece.scoring.prompts import Prompted

log = logging.getLogger("gece")


def effective(
    settings: ExtractParams, spec: ModelSpec, benchmark: str, rules: Mapping[str, RuleName] | None = None
) -> ExtractParams:
    """The settings that score ``benchmark`` with ``spec``: its rule (``rules[benchmark]``, the rule of its
    params.yaml entry, :attr:`gece.io.settings.params.Params.rules`; else ``settings.rule``), and the smaller of
    ``extract.limit`` and ``registry.<model>.limit``."""
    limit = min((x for x in (settings.limit, spec.limit) if x is not None), default=None)
    return settings.model_copy(update={"rule": (rules or {}).get(benchmark, settings.rule), "limit": limit})


def fingerprint(
    prepared: Path, model_id: str, spec: ModelSpec, settings: ExtractParams, prompt: Prompted | None = None
) -> str:
    """:func:`gece.scoring.extraction.fingerprint` of a benchmark's effective settings (:func:`effective`); under a
    prompt, with the prompt (:meth:`gece.scoring.prompts.Prompted.key`)."""
    key = extraction.fingerprint(prepared, model_id, spec, settings.rule, settings.limit)
    return key if prompt is None else prompt.key(key)


def inputs(prepared: Path, benchmark: str, n: int) -> extraction.Inputs:
    """What :func:`gece.scoring.extraction.extract` reads, through this package's validating readers."""
    return extraction.Inputs(
        prepared=prepared,
        benchmark=benchmark,
        pairs=n,
        windows=lambda: iter_table(prepared, PreparedPair, extraction.WINDOW_PAIRS, limit=n),
        read_tokens=lambda path: read_table(path, TokenRow),
    )


@contextlib.contextmanager
def model_of(spec: ModelSpec, loaded: object | None = None, resolved: object | None = None) -> Iterator[object]:
    """The model of ``spec``: ``loaded`` when the caller has one (left as it is), else loaded here
    (:func:`gece.scoring.extraction.load`) and, under the vLLM backend, its engine stopped on the way out
    (:func:`gece.scoring.vllm_backend.close`)."""
    if loaded is not None:
        yield loaded
        return
    lm = extraction.load(spec, resolved)
    try:
        yield lm
    finally:
        if spec.backend == "vllm":
            extraction.vllm_module().close(lm)


def extract(
    prepared: str | Path,
    out: str | Path,
    model_id: str,
    spec: ModelSpec,
    settings: ExtractParams | None = None,
    *,
    meta_out: str | Path | None = None,
    on_shard: typing.Callable[[int], None] | None = None,
    loaded: object | None = None,
    shards: str | Path | None = None,
    key: str | None = None,
    rules: Mapping[str, RuleName] | None = None,
    prompt: Prompted | None = None,
) -> tuple[ExtractMeta, ExtractTiming]:
    """artifacts/prepared/<b>.parquet -> artifacts/tokens/<m>/<b>.parquet, <b>.meta.json and <b>.timing.json
    (:func:`gece.scoring.extraction.extract`), every path checked before any work.

    The benchmark's rule (``rules[benchmark]``, else ``settings.rule``; :func:`effective`) says what is scored:
    the target words (``target``) or the whole sentences (``sentence``); a pair with a word at its sentence's
    first token is fed with the prefix token (BOS, else EOS) in front (:func:`gece.scoring.planning.prefix_pairs`;
    counted in the meta's ``prefixed_sentences``). Shards go under ``shards`` (default
    :func:`gece.io.paths.layout.shards_dir`, beside ``out``; the stage's are
    :func:`gece.io.paths.layout.tokens_shards_dir`,
    outside the folder DVC removes before a run). ``loaded`` is an already loaded
    :class:`gece.scoring.models.LoadedModel` of ``spec`` (tests, benchmarks), and ``key`` the :func:`fingerprint`
    of these arguments when the caller has it already (:func:`extract_model`).
    """
    from gece.scoring import models

    prepared, out, settings = Path(prepared), Path(out), settings or ExtractParams()
    outputs = extraction.Outputs(
        tokens=out,
        meta=Path(meta_out) if meta_out else layout.meta_path(out),
        timing=layout.timing_path(out),
        shards=Path(shards) if shards else layout.shards_dir(out),
    )
    beside = f"remove it, or give OUT another name (the timing file and the shards directory are named after {out})"
    check_output(outputs.tokens, "OUT")  # every output before any is written
    check_output(outputs.meta, "the meta file", beside)
    check_output(outputs.timing, "the timing file", beside)
    check_output_dir(outputs.shards, "the shards directory", beside)
    resolved = models.resolve(spec)  # a missing package/file/hub id fails before any work
    n_rows, pmeta = parquet_rows(prepared, PreparedPair, whole=False)  # streamed
    benchmark = pmeta.get("benchmark", prepared.stem)
    settings = effective(settings, spec, benchmark, rules)
    n = n_rows if settings.limit is None else min(n_rows, settings.limit)
    check_unique_ids(prepared, pair_ids(prepared, n))  # one column read: a repeated pair fails before the model loads
    scoring = extraction.Scoring(
        model_id=model_id,
        spec=spec,
        rule=settings.rule,
        limit=settings.limit,
        batch_size=settings.batch_size,
        key=key or fingerprint(prepared, model_id, spec, settings, prompt),
    )
    with model_of(spec, loaded, resolved) as lm:
        lm = lm if prompt is None else prompt.loaded(lm)
        return extraction.extract(
            inputs(prepared, benchmark, n), outputs, scoring, loaded=lm, on_shard=on_shard, resolved=resolved
        )


def pairs_key(prepared: Path, limit: int | None) -> str:
    """What the extracted tokens of a prepared file depend on among its pairs: the rows and sentences of its
    first ``limit`` pairs (not the pair ids nor the file's metadata, which name the benchmark)."""
    pairs, _ = read_table(prepared, PreparedPair)
    pairs = pairs.head(limit) if limit is not None else pairs
    return extraction.digest(rows=pairs[["row", "sent_more", "sent_less"]].to_numpy().tolist())


def retagged(
    src: Path, src_meta: Path, out: Path, updates: dict[str, object], pair_ids: Mapping[int, str] | None = None
) -> None:
    """The token file ``src`` and its meta ``src_meta`` written as ``out``: the same rows (with ``pair_ids``, row ->
    pair id, when given), the metadata with ``updates`` (the keys each file has: benchmark, model, special tokens,
    rule, limit, fingerprint), through the same writers as a scored file, so the bytes a scoring run would write."""
    frame, file_meta = read_table(src, TokenRow)
    if pair_ids is not None:
        frame = frame.assign(pair_id=frame["row"].map(pair_ids))
    write_table(out, frame, TokenRow, meta=file_meta | {k: v for k, v in updates.items() if k in file_meta})
    meta = read_json(src_meta, ExtractMeta)
    paired.check_pair(src, src_meta, meta, f"rerun gece extract --model {meta.model}")
    meta = meta.model_copy(update={k: updates[k] for k in updates if k in meta.model_fields})
    write_json(layout.meta_path(out), paired.describing(meta, out))


def copy_tokens(model_id: str, source: str, benchmark: str, rule: str, key: str, prompt: str | None = None) -> None:
    """The token file (and its meta and timing, where it has one) of ``benchmark`` from those of ``source``,
    scored in this run from the same pairs: the same rows with ``benchmark``'s pair ids, its name, rule and
    fingerprint (:func:`retagged`)."""
    src, out = layout.tokens_path(model_id, source, prompt), layout.tokens_path(model_id, benchmark, prompt)
    pairs, _ = read_table(layout.prepared_path(benchmark), PreparedPair)
    updates = {"benchmark": benchmark, "rule": rule, extraction.FINGERPRINT: key}
    retagged(src, layout.meta_path(src), out, updates, dict(zip(pairs["row"], pairs["pair_id"], strict=True)))
    if layout.timing_path(src).exists():  # not when ``source`` was itself reused from a checkout (DVC ignores timings)
        timing = read_json(layout.timing_path(src), ExtractTiming)
        write_json(layout.timing_path(out), timing.model_copy(update={"benchmark": benchmark}))


@dataclasses.dataclass
class ModelRun:
    """What ``gece extract --model`` did: the benchmarks it scored (with their timings) and those it reused."""

    scored: dict[str, ExtractTiming]
    reused: list[str]


def recorded(out: Path, previous: Mapping[str, Path], key: str) -> bool:
    """Reuse 2 (module docstring): copy the last recorded run's token file of ``out`` (and its meta) when its
    fingerprint is ``key``."""
    old, old_meta = previous.get(out.name), previous.get(layout.meta_path(out).name)
    if not (old and old_meta and parquet_rows(old, TokenRow)[1].get(extraction.FINGERPRINT) == key):
        return False
    reuse.restore({out.name: old, layout.meta_path(out).name: old_meta}, out.parent)
    return True


def same_weights(spec: ModelSpec, other: ModelSpec) -> bool:
    """Whether two registry entries load the same weights the same way (all but what acts through the token ids)."""
    drop = frozenset({"special_tokens", "limit"})
    return spec.scoring_settings(drop) == other.scoring_settings(drop)


class Siblings:
    """Reuse 3 (module docstring): the token files of the other registry entries with the same weights
    (:func:`same_weights`), in the workspace or as their last recorded run wrote them, and this entry's
    :func:`gece.scoring.extraction.content_key` of a benchmark, from its tokenizer alone (loaded once, and only
    when some sibling has a file for that benchmark)."""

    def __init__(self, model_id: str, spec: ModelSpec, registry: Mapping[str, object], lock: str | Path):
        self.spec, self.lock = spec, lock
        self.ids = [  # gece's own entries only: an engine: lm-eval entry writes no token file
            m
            for m, s in registry.items()
            if m != model_id and isinstance(s, ModelSpec) and s.reference is None and same_weights(spec, s)
        ]
        self._previous: dict[str, dict[str, Path]] = {}
        self._tokenizer: tuple[object, dict[str, str]] | None = None

    def files(self, benchmark: str) -> list[tuple[Path, Path]]:
        """Each sibling's token file of ``benchmark`` and its meta, where both exist."""
        found = []
        for m in self.ids:
            here = layout.tokens_path(m, benchmark)
            if here.is_file() and layout.meta_path(here).is_file():
                found.append((here, layout.meta_path(here)))
                continue
            if m not in self._previous:
                self._previous[m] = reuse.previous_outputs(layout.tokens_dir(m), self.lock)
            old, old_meta = self._previous[m].get(here.name), self._previous[m].get(layout.meta_path(here).name)
            if old and old_meta:
                found.append((old, old_meta))
        return found

    def match(self, benchmark: str, prepared: Path, settings: ExtractParams) -> tuple[Path, Path] | None:
        """A sibling's token file of ``benchmark`` (and its meta) with this entry's content key and weights."""
        candidates = self.files(benchmark)
        if not candidates:
            return None
        from gece.scoring import models

        if self._tokenizer is None:
            self._tokenizer = models.load_tokenizer(self.spec)
        tokenizer, weights = self._tokenizer
        n_rows, _ = parquet_rows(prepared, PreparedPair, whole=False)
        n = n_rows if settings.limit is None else min(n_rows, settings.limit)
        _, content = extraction.planned(tokenizer, inputs(prepared, benchmark, n), self.spec, settings.rule)
        hashes = ",".join(f"{k}={v}" for k, v in weights.items())
        for path, meta in candidates:
            file_meta = parquet_rows(path, TokenRow)[1]
            if file_meta.get(extraction.CONTENT) == content and file_meta.get("weights_sha256") == hashes:
                return path, meta
        return None


def extract_model(
    model_id: str,
    spec: ModelSpec,
    benchmarks: list[str],
    settings: ExtractParams,
    *,
    rules: Mapping[str, RuleName] | None = None,
    loaded: object | typing.Callable[[], object] | None = None,
    lock: str | Path = reuse.LOCK,
    registry: Mapping[str, ModelSpec] | None = None,
    prompt: Prompted | None = None,
) -> ModelRun:
    """The extract stage of one model: every benchmark's prepared pairs -> ``artifacts/tokens/<model>/``, each
    scored under its rule (``rules[b]``, else ``settings.rule``), unless its token file can be reused (the
    module docstring's three ways; ``registry`` holds the entries that may have scored the same token ids).

    The model is loaded once, and only when a benchmark needs scoring (``loaded``: the caller's model, or a function
    that gives it when first needed). Under a ``prompt``, the files go to ``artifacts/prompted/<model>/<prompt>/``
    and no other entry's files are reused (their token ids are the bare sentence's).
    """
    missing = [f"{b}: {layout.prepared_path(b)}" for b in benchmarks if not layout.prepared_path(b).is_file()]
    if missing:
        raise GeceError(
            f"{len(missing)} prepared benchmark(s) of {model_id} are missing",
            problems=missing,
            hint="run the prepare stages first: dvc repro prepare (or gece prepare --benchmark <b>)",
        )
    if prompt is None:
        previous = reuse.previous_outputs(layout.tokens_dir(model_id), lock)
    else:  # the stage's folder holds every prompt's
        recorded_files = reuse.previous_outputs(layout.prompted_dir(model_id), lock).items()
        previous = {
            rel.removeprefix(f"{prompt.name}/"): p for rel, p in recorded_files if rel.startswith(f"{prompt.name}/")
        }
    siblings = Siblings(model_id, spec, registry if prompt is None and registry else {}, lock)
    name = None if prompt is None else prompt.name
    run = ModelRun({}, [])
    lm = loaded
    with contextlib.ExitStack() as opened:  # the model, once a benchmark needs it
        scored_as: dict[tuple[str, str], str] = {}  # (the pairs, what is extracted) -> the benchmark scored so
        for b in benchmarks:
            prepared, out = layout.prepared_path(b), layout.tokens_path(model_id, b, name)
            eff = effective(settings, spec, b, rules)
            key = fingerprint(prepared, model_id, spec, eff, prompt)
            same = (pairs_key(prepared, eff.limit), planning.plan_of(eff.rule))
            if same in scored_as:  # a variant of a benchmark scored in this run (benchmarks.<b>.rule): no model runs
                copy_tokens(model_id, scored_as[same], b, eff.rule, key, name)
                log.info("%s/%s: the same pairs as %s, extracted once -> %s", b, model_id, scored_as[same], out)
                run.reused.append(b)
                continue
            scored_as[same] = b
            if recorded(out, previous, key):
                log.info("%s/%s: unchanged since the recorded run, reused -> %s", b, model_id, out)
                run.reused.append(b)
                continue
            sibling = siblings.match(b, prepared, eff)
            if sibling is not None:
                updates = {
                    "model": model_id,
                    "special_tokens": spec.special_tokens,
                    "rule": eff.rule,
                    "limit": eff.limit,
                }
                retagged(*sibling, out, updates | {extraction.FINGERPRINT: key})
                log.info("%s/%s: the same token ids and weights as %s, reused -> %s", b, model_id, sibling[0], out)
                run.reused.append(b)
                continue
            lm = lm() if callable(lm) else lm or opened.enter_context(model_of(spec))
            run.scored[b] = extract(
                prepared,
                out,
                model_id,
                spec,
                settings,
                loaded=lm,
                shards=layout.tokens_shards_dir(model_id, b, name),
                key=key,
                rules=rules,
                prompt=prompt,
            )[1]
    if benchmarks:
        with contextlib.suppress(OSError):  # the shards' folder, once no benchmark has shards left in it
            layout.tokens_shards_dir(model_id, benchmarks[0], name).parent.rmdir()
    return run


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "score every prepared benchmark with a registered model, loaded once -> every target token's log-probability "
    "and logit (DVC stage extract)"
)
EXAMPLES = (
    "gece extract --model smollm2-135m   # the DVC stage: every benchmark of params.yaml",
    "gece extract artifacts/prepared/winobias.parquet /tmp/t.parquet --model smollm2-135m --limit 50",
    "gece try ./my-model --benchmark winobias --limit 100   # a model not in params.yaml",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "prepared",
        type=Path,
        nargs="?",
        help="artifacts/prepared/<benchmark>.parquet: score this one "
        "file (default: every benchmark of params.yaml's benchmarks, to artifacts/tokens/<model>/)",
    )
    p.add_argument("out", type=Path, nargs="?", help="the token file to write, with PREPARED")
    p.add_argument(
        "--model",
        required=True,
        help="model id, an entry of registry in params.yaml (a path or hub id: use gece try, or add it under registry)",
    )
    p.add_argument(
        "--meta-out", type=Path, help="run metadata JSON, with PREPARED (default: <out>.meta.json beside the output)"
    )
    p.add_argument(
        "--batch-size",
        type=options.setting(ExtractParams, "batch_size"),
        help="pairs per forward pass, a number or auto (default: {params:extract.batch_size})",
    )
    p.add_argument(
        "--limit",
        type=options.setting(ExtractParams, "limit"),
        help="score only the first N pairs (default: {params:extract.limit}; "
        "registry.<model>.limit also applies, the smaller wins)",
    )
    p.add_argument(
        "--rule",
        choices=RULE_NAMES,
        help="what a side's tokens are, with PREPARED: the target words' (target) or the whole sentence's "
        "(sentence, lm-evaluation-harness's crows_pairs; mean and shared read the same tokens, docs/metrics.md "
        "#scoring-rules) (default: the rule of the benchmark's entry, "
        "benchmarks.<b>.rule, else {params:extract.rule})",
    )
    p.set_defaults(outputs={"OUT": "out", "--meta-out": "meta_out"}, inputs=("prepared",))


def model_hint(model: str) -> str:
    return (
        f"add it to params.yaml (under registry: `my-model: {{source: {model}}}`, and to models), or try it "
        f"first without editing params.yaml: gece try {model} --benchmark winobias --limit 100"
    )


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say of --model alone
STAGE = {
    "name": "extract",
    "about": "one stage per model: the model loads once and scores every benchmark; when the stage runs again, the "
    "benchmarks whose pairs, settings and code are unchanged are reused from the last run (docs/pipeline.md)",
    "argv": ["extract", "--model", "{model}"],
    "matrix": {"model": "models"},
    "params": ["benchmarks", "extract.batch_size", "extract.rule", "extract.limit", "registry.{model}"],
    "outputs": {"the token files": {"note": "<benchmark>.parquet and <benchmark>.meta.json per benchmark"}},
    "notes": {
        "artifacts/prepared": "every benchmark's prepared pairs",
        "benchmarks": "which benchmarks, and each one's rule",
    },
}


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params and PREPARED: the model's files (a source that is a local path), and the
    finished shards of a killed run of OUT (resumed); without PREPARED (the stage), every prepared benchmark,
    the token files of the entries with the same weights (reused) and dvc.lock (the last recorded run)."""
    params = params_if_valid(args)
    spec = params.registry.get(args.model) if params is not None else None
    model = [Path(spec.source)] if spec is not None and os.path.lexists(spec.source) else []
    if args.prepared is not None and args.out is not None:
        return [*model, layout.shards_dir(args.out)]
    return [*model, layout.ARTIFACTS / "prepared", layout.ARTIFACTS / "tokens", Path("dvc.lock")]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """With PREPARED and OUT: OUT's meta (--meta-out, else beside it), timing and the shards of a killed run
    (resumed); without (the stage): the model's folder of token files, which it writes whole, and the shards of its
    killed runs beside it (both resumed; the shards are outside the stage's outputs)."""
    if args.prepared is not None and args.out is not None:
        beside = "remove it, or give OUT another name (the timing file and the shards directory are named after it)"
        meta = {} if args.meta_out else {"the meta file": Output(layout.meta_path(args.out), hint=beside)}
        return meta | {
            "the timing file": Output(layout.timing_path(args.out), hint=beside),
            "the shards directory": Output(layout.shards_dir(args.out), "scratch", updated=True, hint=beside),
        }
    try:
        folder = layout.tokens_dir(args.model)
    except GeceError:  # no plain id: run refuses it
        return {}
    return {
        "the token files": Output(folder, "folder", updated=True),
        "the shards of its killed runs": Output(folder.with_name(f"{folder.name}.shards"), "scratch", updated=True),
    }


def run(args: argparse.Namespace) -> int:
    from gece.io.settings.harness_entry import is_harness
    from gece.io.settings.ids import ID_HELP, is_id

    if not is_id(args.model):  # a path or a hub id, most likely: say where it goes
        raise GeceError(
            f"--model {args.model!r} is not a valid id",
            hint=f"{ID_HELP}. A path or hub id names a model's source: {model_hint(args.model)}",
        )
    if (args.prepared is None) != (args.out is None) or (args.prepared is None and (args.meta_out or args.rule)):
        raise GeceError(
            "give PREPARED and OUT together (one benchmark), or neither (every benchmark of params.yaml; "
            "then --meta-out and --rule do not apply)",
            hint=f"for example: {EXAMPLES[1]}",
        )
    params = require_params(args)
    if args.model not in params.registry:
        raise GeceError(
            f"--model {args.model!r} has no entry under registry in {args.params}",
            hint=f"registered models: {', '.join(params.registry) or '(none)'}; {model_hint(args.model)}",
        )
    spec = params.registry[args.model]
    if is_harness(spec):
        raise GeceError(
            f"--model {args.model!r} has engine: lm-eval: lm-evaluation-harness scores it, gece extracts no tokens",
            hint=f"the lmeval stage runs it: gece lmeval-run --model {args.model} --benchmark <b> (docs/lmeval.md)",
        )
    if spec.reference is not None:
        raise GeceError(
            f"--model {args.model!r} has source {spec.source}: released scores are read, not extracted",
            hint="the stages after extract read them (gece metrics --benchmark ...); extract scores a model of models",
        )
    settings = command.override(params.extract, batch_size=args.batch_size, limit=args.limit, rule=args.rule)
    rules = {} if args.rule is not None else params.rules  # --rule scores this benchmark with it, whatever its entry
    if args.prepared is None:
        done = extract_model(args.model, spec, list(params.benchmarks), settings, rules=rules, registry=params.registry)
        pairs = sum(t.pairs for t in done.scored.values())
        seconds = sum(t.seconds for t in done.scored.values())
        command.out.print(
            f"[green]scored[/] {plural(len(done.scored), 'benchmark')} with "
            f"{literal(args.model)} ({plural(pairs, 'pair')} in {seconds:.1f} s), reused "
            f"{len(done.reused)} -> {literal(str(layout.tokens_dir(args.model)))}",
            highlight=False,
        )
        return 0
    meta, timing = extract(args.prepared, args.out, args.model, spec, settings, meta_out=args.meta_out, rules=rules)
    command.out.print(
        f"[green]scored[/] {plural(meta.pairs, 'pair')} of {literal(meta.benchmark)} with "
        f"{literal(meta.model)} in {timing.seconds:.1f} s ({timing.pairs_per_s or 0:.1f} pairs/s) -> "
        f"{literal(str(args.out))}",
        highlight=False,
    )
    return 0
