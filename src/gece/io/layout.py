"""Where every file of the pipeline lives: the only module that spells a path.

Paths are relative to the repository root (the directory ``dvc repro`` runs in):

- ``data/``: the data snapshot (DVC-tracked by ``data.dvc``): benchmark CSVs and the authors'
  released scores.
- ``artifacts/``: cached stage outputs (Parquet; DVC-tracked, pushed to a remote, not to git).
- ``reports/``: small results committed to git (JSON, markdown, figures, the HTML page).

Report files are also named relative to the reports directory (``metrics_file(b, m)`` is
``metrics/<b>/<m>.json``): the tables cite these strings as their sources and the page links its
figures by them, so a report written elsewhere (``gece report --out``) keeps working links.
dvc.yaml spells the same paths for DVC; ``tests/test_layout.py`` checks that it agrees.
"""

from __future__ import annotations

from pathlib import Path

from gece.errors import GeceError
from gece.io.params import Params, check_id

DATA = Path("data")
ARTIFACTS = Path("artifacts")
REPORTS = Path("reports")
DATA_HINT = "pull the data (`gece pull`, or `dvc pull data.dvc`), or fix the id in params.yaml"


def _b(benchmark: str) -> str:
    return check_id(benchmark, "benchmark")


def _m(model: str) -> str:
    return check_id(model, "model")


# ------------------------------------------------------------------------------- data
def benchmark_csv(benchmark: str) -> Path:
    """``data/benchmarks/<benchmark>.csv``; an id that is no plain name is a GeceError."""
    return DATA / "benchmarks" / f"{_b(benchmark)}.csv"


def benchmark_source(params: Params, benchmark: str) -> Path:
    """The file a benchmark is read from: its ``imports`` entry (a CrowS-Pairs-format CSV) when it has
    one, else ``data/benchmarks/<benchmark>.csv``."""
    return Path(params.imports[benchmark]) if benchmark in params.imports else benchmark_csv(benchmark)


def annotations_csv(benchmark: str) -> Path:
    """``data/annotations/<benchmark>.csv``: per-annotator labels of any benchmark (optional; docs/annotations.md)."""
    return DATA / "annotations" / f"{_b(benchmark)}.csv"


def reference_dir() -> Path:
    """``data/reference``: the authors' released scores, one folder per benchmark."""
    return DATA / "reference"


def reference_csv(benchmark: str, name: str) -> Path:
    """``data/reference/<benchmark>/<name>.csv``: released scores of one model (``source: reference:<name>``)."""
    return reference_dir() / _b(benchmark) / f"{_m(name)}.csv"


MAX_SHOWN = 20  # missing files listed at most


def check_data(params: Params, source: str | Path) -> None:
    """Every data file that ``params`` (read from ``source``) names must exist: each benchmark's CSV,
    and for each reference run the released scores of at least one benchmark.

    A GeceError names each params key and its missing file (or says that data/ itself is missing).
    """
    missing = [
        f"benchmarks[{i}] {b!r}: {benchmark_source(params, b)} not found"
        + (f" (imports.{b})" if b in params.imports else "")
        for i, b in enumerate(params.benchmarks)
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


# -------------------------------------------------------------------------- artifacts
def prepared_path(benchmark: str) -> Path:
    """``artifacts/prepared/<benchmark>.parquet``: the validated, aligned pairs."""
    return ARTIFACTS / "prepared" / f"{_b(benchmark)}.parquet"


def annotations(benchmark: str) -> Path:
    """``artifacts/annotations/<benchmark>.parquet``: one row per pair and annotator (zero rows: none)."""
    return ARTIFACTS / "annotations" / f"{_b(benchmark)}.parquet"


def annotated(benchmark: str) -> Path:
    """``artifacts/annotated/<benchmark>.parquet``: per-pair labels derived from the annotators."""
    return ARTIFACTS / "annotated" / f"{_b(benchmark)}.parquet"


def tokens_dir(model: str) -> Path:
    """``artifacts/tokens/<model>``: a model's token scores of every benchmark (one extract stage per model)."""
    return ARTIFACTS / "tokens" / _m(model)


def tokens_path(model: str, benchmark: str) -> Path:
    """``artifacts/tokens/<model>/<benchmark>.parquet``: every target token's log-probability and logit."""
    return tokens_dir(model) / f"{_b(benchmark)}.parquet"


def tokens_shards_dir(model: str, benchmark: str) -> Path:
    """``artifacts/tokens/<model>.shards/<benchmark>``: the finished shards of an interrupted extract stage, beside
    the stage's output folder, not in it (DVC removes the folder before it runs the stage again)."""
    return tokens_dir(model).with_name(f"{_m(model)}.shards") / _b(benchmark)


def scores_root() -> Path:
    """``artifacts/scores``: every score file, one folder per benchmark."""
    return ARTIFACTS / "scores"


def scores_dir(benchmark: str) -> Path:
    """``artifacts/scores/<benchmark>``."""
    return scores_root() / _b(benchmark)


def scores_path(benchmark: str, model: str) -> Path:
    """``artifacts/scores/<benchmark>/<model>.parquet``: a scored model's per-pair scores."""
    return scores_dir(benchmark) / f"{_m(model)}.parquet"


def _beside(out: str | Path, suffix: str) -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + suffix)


