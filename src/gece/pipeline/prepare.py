"""Stage prepare: a benchmark CSV -> the validated, aligned pairs (``artifacts/prepared/<b>.parquet``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

from gece import benchmarks, command, layout
from gece.io import write_table
from gece.params import PrepareParams
from gece.schemas import PreparedPair

log = logging.getLogger("gece")


def prepare(csv: str | Path, out: str | Path, settings: PrepareParams = PrepareParams()) -> pd.DataFrame:
    """data/benchmarks/<b>.csv -> artifacts/prepared/<b>.parquet (validated, aligned pairs)."""
    csv = Path(csv)
    name = benchmarks.benchmark_id(csv)
    rows, warnings = benchmarks.load_benchmark(csv, settings.duplicates)
    for w in warnings:
        log.warning(w)
    prepared = benchmarks.prepare_pairs(rows, name)
    write_table(out, prepared, PreparedPair, meta={"benchmark": name, "source": str(csv)})
    multi = int((prepared["n_targets"] > 1).sum())
    log.info(
        "%s: %d pairs (%d with several differing words, %d cloze-last) -> %s",
        name, len(prepared), multi, int((prepared["position"] == "last").sum()), out,
    )
    return prepared


EXAMPLES = ("gece prepare data/benchmarks/winobias.csv artifacts/prepared/winobias.parquet",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("csv", type=Path, help="data/benchmarks/<name>.csv")
    p.add_argument("out", type=Path, help="artifacts/prepared/<name>.parquet")
    p.add_argument("--duplicates", choices=["keep", "drop", "error"],
                   help="repeated pairs: keep, drop or reject (default: {params:prepare.duplicates})")
    p.set_defaults(outputs={"OUT": "out"}, inputs=("csv",))


def run(args: argparse.Namespace) -> int:
    params = command.params_or_defaults(args)
    settings = command.override(params.prepare if params else PrepareParams(), duplicates=args.duplicates)
    if params:
        layout.check_data(params, args.params)
    prepare(args.csv, args.out, settings)
    return 0
