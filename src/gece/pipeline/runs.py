"""Runs: which (benchmark, model) runs a configuration has, and their scores whatever the source.

A run's scores come from its registry source (``gece.io.settings.model_entry.ModelSpec``): a scored model's score
file (``artifacts/scores/<b>/<m>.parquet``, written by the score stage, or by ``gece lmeval-import`` for an
``lmeval:<directory>`` source), or, for a
``reference:<name>`` source, the released per-pair scores ``data/reference/<b>/<name>.csv``,
checked against the prepared benchmark and put in the same schema. Every stage after extract
reads runs through :func:`load_scores`, so the authors' runs and the scored models go through
the same code. A run's
metrics report is :mod:`gece.pipeline.run_report`.
"""

from __future__ import annotations

import logging
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd

from gece.base.errors import GeceError
from gece.io.files.inputs import read_text, require_file
from gece.io.files.readers import as_table, check_unique_ids, iter_table, parquet_rows, read_table
from gece.io.files.writer import validate_records
from gece.io.paths import data_layout, layout
from gece.io.schemas.pair_rows import SCORE_PAIR_COLUMNS, PreparedPair, ReferenceRow, ScoreRow
from gece.io.settings.harness_entry import is_harness
from gece.io.settings.ids import check_id
from gece.io.settings.model_entry import LMEVAL_PREFIX
from gece.io.settings.params import Params
from gece.stats.ablation import Run

log = logging.getLogger("gece")


def runs(params: Params, benchmark: str, root: Path = Path()) -> list[str]:
    """The run ids of ``benchmark``: the scored models (``models``), then the references that have
    released scores for it (``references`` whose ``data/reference/<benchmark>/<name>.csv`` exists under
    the repository ``root``), then the registry entries with an ``lmeval:`` source whose score file for it
    exists (imported by ``gece lmeval-import``), in registry order."""
    refs = [
        m
        for m in params.references
        if (root / data_layout.reference_csv(benchmark, params.registry[m].reference)).is_file()
    ]
    return (
        list(params.models)
        + refs
        + [m for m in lmeval_ids(params) if (root / layout.scores_path(benchmark, m)).is_file()]
    )


def lmeval_ids(params: Params) -> list[str]:
    """The run ids of the registry that lm-eval scored: a source ``lmeval:<directory>`` (lm-eval's samples,
    imported), or ``engine: lm-eval`` and listed in ``lmeval_runs`` (run by the lmeval stage)."""
    return [
        m
        for m, spec in params.registry.items()
        if spec.source.startswith(LMEVAL_PREFIX) or (is_harness(spec) and m in params.lmeval_runs)
    ]


def checks(params: Params) -> frozenset[str]:
    """The checks: the runs whose registry entry sets ``limit`` (a slice of each benchmark) or ``checked_against``
    (another engine's or setting's run of a model scored already), the one place a check is declared. A check is
    reported in its own rows and on the engine-agreement page, never in the answers, rankings, letters, findings
    or counts; the metrics stage's Holm family over the runs leaves it out, and the calibrate stage skips a slice
    it cannot cross-fit, with a note (docs/lmeval.md "Checks"). ``extract.limit``, which cuts every scored run
    alike (a smoke run), makes no check."""
    return frozenset(
        m for m, spec in params.registry.items() if spec.limit is not None or spec.checked_against is not None
    )


def is_reference(params: Params, model: str) -> bool:
    """Whether ``model`` is a ``reference:`` run (released scores, nothing extracted)."""
    spec = params.registry.get(model)
    return spec is not None and spec.reference is not None


def reference_ids(params: Params) -> set[str]:
    """The run ids of the registry whose source is ``reference:<name>`` (released scores, nothing extracted)."""
    return {m for m in params.registry if is_reference(params, m)}


def has_scores(params: Params, benchmark: str, model: str, root: Path = Path()) -> bool:
    """Whether the files a run's scores are read from exist under ``root`` (the score file; for a reference,
    the prepared benchmark and the released CSV)."""
    if is_reference(params, model):
        return (root / layout.prepared_path(benchmark)).is_file() and (
            root / data_layout.reference_csv(benchmark, params.registry[model].reference)
        ).is_file()
    return (root / layout.scores_path(benchmark, model)).is_file()


def load_scores(
    params: Params, benchmark: str, model: str, columns: list[str] | None = None, root: Path = Path()
) -> tuple[pd.DataFrame, dict[str, str]]:
    """A run's scores (``ScoreRow`` columns, or only ``columns``) and metadata, whatever its source; paths are
    those of :mod:`gece.io.paths.layout` under the repository ``root``."""
    if is_reference(params, model):
        scores, meta = reference_scores(
            root / layout.prepared_path(benchmark),
            root / data_layout.reference_csv(benchmark, params.registry[model].reference),
            model,
        )
        return (scores if columns is None else scores[columns]), meta
    path = root / layout.scores_path(benchmark, model)
    if columns == RUN_COLUMNS:
        return read_run(path)
    scores, meta = read_table(path, ScoreRow)
    return (scores if columns is None else scores[columns]), meta


def load_run(params: Params, benchmark: str, model: str) -> tuple[Run, dict[str, str]]:
    """A run as the arrays the metrics and ablations take."""
    scores, meta = load_scores(params, benchmark, model, RUN_COLUMNS)
    return as_run(scores), meta