def meta_path(scores: str | Path) -> Path:
    """``<tokens or scores without .parquet>.meta.json``: what scored the pairs (a DVC output)."""
    return _beside(scores, ".meta.json")


def timing_path(scores: str | Path) -> Path:
    """``<tokens without .parquet>.timing.json``: how the extract run went on this machine (ignored by DVC)."""
    return _beside(scores, ".timing.json")


def shards_dir(scores: str | Path) -> Path:
    """``<tokens without .parquet>.shards/``: the finished shards of an interrupted extract run."""
    return _beside(scores, ".shards")


def calibrated_dir(benchmark: str) -> Path:
    """``artifacts/calibrated/<benchmark>``."""
    return ARTIFACTS / "calibrated" / _b(benchmark)


def calibrated_path(benchmark: str, model: str) -> Path:
    """``artifacts/calibrated/<benchmark>/<model>.parquet``: per-pair calibrated scores."""
    return calibrated_dir(benchmark) / f"{_m(model)}.parquet"


# ------------------------------------------------- reports, relative to the reports directory
def metrics_file(b: str, m: str) -> str:
    """Headline metrics of one run."""
    return f"metrics/{b}/{m}.json"


def bins_file(b: str, m: str) -> str:
    """Reliability bins of one run (DVC plots)."""
    return f"bins/{b}/{m}.json"


def sample_size_file(b: str, m: str) -> str:
    """Sample-size ablation of one run (its figure: the same name with ``.png``)."""
    return f"ablation/sample_size/{b}/{m}.json"


def binning_file(b: str, m: str) -> str:
    """Binning ablation of one run."""
    return f"ablation/binning/{b}/{m}.json"


def neutral_file(m: str) -> str:
    """Occupation vs gender-neutral wording, one model."""
    return f"ablation/neutral/{m}.json"


def special_tokens_file(m: str) -> str:
    """With vs without special tokens, one model."""
    return f"ablation/special_tokens/{m}.json"


def calibration_file(b: str, m: str) -> str:
    """Post-hoc calibration of one run."""
    return f"calibration/{b}/{m}.json"


def calibration_bins_file(b: str, m: str) -> str:
    """Reliability bins before and after calibration (DVC plots)."""
    return f"calibration_bins/{b}/{m}.json"


def groups_file(b: str) -> str:
    """Calibration by group of every run of a benchmark (its markdown tables: the same name with ``.md``)."""
    return f"groups/{b}.json"


def compare_file(b: str) -> str:
    """Paired comparison of every two runs of a benchmark (its markdown: the same name with ``.md``)."""
    return f"compare/{b}.json"


def annotation_file(b: str) -> str:
    """Agreement of the annotators of one benchmark."""
    return f"annotations/{b}.json"


ANNOTATIONS_TABLE = "tables/annotations.md"  # agreement and vote-share tables (gece.report.annotations)
SUMMARY_FILE = "summary.json"  # the one DVC metrics file
TABLES_DIR = "tables"
FIGURES_DIR = "figures"
PAGE_FILE = "index.html"

# the report folders that hold one subfolder per benchmark (the benchmarks the page finds)
RUN_FOLDERS = ("metrics", "bins", "ablation/sample_size", "ablation/binning", "calibration", "calibration_bins")


def report_path(rel: str, reports: str | Path = REPORTS) -> Path:
    """A report file (one of the names above) under the reports directory."""
    return Path(reports) / rel


def annotation_report(benchmark: str) -> Path:
    """``reports/annotations/<benchmark>.json``."""
    return REPORTS / annotation_file(_b(benchmark))


def metrics_path(benchmark: str, model: str) -> Path:
    """``reports/metrics/<benchmark>/<model>.json``; an id that is no plain name is a GeceError."""
    return REPORTS / metrics_file(_b(benchmark), _m(model))


# ------------------------------------------------ figures, relative to the directory of index.html
def fig_reliability(b: str, m: str, variant: str | None = None) -> str:
    return f"{FIGURES_DIR}/reliability/{b}/{m}{'.' + variant if variant else ''}.png"


def fig_grid(b: str) -> str:
    return f"{FIGURES_DIR}/grid_{b}.png"


def fig_calibration(b: str) -> str:
    return f"{FIGURES_DIR}/calibration_{b}.png"


def fig_sample_size(b: str, m: str) -> str:
    """A copy of the sample-size figure (``reports/ablation/sample_size``) when the page is written elsewhere."""
    return f"{FIGURES_DIR}/sample_size/{b}/{m}.png"
