"""Where the data snapshot's files live (``data/``, DVC-tracked by ``data.dvc``): the benchmark CSVs, the
annotations, the authors' released scores, and the check that every file params.yaml names exists.
"""

from __future__ import annotations

from pathlib import Path

from gece.base.errors import GeceError
from gece.io.paths.layout import DATA, benchmark_id, model_id
from gece.io.settings.params import Params

DATA_HINT = "pull the data (`gece pull`, or `dvc pull data.dvc`), or fix the id in params.yaml"


def benchmark_csv(benchmark: str) -> Path:
    """``data/benchmarks/<benchmark>.csv``; an id that is no plain name is a GeceError."""
    return DATA / "benchmarks" / f"{benchmark_id(benchmark)}.csv"


def benchmark_source(params: Params, benchmark: str) -> Path:
    """The file a benchmark is read from: its entry's ``source`` (``benchmarks.<b>.source``, a CrowS-Pairs-format
    CSV) when it has one, else ``data/benchmarks/<benchmark>.csv``."""
    entry = params.benchmarks.get(benchmark)
    return Path(entry.source) if entry is not None and entry.source is not None else benchmark_csv(benchmark)


def rule_variants(params: Params) -> dict[str, list[str]]:
    """The benchmarks read from one source (:func:`benchmark_source`) under several rules: the first entry of each
    source, in ``benchmarks`` order -> the later entries with the same source; only sources with several entries."""
    by_source: dict[tuple[Path, str | None], list[str]] = {}
    for b, entry in params.benchmarks.items():  # SynthBias's types are two benchmarks of one file, not variants
        by_source.setdefault((benchmark_source(params, b), entry.synthbias), []).append(b)
    return {names[0]: names[1:] for names in by_source.values() if len(names) > 1}


def annotations_csv(benchmark: str) -> Path:
    """``data/annotations/<benchmark>.csv``: per-annotator labels of any benchmark (optional; docs/annotations.md)."""
    return DATA / "annotations" / f"{benchmark_id(benchmark)}.csv"


def reference_dir() -> Path:
    """``data/reference``: the authors' released scores, one folder per benchmark."""
    return DATA / "reference"


def reference_csv(benchmark: str, name: str) -> Path:
    """``data/reference/<benchmark>/<name>.csv``: released scores of one model (``source: reference:<name>``)."""
    return reference_dir() / benchmark_id(benchmark) / f"{model_id(name)}.csv"


MAX_SHOWN = 20  # missing files listed at most


def check_data(params: Params, source: str | Path) -> None:
    """Every data file that ``params`` (read from ``source``) names must exist: each benchmark's CSV,
    and for each reference run the released scores of at least one benchmark.

    A GeceError names each params key and its missing file (or says that data/ itself is missing).
    """
    missing = [
        f"benchmarks.{b}: {benchmark_source(params, b)} not found"
        + (f" (benchmarks.{b}.source)" if entry.source is not None else "")
        for b, entry in params.benchmarks.items()
        if not benchmark_source(params, b).is_file()
    ]
    for j, m in enumerate(params.references):
        name = params.registry[m].reference
        if not any(reference_csv(b, name).is_file() for b in params.benchmarks):
            missing.append(
                f"references[{j}] {m!r}: no {reference_dir()}/<benchmark>/{name}.csv for any of the benchmarks"
            )
    if not missing:
        return
    if not DATA.exists():
        raise GeceError(
            f"{source}: data/ is missing: run `dvc pull data.dvc` (or make data)",
            problems=[f"{DATA.absolute()} does not exist"],
            hint="the data snapshot is tracked by DVC (data.dvc), not git; `gece pull` checks "
            "the DVC remote and pulls it",
        )
    raise GeceError(
        f"{source}: names {len(missing)} data file(s) that do not exist", problems=missing[:MAX_SHOWN], hint=DATA_HINT
    )