REFERENCE_HINT = "restore the authors' file with `dvc pull data.dvc` (see data/SOURCES.md)"


def read_reference(csv: str | Path) -> pd.DataFrame:
    """The authors' released scores for one benchmark and model, every row checked (``ReferenceRow``)."""
    csv = require_file(
        csv, hint=f"{REFERENCE_HINT}; the file is data/reference/<benchmark>/<model>.csv", size_limit="csv_bytes"
    )
    text = read_text(csv, REFERENCE_HINT, "csv_bytes")  # a byte that is not UTF-8: its line and column
    try:
        ref = pd.read_csv(StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise GeceError(f"{csv}: not a readable CSV ({e})", hint=REFERENCE_HINT) from e
    missing = [c for c in ReferenceRow.model_fields if c not in ref.columns]
    if missing:
        raise GeceError(
            f"{csv}: missing column(s) {', '.join(missing)}",
            hint=f"the file is not one of the authors' result CSVs; {REFERENCE_HINT}",
        )
    validate_records(
        ref.to_dict(orient="records"),
        ReferenceRow,
        str(csv),
        hint=f"rows are numbered from 1 after the header; {REFERENCE_HINT}",
    )
    return ref


def reference_scores(prepared: str | Path, csv: str | Path, model: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The scores of a ``reference:<name>`` run: ``data/reference/<b>/<name>.csv`` in the score schema.

    The released rows are matched to the prepared pairs by position and checked sentence by
    sentence; their pronoun probabilities become the log-probabilities, their first-token
    logits the logits and their normalized score ``p``. Returns the scores and their metadata
    (benchmark, model, source), as a score file's.
    """
    check_id(model, "model")
    ref = read_reference(csv)
    pairs, meta = read_table(prepared, PreparedPair)
    if len(ref) != len(pairs):
        raise GeceError(
            f"{csv}: {len(ref)} rows, but {prepared} has {len(pairs)} pairs",
            hint="reference scores must cover the whole benchmark, in its order",
        )
    problems = []
    for i, (r, q) in enumerate(zip(ref.itertuples(index=False), pairs.itertuples(index=False), strict=True)):
        if (r.Sentence_more, r.Sentence_less) != (q.sent_more, q.sent_less):
            problems.append(f"row {i + 1}: sentences differ from {q.pair_id} of {prepared}")
        elif r.Pronoun_more.lower() not in {t.lower() for t in q.targets_more} or r.Pronoun_less.lower() not in {
            t.lower() for t in q.targets_less
        }:
            problems.append(
                f"row {i + 1}: pronouns {r.Pronoun_more}/{r.Pronoun_less} are not the targets "
                f"{list(q.targets_more)}/{list(q.targets_less)}"
            )
        elif int(r.True_Label) != int(q.y):
            problems.append(f"row {i + 1}: True_Label {r.True_Label} but the benchmark says y={q.y}")
    if problems:
        raise GeceError(
            f"{csv}: does not match the benchmark {prepared}",
            problems=problems[:20],
            hint="reference scores and benchmark must come from the same snapshot (dvc pull data.dvc)",
        )
    scores = pairs[SCORE_PAIR_COLUMNS].copy()
    scores["n_tokens_more"] = None
    scores["n_tokens_less"] = None
    scores["logprob_more"] = np.log(ref["Pronoun_Probability_more"].to_numpy(np.float64))
    scores["logprob_less"] = np.log(ref["Pronoun_Probability_less"].to_numpy(np.float64))
    scores["logit_more"] = ref["Pronoun_Logit_more"].to_numpy(np.float64)
    scores["logit_less"] = ref["Pronoun_Logit_less"].to_numpy(np.float64)
    scores["p"] = ref["Normalized_Score_more"].to_numpy(np.float64)
    scores["scored_punct_only"] = None  # the released scores of target words: not assessed
    return as_table(scores, ScoreRow, csv), {"benchmark": meta.get("benchmark", ""), "model": model, "source": str(csv)}


def as_run(scores: pd.DataFrame) -> Run:
    """A score table (``ScoreRow`` columns) as the typed arrays the pure functions take."""
    return Run(
        scores["pair_id"].to_numpy(object),
        scores["p"].to_numpy(np.float64),
        scores["y"].to_numpy(np.float64),
        scores["gender_more"].to_numpy(object),
        scores["gender_less"].to_numpy(object),
    )


RUN_COLUMNS = ["pair_id", "row", "y", "gender_more", "gender_less", "p", "scored_punct_only"]


READ_ROWS = 8192  # rows validated at a time when only a run's arrays are needed


def read_run(path: str | Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """A score file's ``RUN_COLUMNS``, every row validated, read ``READ_ROWS`` rows at a time.

    Memory holds the few columns the metrics need, never the sentences of the whole file.
    """
    _, meta = parquet_rows(path, ScoreRow)  # within the limits of a file read whole
    parts = [chunk[RUN_COLUMNS] for chunk in iter_table(path, ScoreRow, READ_ROWS)]
    scores = pd.concat(parts, ignore_index=True) if parts else read_table(path, ScoreRow)[0][RUN_COLUMNS]
    check_unique_ids(path, scores["pair_id"])
    return scores, meta


# ----------------------------------------------------------------------- ablations
def load_run_file(path: str | Path) -> tuple[Run, dict[str, str]]:
    """A score file as the arrays the ablations take."""
    df, meta = read_run(path)
    return as_run(df), meta
