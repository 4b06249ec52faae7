"""Where the reports live (``reports/``): each stage's JSON reports, the page's tables, figures and pages.

Report files are named relative to the reports directory (``metrics_file(b, m)`` is ``metrics/<b>/<m>.json``):
the tables cite these strings as their sources and the page links its figures by them, so a report written
elsewhere (``gece report --out``) keeps working links. dvc.yaml's outputs and deps are written from the commands'
declarations, which name these paths (``gece stage-deps``): this module is the one place they are spelled.
"""

from __future__ import annotations

from pathlib import Path

from gece.io.paths.layout import REPORTS, benchmark_id, model_id

METRICS_DIR = "metrics"  # one folder per benchmark: the benchmarks the page finds
BINS_DIR = "bins"
ABLATION_DIR = "ablation"
CALIBRATION_DIR = "calibration"
CALIBRATION_BINS_DIR = "calibration_bins"
COMPARE_DIR = "compare"
ANNOTATIONS_DIR = "annotations"
GROUPS_DIR = "groups"
# the folders of the stages' reports, which gece summary and gece report read (gece.pipeline.report_data)
STAGE_REPORTS = (
    METRICS_DIR,
    BINS_DIR,
    ABLATION_DIR,
    CALIBRATION_DIR,
    CALIBRATION_BINS_DIR,
    COMPARE_DIR,
    ANNOTATIONS_DIR,
    GROUPS_DIR,
)


def metrics_dir(b: str) -> str:
    """Headline metrics of every run of a benchmark."""
    return f"{METRICS_DIR}/{b}"


def metrics_file(b: str, m: str) -> str:
    """Headline metrics of one run."""
    return f"{metrics_dir(b)}/{m}.json"


def bins_dir(b: str) -> str:
    """Reliability bins of every run of a benchmark."""
    return f"{BINS_DIR}/{b}"


def bins_file(b: str, m: str) -> str:
    """Reliability bins of one run (DVC plots)."""
    return f"{bins_dir(b)}/{m}.json"


def sample_size_dir(b: str) -> str:
    """Sample-size ablation of every run of a benchmark, with its figures."""
    return f"{ABLATION_DIR}/sample_size/{b}"


def sample_size_file(b: str, m: str) -> str:
    """Sample-size ablation of one run (its figure: :func:`sample_size_figure`)."""
    return f"{sample_size_dir(b)}/{m}.json"


def sample_size_figure(b: str, m: str) -> str:
    """The figure of one run's sample-size ablation, beside its JSON."""
    return f"{sample_size_dir(b)}/{m}.png"


def binning_dir(b: str) -> str:
    """Binning ablation of every run of a benchmark."""
    return f"{ABLATION_DIR}/binning/{b}"


def binning_file(b: str, m: str) -> str:
    """Binning ablation of one run."""
    return f"{binning_dir(b)}/{m}.json"


def neutral_file(m: str) -> str:
    """Occupation vs gender-neutral wording, one model."""
    return f"{ABLATION_DIR}/neutral/{m}.json"


def special_tokens_file(m: str) -> str:
    """With vs without special tokens, one model."""
    return f"{ABLATION_DIR}/special_tokens/{m}.json"


def prompts_file(m: str) -> str:
    """One model under each of its prompts vs the bare sentence."""
    return f"{ABLATION_DIR}/prompts/{m}.json"


def calibration_dir(b: str) -> str:
    """Post-hoc calibration of every run of a benchmark."""
    return f"{CALIBRATION_DIR}/{b}"


def calibration_file(b: str, m: str) -> str:
    """Post-hoc calibration of one run."""
    return f"{calibration_dir(b)}/{m}.json"


def calibration_bins_dir(b: str) -> str:
    """Reliability bins before and after calibration of every run of a benchmark."""
    return f"{CALIBRATION_BINS_DIR}/{b}"


def calibration_bins_file(b: str, m: str) -> str:
    """Reliability bins before and after calibration (DVC plots)."""
    return f"{calibration_bins_dir(b)}/{m}.json"


def groups_file(b: str) -> str:
    """Calibration by group of every run of a benchmark."""
    return f"{GROUPS_DIR}/{b}.json"


def compare_file(b: str) -> str:
    """Paired comparison of every two runs of a benchmark (its markdown: :func:`compare_markdown`)."""
    return f"{COMPARE_DIR}/{b}.json"


def compare_markdown(b: str) -> str:
    """The paired comparison's table of every two runs of a benchmark, as markdown."""
    return f"{COMPARE_DIR}/{b}.md"


def annotation_file(b: str) -> str:
    """Agreement of the annotators of one benchmark."""
    return f"{ANNOTATIONS_DIR}/{b}.json"


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
    return REPORTS / annotation_file(benchmark_id(benchmark))


def metrics_path(benchmark: str, model: str) -> Path:
    """``reports/metrics/<benchmark>/<model>.json``; an id that is no plain name is a GeceError."""
    return REPORTS / metrics_file(benchmark_id(benchmark), model_id(model))


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
