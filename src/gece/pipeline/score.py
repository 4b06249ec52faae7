"""Stage score: a model's token scores of a benchmark -> per-pair scores ``artifacts/scores/<b>/<m>.parquet``.

extract stores every target token's log-probability and logit (``artifacts/tokens/<m>/<b>.parquet``); this stage
takes a word's probability ``extract.word_prob`` (``chain`` or ``max``) and a side's ``extract.side_prob`` (``joint``
or ``sum``, :mod:`gece.stats.pair_scores`), or the whole-sentence rule of the token file (extraction ``sentence`` in
:mod:`gece.catalog.scoring_rules`: ``sentence``, ``mean``, ``shared``), and joins the prepared pairs' sentences and
labels, giving the :class:`gece.io.schemas.pair_rows.ScoreRow` file every later stage reads, with its meta (extract's,
with the rule applied). It runs no model (no torch is imported), so ``dvc exp run -S extract.word_prob=max`` takes
seconds, as does ``-S extract.side_prob=sum`` (the authors' convention). A benchmark scored by a whole-sentence rule
reads every token of each sentence (``chain``) whatever ``word_prob`` says: a word's probability is about the
sub-tokens of a target word, and its meta says ``chain``.
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path

import pandas as pd

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.catalog.scoring_rules import DEFAULT_RULE, RULE
from gece.cmd import command
from gece.cmd.command import Output
from gece.io.files import paired
from gece.io.files.json_reader import read_json
from gece.io.files.json_writer import write_json
from gece.io.files.outputs import check_output
from gece.io.files.readers import read_table
from gece.io.files.writer import ROW_GROUP_ROWS, TableWriter
from gece.io.paths import layout
from gece.io.schemas.pair_rows import SCORE_PAIR_COLUMNS, PreparedPair, ScoreRow
from gece.io.schemas.schema_base import Section
from gece.io.schemas.tokens import ExtractMeta, TokenRow
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.params_file import load_sections
from gece.stats import pair_scores

log = logging.getLogger("gece")

# the token file's metadata a score file keeps, in this order (then word_prob and side_prob, then the rule when not
# target)
KEPT_META = ("benchmark", "model", "source", "weights_sha256", "special_tokens")
KEPT_AFTER = ("dtype", "device", "attention")


def sentence_records(toks: pd.DataFrame, rule: str, tokens: Path, rerun: str) -> list[dict]:
    """The score columns of every pair of a token file under a whole-sentence rule
    (:func:`gece.stats.pair_scores.sentence_record`; each side's one "word" is its sentence's tokens). A rule that
    sums matched tokens reads their ids and texts."""
    matched = RULE[rule].matched
    if matched and ("token_ids_more" not in toks or toks["token_ids_more"].isna().any()):
        raise GeceError(
            f"{tokens}: no token ids (a token file written before gece kept them), and the {rule} rule reads them",
            hint=rerun,
        )
    recs = []
    for row in toks.itertuples(index=False):
        ids_m = ids_l = text_m = ()
        if matched:
            ids_m, ids_l, text_m = row.token_ids_more[0], row.token_ids_less[0], row.token_text_more[0]
        rec = pair_scores.sentence_record(row.logprobs_more[0], row.logprobs_less[0], ids_m, ids_l, text_m, rule)
        logits = (row.logits_more, row.logits_less)
        recs.append(
            rec
            | {
                "logit_more": None if logits[0] is None else float(logits[0][0][0]),
                "logit_less": None if logits[1] is None else float(logits[1][0][0]),
            }
        )
    return recs


def _records(
    toks: pd.DataFrame,
    rule: str,
    word_prob: pair_scores.WordProb,
    side_prob: pair_scores.SideProb,
    tokens: Path,
    out: Path,
    rerun: str,
) -> list:
    """Every pair's score columns under the token file's ``rule``; a sum of log-probabilities that overflows
    (math.fsum raises) is an error naming the token file, not a traceback."""
    try:
        if RULE[rule].extraction == "sentence":
            return sentence_records(toks, rule, tokens, rerun)
        return [
            pair_scores.score_record(*cols, word_prob, side_prob)
            for cols in zip(
                toks["logprobs_more"], toks["logprobs_less"], toks["logits_more"], toks["logits_less"], strict=True
            )
        ]
    except OverflowError as e:
        raise GeceError(
            f"{tokens}: the token log-probabilities of a pair overflow when summed ({e}); nothing was written to {out}",
            hint=f"a token log-probability is a finite number of 0 or less; the file was not written by extract as "
            f"it is, or is corrupt: {rerun}",
        ) from e


def score(
    prepared: str | Path,
    tokens: str | Path,
    out: str | Path,
    word_prob: pair_scores.WordProb,
    side_prob: pair_scores.SideProb = "joint",
    *,
    meta_out: str | Path | None = None,
) -> ExtractMeta:
    """``artifacts/prepared/<b>.parquet`` + ``artifacts/tokens/<m>/<b>.parquet`` (and its meta) ->
    ``artifacts/scores/<b>/<m>.parquet`` and ``<m>.meta.json``.

    The token file holds the first n pairs of the prepared file, in order (n < all under a limit); a
    token file that does not match the prepared pairs is an error naming the first pair that differs.
    """
    prepared, tokens, out = Path(prepared), Path(tokens), Path(out)
    meta_out = Path(meta_out) if meta_out else layout.meta_path(out)
    check_output(out, "the score file")  # both outputs before either is written
    check_output(
        meta_out, "the meta file of the score file", f"remove it, or give the score file another name than {out}"
    )
    pairs, _ = read_table(prepared, PreparedPair)
    toks, tmeta = read_table(tokens, TokenRow)
    meta = read_json(layout.meta_path(tokens), ExtractMeta)
    rerun = f"rerun extract for {meta.model} (dvc repro extract@{meta.model})"
    paired.check_pair(tokens, layout.meta_path(tokens), meta, rerun)
    if toks.empty:  # an empty score file would replace the previous one, and metrics refuse it
        raise GeceError(f"{tokens}: no pair in the token file; nothing was written to {out}", hint=rerun)
    base = pairs.head(len(toks))
    if len(toks) > len(pairs) or not (base["pair_id"].to_numpy() == toks["pair_id"].to_numpy()).all():
        at = next(
            (i for i, (a, b) in enumerate(zip(base["pair_id"], toks["pair_id"], strict=True)) if a != b), len(pairs)
        )
        raise GeceError(
            f"{tokens}: not scored from {prepared} (row {at + 1}: pair "
            f"{toks['pair_id'].iloc[at]!r}, the prepared file has "
            f"{base['pair_id'].iloc[at] if at < len(base) else 'no such row'!r})",
            hint=f"the prepared pairs changed since; {rerun}",
        )
    if RULE[meta.rule].extraction == "sentence":  # every token of the sentence: word_prob is a rule for target words
        word_prob = "chain"
    recs = _records(toks, meta.rule, word_prob, side_prob, tokens, out, rerun)
    bad = [
        f"row {i}, pair {pid!r}: logprob_{side} is {rec[f'logprob_{side}']} (the token log-probabilities overflow)"
        for i, (pid, rec) in enumerate(zip(toks["pair_id"], recs, strict=True), start=1)
        for side in ("more", "less")
        if not math.isfinite(rec[f"logprob_{side}"])
    ]
    if bad:  # the score file's readers refuse a value that is not finite: write nothing
        raise GeceError(
            f"{tokens}: {len(bad)} score(s) that are not finite numbers; nothing was written to {out}",
            problems=bad[:20],
            hint=f"a token log-probability is a finite number of 0 or less; the file was not written by extract "
            f"as it is, or is corrupt: {rerun}",
        )
    frame = pd.concat([base[SCORE_PAIR_COLUMNS].reset_index(drop=True), pd.DataFrame(recs, index=toks.index)], axis=1)
    applied = {"word_prob": word_prob, "side_prob": side_prob}
    file_meta = {k: tmeta[k] for k in KEPT_META} | applied | {k: tmeta[k] for k in KEPT_AFTER}
    if meta.rule != DEFAULT_RULE:  # absent: the target rule (score files from before the setting stay byte-identical)
        file_meta["rule"] = meta.rule
    with TableWriter(out, ScoreRow, file_meta) as writer:  # row groups as extract wrote them before it kept tokens
        for start in range(0, max(len(frame), 1), ROW_GROUP_ROWS):
            writer.write(frame.iloc[start : start + ROW_GROUP_ROWS])
    scored = paired.describing(meta.model_copy(update=applied), out)
    write_json(meta_out, scored)
    log.info(
        "%s/%s: %d pairs, word_prob %s, side_prob %s -> %s",
        meta.benchmark,
        meta.model,
        len(frame),
        word_prob,
        side_prob,
        out,
    )
    return scored


# the line `gece --help` shows for this command (read without importing this module)
HELP = "a model's token scores of a benchmark -> each pair's p, a per-pair score Parquet (DVC stage score)"
EXAMPLES = (
    "gece score --benchmark winobias --model smollm2-135m",
    "gece score --benchmark winobias --model smollm2-135m --word-prob max --out /tmp/max.parquet",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True, help="benchmark id (reads artifacts/prepared/<benchmark>.parquet)")
    p.add_argument("--model", required=True, help="model id (reads artifacts/tokens/<model>/<benchmark>.parquet)")
    p.add_argument(
        "--word-prob",
        choices=["chain", "max"],
        help="word probability over sub-tokens: chain (product) or max (default: {params:extract.word_prob})",
    )
    p.add_argument(
        "--side-prob",
        choices=pair_scores.SIDE_PROBS,
        help="a side's probability over several target words: joint (chain rule) or sum (the authors' "
        "convention) (default: {params:extract.side_prob})",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="the score file (default: artifacts/scores/<benchmark>/<model>.parquet; its meta beside it)",
    )
    p.set_defaults(outputs={"--out": "out"})


class Settings(Section):
    """The section of params.yaml this stage reads (the whole file's top-level keys are checked too)."""

    extract: ExtractParams = ExtractParams()


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say
STAGE = {
    "name": "score",
    "about": "a word's and a side's probability (extract.word_prob, extract.side_prob) from the token scores: no model "
    "runs (dvc exp run -S extract.word_prob=max takes seconds)",
    "argv": ["score", "--benchmark", "{benchmark}", "--model", "{model}"],
    "matrix": {"benchmark": "benchmarks", "model": "models"},
    "params": ["extract.word_prob", "extract.side_prob"],
}


def reads(args: argparse.Namespace) -> list[Path]:
    """What this command reads besides --params: the prepared benchmark, the model's token file and its meta."""
    tokens = layout.tokens_path(args.model, args.benchmark)
    return [layout.prepared_path(args.benchmark), tokens, layout.meta_path(tokens)]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """The files written: the score file (--out, or its default) and its meta beside it."""
    try:
        out = args.out or layout.scores_path(args.benchmark, args.model)
    except GeceError:  # no plain id: run refuses it
        return {}
    return {"--out": Output(out), "the meta file of --out": Output(layout.meta_path(out))}


def run(args: argparse.Namespace) -> int:
    command.check_id(args.benchmark, "--benchmark")
    command.check_id(args.model, "--model")
    params = load_sections(args.params, Settings)
    word_prob = args.word_prob or params.extract.word_prob
    side_prob = args.side_prob or params.extract.side_prob
    out = args.out or layout.scores_path(args.benchmark, args.model)
    tokens = layout.tokens_path(args.model, args.benchmark)
    if not tokens.is_file():
        raise GeceError(
            f"--benchmark {args.benchmark!r} --model {args.model!r}: no token scores ({tokens} not found)",
            hint=f"run its extract stage first: dvc repro extract@{args.model} (or dvc pull it)",
        )
    meta = score(layout.prepared_path(args.benchmark), tokens, out, word_prob, side_prob)
    command.out.print(
        f"[green]scored[/] {plural(meta.pairs, 'pair')} of {literal(args.benchmark)} with "
        f"{literal(args.model)} (word_prob {word_prob}, side_prob {side_prob}) -> {literal(str(out))}",
        highlight=False,
    )
    return 0
