"""Where every file of the pipeline lives: the only module that spells a path.

Paths are relative to the repository root (the directory ``dvc repro`` runs in):

- ``data/``: the data snapshot (DVC-tracked by ``data.dvc``): benchmark CSVs and the authors'
  released scores.
- ``artifacts/``: cached stage outputs (Parquet; DVC-tracked, pushed to a remote, not to git).
- ``reports/``: the results. What a reviewer reads stays in git (``summary.json``, ``tables/``, ``index.html``,
  the README's figure); the detail (per-run JSON, figures) is a DVC-cached output like ``artifacts/``
  (docs/dvc.md, "What git holds and what DVC holds").

Report files are also named relative to the reports directory (``metrics_file(b, m)`` is
``metrics/<b>/<m>.json``): the tables cite these strings as their sources and the page links its
figures by them, so a report written elsewhere (``gece report --out``) keeps working links.
dvc.yaml spells the same paths for DVC: a path changed here must change there too.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gece.errors import GeceError
from gece.io.model_entry import check_id
from gece.io.outputs import clear_output_dir
from gece.io.params import Params

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
    """The file a benchmark is read from: its entry's ``source`` (``benchmarks.<b>.source``, a CrowS-Pairs-format
    CSV) when it has one, else ``data/benchmarks/<benchmark>.csv``."""
    entry = params.benchmarks.get(benchmark)
    return Path(entry.source) if entry is not None and entry.source is not None else benchmark_csv(benchmark)


def rule_variants(params: Params) -> dict[str, list[str]]:
    """The benchmarks read from one source (:func:`benchmark_source`) under several rules: the first entry of each
    source, in ``benchmarks`` order -> the later entries with the same source; only sources with several entries."""
    by_source: dict[Path, list[str]] = {}
    for b in params.benchmarks:
        by_source.setdefault(benchmark_source(params, b), []).append(b)
    return {names[0]: names[1:] for names in by_source.values() if len(names) > 1}


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
        f"benchmarks.{b}: {benchmark_source(params, b)} not found"
        + (f" (benchmarks.{b}.source)" if entry.imported else "")
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


def scores_file(b: str, m: str) -> str:
    """A scored model's per-pair scores, relative to the folder of every score file (``scores_root()``, or the
    report's ``--scores``)."""
    return f"{b}/{m}.parquet"


def scores_path(benchmark: str, model: str) -> Path:
    """``artifacts/scores/<benchmark>/<model>.parquet``: a scored model's per-pair scores."""
    return scores_root() / scores_file(_b(benchmark), _m(model))


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


def clear_stale_runs(folder: str | Path, models: Iterable[str], suffixes: tuple[str, ...], option: str) -> None:
    """Keep the files of ``folder`` (a benchmark's folder of per-run outputs, ``<model><suffix>`` for each of
    ``suffixes``) to those of the current runs ``models``: the others, files of runs no longer configured, are
    removed (:func:`gece.io.outputs.clear_output_dir`, which refuses a folder holding files gece does not write)."""
    folder = Path(folder)
    keep = [folder / f"{m}{s}" for m in models for s in suffixes]
    clear_output_dir(folder, suffixes, option, keep=keep)


# ------------------------------------------------- reports, relative to the reports directory
METRICS_DIR = "metrics"  # one folder per benchmark: the benchmarks the page finds


def metrics_dir(b: str) -> str:
    """Headline metrics of every run of a benchmark."""
    return f"{METRICS_DIR}/{b}"


def metrics_file(b: str, m: str) -> str:
    """Headline metrics of one run."""
    return f"{metrics_dir(b)}/{m}.json"


def bins_dir(b: str) -> str:
    """Reliability bins of every run of a benchmark."""
    return f"bins/{b}"


def bins_file(b: str, m: str) -> str:
    """Reliability bins of one run (DVC plots)."""
    return f"{bins_dir(b)}/{m}.json"


def sample_size_dir(b: str) -> str:
    """Sample-size ablation of every run of a benchmark, with its figures."""
    return f"ablation/sample_size/{b}"


def sample_size_file(b: str, m: str) -> str:
    """Sample-size ablation of one run (its figure: :func:`sample_size_figure`)."""
    return f"{sample_size_dir(b)}/{m}.json"


def sample_size_figure(b: str, m: str) -> str:
    """The figure of one run's sample-size ablation, beside its JSON."""
    return f"{sample_size_dir(b)}/{m}.png"


def binning_dir(b: str) -> str:
    """Binning ablation of every run of a benchmark."""
    return f"ablation/binning/{b}"


def binning_file(b: str, m: str) -> str:
    """Binning ablation of one run."""
    return f"{binning_dir(b)}/{m}.json"


def neutral_file(m: str) -> str:
    """Occupation vs gender-neutral wording, one model."""
    return f"ablation/neutral/{m}.json"


def special_tokens_file(m: str) -> str:
    """With vs without special tokens, one model."""
    return f"ablation/special_tokens/{m}.json"


def calibration_dir(b: str) -> str:
    """Post-hoc calibration of every run of a benchmark."""
    return f"calibration/{b}"


def calibration_file(b: str, m: str) -> str:
    """Post-hoc calibration of one run."""
    return f"{calibration_dir(b)}/{m}.json"


def calibration_bins_dir(b: str) -> str:
    """Reliability bins before and after calibration of every run of a benchmark."""
    return f"calibration_bins/{b}"


def calibration_bins_file(b: str, m: str) -> str:
    """Reliability bins before and after calibration (DVC plots)."""
    return f"{calibration_bins_dir(b)}/{m}.json"


def groups_file(b: str) -> str:
    """Calibration by group of every run of a benchmark (its markdown tables: the same name with ``.md``)."""
    return f"groups/{b}.json"


def compare_file(b: str) -> str:
    """Paired comparison of every two runs of a benchmark (its markdown: the same name with ``.md``)."""
    return f"compare/{b}.json"


def annotation_file(b: str) -> str:
    """Agreement of the annotators of one benchmark."""
    return f"annotations/{b}.json"


TABLES_DIR = "tables"  # the page's tables as markdown, beside index.html
FIGURES_DIR = "figures"  # the page's figures, beside index.html
PAGE_FILE = "index.html"  # the HTML page, in the reports directory or --out
PAGES_DIR = "pages"  # the page's detail pages (its tables, the confidently wrong pairs), beside index.html
README_FIGURE = "readme_grid.png"  # the README's figure, beside index.html: a copy of the first benchmark's grid


def table_file(name: str) -> str:
    """One table of the page as markdown, relative to the directory of index.html."""
    return f"{TABLES_DIR}/{name}.md"


def page_file(name: str) -> str:
    """One detail page of the report, relative to the directory of index.html."""
    return f"{PAGES_DIR}/{name}.html"


def report_path(rel: str, reports: str | Path = REPORTS) -> Path:
    """A report file (one of the names above) under the reports directory."""
    return Path(reports) / rel


def summary_path() -> Path:
    """``reports/summary.json``: the one DVC metrics file."""
    return REPORTS / "summary.json"


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


def fig_data(name: str) -> str:
    """The numbers a first-screen figure of index.html plots (``gece.report.forest``), as CSV."""
    return f"{FIGURES_DIR}/{name}.csv"


def fig_calibration(b: str) -> str:
    return f"{FIGURES_DIR}/calibration_{b}.png"


def fig_sample_size(b: str, m: str) -> str:
    """A copy of the sample-size figure (``reports/ablation/sample_size``) when the page is written elsewhere."""
    return f"{FIGURES_DIR}/sample_size/{b}/{m}.png"
