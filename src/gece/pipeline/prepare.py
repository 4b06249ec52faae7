"""Stage prepare: a benchmark -> the validated, aligned pairs (``artifacts/prepared/<b>.parquet``) and its
per-annotator labels (``artifacts/annotations/<b>.parquet``, zero rows when it has none).

A benchmark is a gece CSV (``data/benchmarks/<b>.csv``) or, when its params.yaml entry has a ``source``
(``benchmarks.<b>.source``), a CrowS-Pairs-format file read by :mod:`gece.io.formats.crows` (identity protocol: y =
1; the
group is the CrowS ``bias_type``, so the gender-lexicon check is skipped; pairs that cannot be
scored are dropped with one warning), or, with ``benchmarks.<b>.synthbias``, SynthBias's rows of that mode, read by
:mod:`gece.io.formats.synthbias_entry` (the rows each pairing rule removed, and the stratified subset's pairs per
stratum, go into the prepared file's metadata and the log).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

from gece.base.errors import GeceError
from gece.catalog.groupings import SYNTH_COLUMNS
from gece.cmd import command, run_tables
from gece.io.files.writer import write_table
from gece.io.formats import benchmarks
from gece.io.paths import data_layout, layout
from gece.io.schemas.pair_rows import SYNTH_SCHEMAS, AnnotationRow
from gece.io.settings.params import params_if_valid, params_or_defaults
from gece.io.settings.sections import BenchmarkSpec, Cluster, PrepareParams

log = logging.getLogger("gece")


def _empty_annotations() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pair_id": pd.array([], dtype=object),
            "row": pd.array([], dtype="int64"),
            "annotator": pd.array([], dtype=object),
            "labels": pd.array([], dtype=object),
        }
    )


def annotation_rows(annotations: pd.DataFrame, prepared: pd.DataFrame) -> pd.DataFrame:
    """The long annotation table (``row``, ``annotator``, ``labels``) of the pairs that were prepared, with
    their ``pair_id`` (rows of dropped pairs go with them), in (row, file) order."""
    if annotations.empty:
        return _empty_annotations()
    ids = pd.Series(prepared["pair_id"].to_numpy(), index=prepared["row"].to_numpy())
    kept = annotations[annotations["row"].isin(ids.index)]
    out = kept.assign(pair_id=ids.loc[kept["row"]].to_numpy())[["pair_id", "row", "annotator", "labels"]]
    return out.reset_index(drop=True)


def prepare(
    csv: str | Path,
    out: str | Path,
    settings: PrepareParams = PrepareParams(),
    *,
    name: str | None = None,
    imported: bool = False,
    annotations_out: str | Path | None = None,
    annotations_csv: str | Path | None = None,
    cluster: Cluster = "pair",
    entry: BenchmarkSpec | None = None,
) -> pd.DataFrame:
    """A benchmark file -> prepared pairs at ``out`` (and the annotations at ``annotations_out`` when given).

    ``imported``: ``csv`` is a CrowS-Pairs-format file (:mod:`gece.io.formats.crows`); ``name`` is the benchmark id
    (default: the gece CSV's file name). ``annotations_csv``: a per-annotator annotations CSV of the
    benchmark (:func:`gece.io.formats.crows.read_annotations`). ``cluster``: the resampling unit of the ``cluster``
    column
    (:func:`gece.io.formats.benchmarks.prepare_pairs`). ``entry``: the benchmark's params.yaml entry, read for its
    ``synthbias`` type and ``subset`` (:func:`synthbias_rows`). Nothing is written unless both files can be.
    """
    csv = Path(csv)
    name = name or benchmarks.benchmark_id(csv)
    meta = {"benchmark": name, "source": str(csv)}
    if entry is not None and entry.synthbias is not None:
        rows, more = synthbias_rows(csv, name, entry)
        meta |= more
        warnings, n_rows, found = [], more["rows_read"], None
    elif imported:
        from gece.io.formats import crows

        data = crows.read_crows(csv)
        rows, problems, warnings = benchmarks.check_rows(data.pairs, str(csv), settings.duplicates, imported=True)
        if problems:
            raise GeceError(
                f"{csv}: {len(problems)} problem(s) in {len(data.pairs)} row(s); nothing was written",
                problems=problems[: benchmarks.MAX_SHOWN] + benchmarks.more_shown(len(problems)),
                hint="rows are numbered from 1 after the header line; fix them and run again",
            )
        dropped = rows.attrs.get("dropped", [])
        if rows.empty:  # an empty result never replaces the previous output
            raise GeceError(
                f"{csv}: no pair left: each of its {len(dropped)} row(s) cannot form a pair; nothing was written",
                problems=warnings,
                hint="a benchmark needs at least one pair of sentences that differ in a word on each side",
            )
        rows = rows.assign(y=1)[["row", *benchmarks.REQUIRED, "bias_type"]].reset_index(drop=True)
        meta |= {
            "format": "crows-pairs",
            "rows_read": str(len(data.pairs)),
            "dropped_rows": ",".join(map(str, dropped)),
            "protocol": "identity (y = 1)",
        }
        if not data.has_annotations:
            log.info("%s: no annotations (every annotation list is empty): 0 annotation rows", csv)
        n_rows, found = len(data.pairs), data.annotations
    else:
        rows, warnings = benchmarks.load_benchmark(csv, settings.duplicates)
        n_rows, found = rows.attrs["rows_read"], None
    if annotations_csv is not None:
        from gece.io.formats import crows

        if found is not None and not found.empty:
            raise GeceError(
                f"{annotations_csv}: {csv} has annotations of its own; a benchmark's annotations come from one place",
                hint=f"remove {annotations_csv}, or the annotations column of {csv}",
            )
        types = {t for t in rows["bias_type"] if isinstance(t, str) and t}
        found = crows.read_annotations(annotations_csv, n_rows, types)
        meta["annotations"] = str(annotations_csv)
    for w in warnings:
        log.warning(w)
    prepared = benchmarks.prepare_pairs(rows, name, cluster)
    schema = SYNTH_SCHEMAS[entry.synthbias if entry is not None else None]
    prepared = synthbias_columns(prepared, rows)
    labels = annotation_rows(found, prepared) if found is not None else _empty_annotations()
    if annotations_out is not None:
        write_table(annotations_out, labels, AnnotationRow, meta={"benchmark": name, "source": str(csv)})
    write_table(out, prepared, schema, meta=meta)
    multi = int((prepared["n_targets"] > 1).sum())
    log.info(
        "%s: %d pairs (%d distinct, %d clusters; %d with several differing words, %d cloze-last, %d differing in "
        "their first word), %d annotation rows -> %s",
        name,
        len(prepared),
        len(prepared.drop_duplicates(["sent_more", "sent_less"])),
        prepared["cluster"].nunique(),
        multi,
        int((prepared["position"] == "last").sum()),
        int((prepared["first_diff"] == "initial").sum()),
        len(labels),
        out,
    )
    return prepared


def synthbias_columns(prepared: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The prepared pairs (in the order of ``rows``) with the grouping columns SynthBias's rows carry
    (:data:`gece.catalog.groupings.SYNTH_COLUMNS`), and, where the rows name the data row of the pair each belongs to
    (``pair_row``: the two sentences of a pair, one row each), that pair's id as their ``cluster``: the two are
    resampled together. Other benchmarks' pairs are returned as they are."""
    carried = {c: rows[c].to_numpy() for c in SYNTH_COLUMNS if c in rows.columns}
    if "pair_row" in rows.columns:
        pair_id = pd.Series(prepared["pair_id"].to_numpy(), index=prepared["row"].to_numpy())
        carried["cluster"] = pair_id.loc[rows["pair_row"]].to_numpy()
    return prepared.assign(**carried) if carried else prepared


def synthbias_rows(csv: Path, name: str, entry: BenchmarkSpec) -> tuple[pd.DataFrame, dict[str, str]]:
    """SynthBias's rows for ``entry`` (:func:`gece.io.formats.synthbias_entry.entry_rows`: the pronoun pairs of a
    type, or the rows of another protocol), and the metadata that records the pairing rules' removals, the subset
    and the protocol."""
    from gece.io.formats import synthbias, synthbias_entry

    read, rows, more = synthbias_entry.entry_rows(csv, entry)
    removed = ", ".join(f"{rule} {read.removed[rule]}" for rule in synthbias.RULES)
    strata = ", ".join(f"{k} {v}" for k, v in read.strata.items())
    log.info(
        "%s: %d SynthBias %s pairs (rows removed: %s; pairs per stratum: %s)",
        name,
        len(read.pairs),
        entry.synthbias,
        removed,
        strata,
    )
    meta = {
        "format": "synthbias",
        "rows_read": str(read.rows_read),
        "removed_rows": removed,
        "subset": "all" if entry.subset is None else str(entry.subset),
        "strata": strata,
    }
    return rows, meta | more


# the line `gece --help` shows for this command (read without importing this module)
HELP = "validate and align a benchmark -> prepared Parquet (DVC stage prepare)"
EXAMPLES = (
    "gece prepare --benchmark crows_pairs          # params.yaml: benchmarks.<b>.source, else data/benchmarks/<b>.csv",
    "gece prepare data/benchmarks/winobias.csv artifacts/prepared/winobias.parquet",
    (
        "gece prepare --crows data/winoqueer/winoqueer_benchmark.csv artifacts/prepared/winoqueer.parquet "
        "--annotations artifacts/annotations/winoqueer.parquet"
    ),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "csv",
        type=Path,
        nargs="?",
        help="data/benchmarks/<name>.csv (or a CrowS-Pairs-format file with --crows); not with --benchmark",
    )
    p.add_argument("out", type=Path, nargs="?", help="artifacts/prepared/<name>.parquet")
    p.add_argument(
        "--benchmark",
        help="a benchmark of params.yaml: read from its entry's source or "
        "data/benchmarks/<b>.csv, written to artifacts/prepared/<b>.parquet and "
        "artifacts/annotations/<b>.parquet",
    )
    p.add_argument(
        "--crows", action="store_true", help="CSV is in CrowS-Pairs format (the benchmark id is OUT's file name)"
    )
    p.add_argument("--annotations", type=Path, help="also write the per-annotator labels here (Parquet)")
    p.add_argument(
        "--labels",
        type=Path,
        help="a per-annotator annotations CSV of the benchmark (row, annotator, "
        "labels); with --benchmark, data/annotations/<b>.csv is read when it exists",
    )
    p.add_argument(
        "--duplicates",
        choices=["keep", "drop", "error"],
        help="repeated pairs: keep, drop or reject (default: {params:prepare.duplicates})",
    )
    p.set_defaults(outputs={"OUT": "out", "--annotations": "annotations"}, inputs=("csv", "labels"))


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say of --benchmark
STAGE = {
    "name": "prepare",
    "about": "a benchmark's pairs validated and aligned, and its annotators' labels",
    "argv": ["prepare", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": ["benchmarks.{benchmark}", "prepare"],
    "notes": {
        "data": "the whole folder: an imported benchmark (benchmarks.<b>.source) is read from its own file",
        "benchmarks.{benchmark}": "its entry: source (a rule or neutral_of change re-runs it, same output)",
    },
}


def reads(args: argparse.Namespace) -> list[Path]:
    """What ``--benchmark B`` reads besides --params: the data snapshot, of which its source CSV (its entry's source,
    which may lie elsewhere) and its per-annotator labels (when that file exists); CSV and --labels are declared as
    options."""
    params = params_if_valid(args)
    try:
        b = args.benchmark
        source = data_layout.benchmark_source(params, b) if params is not None else data_layout.benchmark_csv(b)
        return [layout.DATA, source, data_layout.annotations_csv(b)] if b is not None else []
    except GeceError:  # no plain id: run refuses it
        return []


def writes(args: argparse.Namespace) -> dict[str, Path]:
    """With ``--benchmark B``: the prepared pairs and the per-annotator labels (OUT and --annotations otherwise)."""
    try:
        b = args.benchmark
        return {"OUT": layout.prepared_path(b), "--annotations": layout.annotations(b)} if b is not None else {}
    except GeceError:  # no plain id: run refuses it
        return {}


def run(args: argparse.Namespace) -> int:
    params = params_or_defaults(args)
    settings = command.override(params.prepare if params else PrepareParams(), duplicates=args.duplicates)
    if args.benchmark is not None:
        if args.csv is not None or args.out is not None or args.crows or args.annotations or args.labels:
            raise GeceError(
                "--benchmark names the input and both outputs; give either --benchmark B or CSV OUT",
                hint="gece prepare --benchmark crows_pairs, or gece prepare IN.csv OUT.parquet",
            )
        b = run_tables.benchmark_of(args, params)
        extra = data_layout.annotations_csv(b)
        prepare(
            data_layout.benchmark_source(params, b),
            layout.prepared_path(b),
            settings,
            name=b,
            imported=params.benchmarks[b].imported,
            annotations_out=layout.annotations(b),
            annotations_csv=extra if extra.is_file() else None,
            cluster=params.benchmarks[b].cluster,
            entry=params.benchmarks[b],
        )
        return 0
    if args.csv is None or args.out is None:
        raise GeceError("gece prepare needs --benchmark B, or CSV and OUT", hint="see `gece prepare --help`")
    if params:
        data_layout.check_data(params, args.params)
    name = benchmarks.benchmark_id(args.out.name.removesuffix(".parquet")) if args.crows else None
    prepare(
        args.csv,
        args.out,
        settings,
        name=name,
        imported=args.crows,
        annotations_out=args.annotations,
        annotations_csv=args.labels,
    )
    return 0
