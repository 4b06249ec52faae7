"""Prepared pairs -> an lm-evaluation-harness task directory (docs/lmeval.md "Export, run, import").

One task per benchmark, ``gece_<benchmark>``, in ``<out>/gece_<benchmark>/``: ``gece_<benchmark>.yaml`` (a
``multiple_choice`` task read from local JSON: ``dataset_path: json``, no hub), ``docs.jsonl`` (one
:class:`gece.io.schemas.lmeval_files.Doc` per pair that lm-eval can score exactly) and ``export.json``
(:class:`gece.io.schemas.lmeval_files.Export`: the model, the BOS option, the pairs left out and why).

Whether a pair is exact depends on the tokenizer, so an export is for one registry entry (``--model``). Its
``special_tokens`` setting maps to lm-eval's ``add_bos_token`` (:func:`add_bos_token`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from gece.base.errors import GeceError
from gece.catalog.scoring_rules import RULE
from gece.io.files.json_writer import write_json
from gece.io.files.outputs import write_text
from gece.io.schemas.lmeval_files import Doc, Excluded, Export
from gece.io.settings.params import require_params
from gece.lmeval import requests, samples
from gece.scoring import planning

DOCS = "docs.jsonl"
RECORD = "export.json"


def task_name(benchmark: str) -> str:
    """The lm-eval task of a benchmark."""
    return f"{samples.TASK_PREFIX}{benchmark}"


def add_bos_token(rule: str, special_tokens: bool) -> bool | None:
    """lm-eval's ``add_bos_token`` for a registry entry's ``special_tokens`` under a rule. Extraction ``target``
    (:mod:`gece.catalog.scoring_rules`): gece encodes each sentence with the tokenizer's special tokens (``true``:
    lm-eval's
    default, None) or without (``false``: False). Extraction ``sentence``: gece always feeds the prefix token (the
    tokenizer's BOS) before the sentence, so lm-eval must add it to every context (True); the ``sentence``
    request's empty context gets it anyway."""
    if RULE[rule].extraction == "target":
        return None if special_tokens else False
    return True


def model_args(model_dir: str | Path, add_bos: bool | None) -> str:
    """The ``--model_args`` of lm-eval's HF backend for an export: float32, as gece loads on the CPU."""
    bos = "" if add_bos is None else f",add_bos_token={add_bos}"
    return f"pretrained={model_dir},dtype=float32{bos}"


def lmeval_encoder(model_dir: str | Path, add_bos: bool | None) -> tuple[Any, int]:
    """The tokenizer as lm-eval's HF backend loads and calls it, as ``encode(text, special)``, and its prefix token
    (BOS, else EOS)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, **({} if add_bos is None else {"add_bos_token": add_bos}))

    def encode(text: str, special: bool | None) -> list[int]:
        if special is None:
            special = add_bos
        return tok.encode(text, **({} if special is None else {"add_special_tokens": special}))

    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    return encode, int(prefix)


def documents(
    pairs: pd.DataFrame, rule: str, word_prob: str, gece_tok: Any, special_tokens: bool, encode: Any, prefix_id: int
) -> tuple[list[Doc], list[Excluded]]:
    """The documents of the pairs lm-eval scores exactly under ``rule`` and the pairs left out (with the reason),
    in the prepared order. ``gece_tok`` is the tokenizer gece scores with; ``encode``/``prefix_id`` lm-eval's."""
    recs = pairs.to_dict("records")
    spec = RULE[rule]
    sides, _ = planning.plans_for(gece_tok, pairs, special_tokens, extraction=planning.plan_of(rule))
    docs, out = [], []
    for rec, (more, less) in zip(recs, sides, strict=True):
        req = requests.request_for(rec, rule)
        several = len(more.words[0]) > 1 or len(less.words[0]) > 1
        if isinstance(req, requests.Request) and spec.extraction == "target" and word_prob == "max" and several:
            req = "max"
        if isinstance(req, requests.Request):
            n_tokens, ok = [], True
            for side, other, (ctx, cont) in ((more, less, req.more), (less, more, req.less)):
                positions = requests.scored_positions(side, other, rule)
                fed, n_ctx = requests.lmeval_tokens(encode, prefix_id, ctx, cont)
                ok = ok and requests.exact(side, positions, fed, n_ctx)
                n_tokens.append(len(positions))
            if not ok:
                req = "tokens"
        if isinstance(req, str):
            out.append(Excluded(pair_id=rec["pair_id"], row=int(rec["row"]), reason=req))
            continue
        punct = None
        if spec.matched:
            positions = requests.scored_positions(more, less, rule)
            punct = requests.punctuation_only(more, positions, [gece_tok.decode([i]) for i in more.ids])
        elif spec.extraction == "sentence":
            punct = False
        fields: dict[str, Any] = {
            "pair_id": rec["pair_id"],
            "sha": requests.pair_sha(rec["sent_more"], rec["sent_less"]),
        }
        if spec.request == "suffix":
            fields |= {"contexts": [req.more[0], req.less[0]], "continuation": req.more[1]}
        else:
            fields |= {"context": req.more[0], "choices": [req.more[1], req.less[1]]}
        docs.append(Doc(**fields, n_tokens=n_tokens, punct_only=punct))
    return docs, out


def task_yaml(task: str, docs_path: Path, rule: str) -> str:
    """The lm-eval task config: multiple choice over local JSON, gold 0 (sent_more), no delimiter added."""
    config: dict[str, Any] = {
        "task": task,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(docs_path)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "target_delimiter": "",
    }
    if RULE[rule].request == "suffix":  # several contexts, one continuation (lm-eval's multiple-input pattern)
        config |= {"doc_to_text": "gold", "doc_to_choice": "contexts", "doc_to_target": "continuation"}
    else:
        config |= {"doc_to_text": "context", "doc_to_choice": "choices", "doc_to_target": "gold"}
    config |= {"metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
    config |= {"metadata": {"version": 1.0, "gece_rule": rule}}
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def write_task(out: Path, record: Export, docs: list[Doc]) -> Path:
    """Write one task's directory (its docs, its config, its record) and return it."""
    if not docs:
        raise GeceError(
            f"{record.benchmark}: no pair of {record.pairs_prepared} can be scored exactly through lm-eval under "
            f"rule {record.rule}; nothing was written",
            hint="see docs/lmeval.md (what is left out) for the rules each pair must meet",
        )
    folder = out / record.task
    docs_path = (folder / DOCS).resolve()
    lines = "".join(
        json.dumps(d.model_dump(exclude_none=True), ensure_ascii=False, sort_keys=True) + "\n" for d in docs
    )
    write_text(docs_path, lines)
    write_text(folder / f"{record.task}.yaml", task_yaml(record.task, docs_path, record.rule))
    write_json(folder / RECORD, record, Export)
    return folder


def loadable(params: Any, model: str) -> Any:
    """The registry entry ``model`` (``--model``) if it is a model lm-eval can load, else a GeceError naming it."""
    spec = params.registry.get(model)
    if spec is None:
        raise GeceError(f"--model {model!r}: no such registry entry", hint="see registry in params.yaml")
    if spec.reference is not None or str(spec.source).startswith(samples.SOURCE_PREFIX):
        raise GeceError(
            f"--model {model!r}: source {spec.source} holds scores, not a model lm-eval can load",
            hint="name a registry entry gece scores itself (a package, a directory or a hub id)",
        )
    return spec


def model_dir(spec: Any) -> Path:
    """The transformers directory lm-eval should load for a registry entry: the model directory or hub snapshot
    gece reads, or, for a GGUF (a ``package:`` source included), gece's converted copy (built on first use)."""
    from gece.scoring import models

    resolved = models.resolve(spec)
    if resolved.kind == "gguf":
        (sha,) = models.weight_hashes(resolved).values()
        return models.converted_dir(resolved.path, sha)
    return resolved.path


def export(params: Any, model: str, benchmarks: list[str], out: Path, limit: int | None = None) -> list[Export]:
    """Export ``benchmarks`` (each under its params.yaml rule) for the registry entry ``model`` into ``out``."""
    from transformers import AutoTokenizer

    from gece.io.files.readers import read_table
    from gece.io.paths import layout
    from gece.io.schemas.pair_rows import PreparedPair

    spec = loadable(params, model)
    folder = model_dir(spec)
    gece_tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    records = []
    for b in benchmarks:
        prepared = layout.prepared_path(b)
        if not prepared.is_file():
            raise GeceError(f"{prepared} not found", hint=f"prepare the benchmark first: dvc repro prepare@{b}")
        pairs, _ = read_table(prepared, PreparedPair)
        if limit is not None:
            pairs = pairs.iloc[:limit]
        rule, word_prob = params.rule_for(b), params.extract.word_prob
        bos = add_bos_token(rule, spec.special_tokens)
        encode, prefix_id = lmeval_encoder(folder, bos)
        docs, excluded = documents(pairs, rule, word_prob, gece_tok, spec.special_tokens, encode, prefix_id)
        record = Export(
            task=task_name(b),
            benchmark=b,
            rule=rule,
            word_prob=word_prob,
            model=model,
            model_dir=str(folder),
            add_bos_token=bos,
            model_args=model_args(folder, bos),
            pairs_prepared=len(pairs),
            pairs_exported=len(docs),
            excluded=excluded,
        )
        write_task(out, record, docs)
        records.append(record)
    return records


# ------------------------------------------------------------------ the command
HELP = "write lm-evaluation-harness tasks for the benchmarks, each under its rule (docs/lmeval.md)"
DESCRIPTION = (
    "One task gece_<benchmark> per benchmark in OUT/gece_<benchmark>/: its YAML config, docs.jsonl (the pairs "
    "lm-eval scores exactly for this model's tokenizer, each with its pair id and a hash of its sentences) and "
    "export.json (the BOS option, the model arguments and the pairs left out, with their reasons). Run lm_eval "
    "with --include_path OUT, then import with a registry entry source: lmeval:<lm-eval output directory>."
)
EXAMPLES = (
    "gece lmeval-export --model smollm2-135m --benchmark winobias --limit 40 --out lmeval/tasks",
    "gece lmeval-export --model smollm2-135m --out lmeval/tasks   # every benchmark of params.yaml",
)


def add_arguments(p: Any) -> None:
    from gece.cmd.options import count

    p.add_argument("--model", required=True, help="the registry entry lm-eval will run (its tokenizer decides)")
    p.add_argument("--benchmark", action="append", help="a benchmark id, repeatable (default: every benchmark)")
    p.add_argument("--limit", type=count, help="only the first N prepared pairs of each benchmark")
    p.add_argument("--out", type=Path, default=Path("lmeval/tasks"), help="the task directory (default: lmeval/tasks)")


def reads(args: Any) -> list[Path]:
    """Besides --params: the prepared benchmarks and the model's files (a local source)."""
    from gece.io.paths import layout
    from gece.io.settings.params import params_if_valid

    params = params_if_valid(args)
    spec = params.registry.get(args.model) if params is not None else None
    local = [Path(spec.source)] if spec is not None and Path(spec.source).exists() else []
    try:
        return [*(layout.prepared_path(b) for b in chosen(args, params)), *local]
    except GeceError:  # no plain id: run refuses it
        return local


def writes(args: Any) -> dict:
    """One task folder per benchmark, ``--out/gece_<benchmark>``, which it owns (never inside what it reads)."""
    from gece.cmd.command import Output
    from gece.io.settings.params import params_if_valid

    tasks = [task_name(b) for b in chosen(args, params_if_valid(args))]
    return {f"--out (its task {t})": Output(args.out / t, "folder") for t in tasks}


def chosen(args: Any, params: Any) -> list[str]:
    """The benchmarks to export: --benchmark, else every benchmark of params.yaml."""
    return args.benchmark or (list(params.benchmarks) if params is not None else [])


def run(args: Any) -> int:
    from gece.base.terminal import literal
    from gece.cmd import command

    command.check_id(args.model, "--model")
    params = require_params(args)
    loadable(params, args.model)
    names = chosen(args, params)
    for b in names:
        command.check_id(b, "--benchmark")
        if b not in params.benchmarks:
            raise GeceError(f"--benchmark {b!r}: not a benchmark of {args.params}", hint="see benchmarks")
    for r in export(params, args.model, names, args.out, args.limit):
        command.out.print(
            f"{literal(r.task)}: {r.pairs_exported} of {r.pairs_prepared} pairs under rule {r.rule}"
            + (f", {len(r.excluded)} left out (see {literal(str(args.out / r.task / RECORD))})" if r.excluded else ""),
            highlight=False,
        )
        command.out.print(
            f"  lm_eval --model hf --model_args {literal(r.model_args)} --tasks {r.task}", highlight=False
        )
    return 0
