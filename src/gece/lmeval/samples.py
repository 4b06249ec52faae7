"""lm-evaluation-harness's logged samples -> a gece score file (docs/lmeval.md "Export, run, import").

A registry entry ``source: lmeval:<directory>`` names the output directory of ``lm_eval --output_path <directory>
--log_samples``. lm-eval writes ``<directory>/<model name>/samples_<task>_<date>.jsonl`` per task and run; the
import reads the newest (the greatest ``<date>``, lm-eval's own timestamp) of task ``gece_<benchmark>`` anywhere
under the directory, and ``results_<date>.json`` beside it for the lm-eval version, backend, model arguments and
dtype. Every sample must be a prepared pair (its ``pair_id``), with the same two sentences (the document's
``sha``), the requests gece exports for it under the benchmark's rule (for the ``lmeval`` stage's run under a chat
prompt, as the chat template rendered their contexts), both sides answered, and finite
log-likelihoods; anything else is refused, naming the pair, the line and the file, and nothing is written.

A side's ``logprob`` is lm-eval's sum (a rule with ``mean``, :mod:`gece.catalog.scoring_rules`: divided by the side's
token count ``n_tokens``), so under ``shared`` it lacks the common prefix gece's own score file includes;
``p = sigmoid(logprob_more - logprob_less)`` is the same function of the same tokens under every rule.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from gece.base.errors import GeceError
from gece.catalog.scoring_rules import RULE
from gece.io.files.json_reader import read_json_file, read_json_lines
from gece.io.files.readers import read_table
from gece.io.schemas.lmeval_files import ImportMeta, Sample
from gece.io.schemas.pair_rows import SCORE_PAIR_COLUMNS, PreparedPair
from gece.io.settings.model_entry import LMEVAL_PREFIX
from gece.lmeval import requests
from gece.stats import pair_scores

TASK_PREFIX = "gece_"  # task gece_<benchmark>
SOURCE_PREFIX = LMEVAL_PREFIX
DATE = r"(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)"
RERUN = "export again (gece lmeval-export) and rerun lm_eval on the exported task, or fix the sample log"


def output_dir(source: str) -> Path | None:
    """The lm-eval output directory of an ``lmeval:<directory>`` source, else None."""
    return Path(source.removeprefix(SOURCE_PREFIX)) if source.startswith(SOURCE_PREFIX) else None


def samples_file(directory: Path, task: str) -> Path:
    """The newest ``samples_<task>_<date>.jsonl`` under ``directory`` (the greatest date; lm-eval's names)."""
    pattern = re.compile(rf"^samples_{re.escape(task)}_{DATE}\.jsonl$")
    found = sorted(
        ((m.group("date"), p) for p in directory.rglob("samples_*.jsonl") if (m := pattern.match(p.name))),
        key=lambda t: (t[0], str(t[1])),
    )
    if not found:
        raise GeceError(
            f"{directory}: no lm-eval samples of task {task} (samples_{task}_<date>.jsonl)",
            hint=f"run lm_eval with --tasks {task} --output_path {directory} --log_samples (docs/lmeval.md)",
        )
    return found[-1][1]


class _Results(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    lm_eval_version: str
    config: dict[str, Any]


def run_info(samples: Path) -> dict[str, str]:
    """lm-eval's version, backend, model arguments and dtype from ``results_<date>.json`` beside ``samples``."""
    date = re.search(rf"_{DATE}\.jsonl$", samples.name).group("date")  # type: ignore[union-attr]
    path = samples.parent / f"results_{date}.json"
    if not os.path.lexists(path):
        raise GeceError(f"{path} not found (lm-eval writes it beside {samples.name})", hint=RERUN)
    try:
        res = _Results.model_validate(read_json_file(path, RERUN, "json_bytes"))
    except ValidationError as e:
        raise GeceError(f"{path}: not an lm-eval results file ({e.errors()[0]['msg']})", hint=RERUN) from None
    args = res.config.get("model_args", "")
    if isinstance(args, dict):
        args = ",".join(f"{k}={v}" for k, v in args.items())
    dtype = res.config.get("model_dtype") or "unknown"
    return {
        "lm_eval_version": res.lm_eval_version,
        "backend": str(res.config.get("model", "unknown")),
        "model_args": str(args),
        "dtype": str(dtype).removeprefix("torch."),
    }


def shown_id(pair_id: str) -> str:
    """A pair id from lm-eval's log as a message shows it: as it is when short and printable, else quoted and cut."""
    if len(pair_id) <= 80 and pair_id.isprintable():
        return pair_id
    return repr(pair_id[:60]) + (f"... ({len(pair_id):,} characters)" if len(pair_id) > 60 else "")


def read_samples(path: Path) -> list[tuple[int, Sample | str]]:
    """Each line of a samples file: its number and the parsed sample, or what is wrong with it.

    The file is read by :func:`gece.io.files.json_reader.read_json_lines` (a regular file within
    ``GECE_MAX_LMEVAL_BYTES``,
    UTF-8, JSON with bounds: a line that is none is a GeceError naming it); each line is then checked against
    :class:`~gece.io.schemas.lmeval_files.Sample` (strict types: a log-likelihood is a finite number at most 0, a token
    count an integer of 1 or more), and a ``doc_id`` may appear once."""
    out: list[tuple[int, Sample | str]] = []
    first: dict[int, int] = {}
    for n, value in read_json_lines(path, RERUN, "lmeval_bytes"):
        doc = value.get("doc") if isinstance(value, dict) else None
        pid = doc.get("pair_id") if isinstance(doc, dict) else None
        where = f"line {n}" + (f", pair {shown_id(pid)}" if isinstance(pid, str) else "")
        try:
            sample = Sample.model_validate(value)
        except ValidationError as e:
            msg = e.errors()[0]
            out.append((n, f"{where}: not a gece sample ({'.'.join(map(str, msg['loc']))}: {msg['msg']})"))
            continue
        if (seen := first.setdefault(sample.doc_id, n)) != n:
            out.append((n, f"{where}: doc_id {sample.doc_id} appears again (first on line {seen})"))
            continue
        out.append((n, sample))
    return out


def score_frame(
    prepared: pd.DataFrame,
    samples: list[tuple[int, Sample | str]],
    rule: str,
    path: Path,
    word_prob: str = "chain",
    chat: bool = False,
) -> pd.DataFrame:
    """The score rows (``ScoreRow`` columns) of the pairs the samples answer, in the prepared order; a GeceError
    listing every sample that does not match a prepared pair, its sentences or its requests (``chat``: as a chat
    template renders them, :func:`gece.lmeval.requests.logged_as`), lacks a side or holds a log-likelihood that is
    not finite."""
    by_id = {r["pair_id"]: r for r in prepared.to_dict("records")}
    spec = RULE[rule]
    problems: list[str] = []
    scored: dict[str, dict[str, Any]] = {}
    for n, sample in samples:
        if isinstance(sample, str):
            problems.append(sample)
            continue
        doc, pid = sample.doc, sample.doc.pair_id
        where = f"line {n}, pair {shown_id(pid)}"
        pair = by_id.get(pid)
        if pair is None:
            problems.append(f"{where}: no such pair in the prepared benchmark (a foreign pair)")
            continue
        if doc.sha != requests.pair_sha(pair["sent_more"], pair["sent_less"]):
            problems.append(f"{where} (row {pair['row']}): its sentences differ from the prepared pair's")
            continue
        if pid in scored:
            problems.append(f"{where}: the pair is answered twice")
            continue
        args = [(a.get("arg_0"), a.get("arg_1")) for _, a in sorted(sample.arguments.items())]
        if len(args) != 2 or len(sample.filtered_resps) != 2:
            problems.append(f"{where}: {len(sample.filtered_resps)} side(s) answered, not 2 (a side is missing)")
            continue
        expected = requests.request_for(pair, rule)
        if not isinstance(expected, requests.Request) or not requests.logged_as(args, expected, chat):
            problems.append(f"{where}: its requests are not the ones gece exports for this pair under rule {rule}")
            continue
        if spec.extraction == "target" and word_prob == "max" and max(doc.n_tokens) > 1:
            problems.append(f"{where}: a target word of several tokens, but word_prob is max (lm-eval sums them)")
            continue
        lls = [float(r[0]) for r in sample.filtered_resps]
        if not all(math.isfinite(v) for v in lls):
            problems.append(f"{where}: log-likelihood {lls} is not finite")
            continue
        if spec.mean:
            lls = [v / t for v, t in zip(lls, doc.n_tokens, strict=True)]
        scored[pid] = {
            "n_tokens_more": doc.n_tokens[0],
            "n_tokens_less": doc.n_tokens[1],
            "logprob_more": lls[0],
            "logprob_less": lls[1],
            "logit_more": None,
            "logit_less": None,
            "p": pair_scores.pair_p(lls[0], lls[1]),
            "scored_punct_only": doc.punct_only,
        }
    if problems:
        raise GeceError(
            f"{path}: {len(problems)} sample(s) do not match the prepared pairs; nothing was written",
            problems=problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else []),
            hint=RERUN,
        )
    if not scored:
        raise GeceError(f"{path}: no sample", hint=RERUN)
    rows = [{k: pair[k] for k in SCORE_PAIR_COLUMNS} | scored[pid] for pid, pair in by_id.items() if pid in scored]
    return pd.DataFrame(rows)


def import_scores(
    prepared_path: Path,
    directory: Path,
    benchmark: str,
    model: str,
    rule: str,
    word_prob: str = "chain",
    named: Path | None = None,
    chat: bool = False,
) -> tuple[pd.DataFrame, ImportMeta, dict[str, str]]:
    """A benchmark's score rows from lm-eval's output ``directory``, the run's meta and the score file's metadata
    (nothing written: :mod:`gece.lmeval.imports` writes both once everything is checked). ``named``: the directory
    the meta names as the source (the stage's folder, while its new run is read from scratch); ``chat``: the run
    applied a chat template (the stage's entry has a chat prompt), so its logged contexts are rendered ones."""
    if not directory.is_dir():
        raise GeceError(
            f"{directory}: no such directory (the lm-eval output of source {SOURCE_PREFIX}{directory})",
            hint="run lm_eval with --output_path on that directory, or dvc pull it",
        )
    prepared, _ = read_table(prepared_path, PreparedPair)
    path = samples_file(directory, f"{TASK_PREFIX}{benchmark}")
    info = run_info(path)
    frame = score_frame(prepared, read_samples(path), rule, path, word_prob, chat)
    meta = ImportMeta(
        model=model,
        benchmark=benchmark,
        source=f"{SOURCE_PREFIX}{named or directory}",
        rule=rule,
        samples_file=str(path.relative_to(directory)),
        pairs_prepared=len(prepared),
        pairs_scored=len(frame),
        coverage=len(frame) / len(prepared),
        unscored=prepared["pair_id"][~prepared["pair_id"].isin(frame["pair_id"])].tolist(),
        **info,
    )
    file_meta = {"model": model, "benchmark": benchmark, "source": meta.source, "backend": "lm-eval"}
    file_meta |= {"rule": rule, "coverage": f"{meta.pairs_scored}/{meta.pairs_prepared}"}
    return frame, meta, file_meta
