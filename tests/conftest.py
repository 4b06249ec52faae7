"""Shared fixtures: the repository root, the data snapshot and prepared benchmarks."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import gece  # noqa: F401  (first: torch must run its portable CPU kernels, see gece.scoring.exact)
from gece.io.paths import report_layout

from .audit import watch_files  # noqa: F401  (autouse: what each command reads and writes is what it declares)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SHARED = ROOT.parent / "shared"
BENCHMARKS = ("winobias", "winogender", "genderlex", "genderlex_person", "genderlex_someone")
PAPER_BENCHMARKS = ("winobias", "winogender", "genderlex")
PAPER_MODELS = (
    "gpt-j-6b",
    "llama-3.1-8b",
    "gemma-2-9b",
    "qwen2.5-7b",
    "falcon3-7b-base",
    "deepseek-r1-distill-llama-8b",
)


# the modules whose tests start from the e2e slice (tests/e2e/conftest.py: slice_origin, one sliced dvc repro
# per test process): run in one pytest-xdist worker (pytest_xdist_make_scheduler), so that the slice is run once
SLICE_MODULES = ("tests/e2e/test_scale.py", "tests/e2e/test_repro.py", "tests/e2e/test_pipeline_determinism.py")
# the modules that read the reports built once per test process (the reference_reports fixture, about two minutes
# to build; full_reports and built_report, about one): one worker, so that they are built once
REFERENCE_MODULES = (
    "tests/test_answer_plots.py",
    "tests/test_answers.py",
    "tests/test_findings.py",
    "tests/test_groups.py",
    "tests/test_intervals.py",
    "tests/test_report.py",
    "tests/test_report_escaping.py",
    "tests/test_terminal.py",
    "tests/e2e/test_report_browser.py",
)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, never called
def pytest_xdist_make_scheduler(config, log):
    """``make test`` (``pytest -n 2``): tests are spread one by one over the workers, except the
    :data:`SLICE_MODULES`, which go to one worker together, and the :data:`REFERENCE_MODULES`, which go to one
    worker together. (xdist's own ``--dist loadgroup`` does not group with pytest 9: it renames items through an
    attribute pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "load":  # another --dist asked for explicitly
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SliceTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return "slice" if module in SLICE_MODULES else "reference" if module in REFERENCE_MODULES else nodeid

    return SliceTogether(config, log)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "benchmarks").is_dir():
        pytest.fail("data/ is missing: run `make data` (dvc pull data.dvc) first")
    return DATA


@pytest.fixture(scope="session")
def prepared_dir(tmp_path_factory, data_dir) -> Path:
    """Every shipped benchmark prepared into a temporary directory (independent of artifacts/)."""
    from gece.pipeline import prepare as prepare_stage

    out = tmp_path_factory.mktemp("prepared")
    for b in BENCHMARKS:
        prepare_stage.prepare(data_dir / "benchmarks" / f"{b}.csv", out / f"{b}.parquet")
    return out


def write_reference(prepared: Path, csv: Path, out: Path, model: str) -> None:
    """Released scores (``source: reference:``) written as a score file, for the tests that take one."""
    from gece.io.files.writer import write_table
    from gece.io.schemas.pair_rows import ScoreRow
    from gece.pipeline import runs

    scores, meta = runs.reference_scores(prepared, csv, model)
    write_table(out, scores, ScoreRow, meta=meta)


@pytest.fixture(scope="session")
def reference_scores(tmp_path_factory, prepared_dir, data_dir) -> dict[tuple[str, str], Path]:
    """The authors' released scores converted to score files: {(benchmark, model): path}."""

    out = tmp_path_factory.mktemp("scores")
    paths = {}
    for b in PAPER_BENCHMARKS:
        for m in PAPER_MODELS:
            path = out / b / f"paper-{m}.parquet"
            write_reference(prepared_dir / f"{b}.parquet", data_dir / "reference" / b / f"{m}.csv", path, f"paper-{m}")
            paths[(b, m)] = path
    return paths


@pytest.fixture(scope="session")
def reference_reports(tmp_path_factory, data_dir) -> Path:
    """The pipeline's reports of the authors' runs (``paper-<model>`` on the benchmarks with released scores),
    built by the stage commands (prepare, metrics, calibrate, ablate, groups, compare) in a temporary tree with
    ``models: []``: the runs need no model, their scores come from ``data/``. The per-run files are the bytes
    ``dvc repro`` writes under ``reports/`` (a benchmark's groups and compare files hold the reference runs only).
    Since the detail under ``reports/`` is a DVC-cached output, not in git (docs/dvc.md, "What git holds and what
    DVC holds"), this is what the tests of the reports read on a clean clone. Returns the tree's root."""
    import contextlib

    import yaml

    from gece.cli import main

    root = tmp_path_factory.mktemp("reference")
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    references = params["references"]
    params["models"], params["ablate"]["special_tokens"] = [], {}
    params["ablate"]["prompts"] = {}
    params["benchmarks"] = {b: params["benchmarks"][b] for b in PAPER_BENCHMARKS}
    params["registry"] = {m: params["registry"][m] for m in references}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (root / "data").symlink_to(data_dir, target_is_directory=True)
    (root / "artifacts" / "scores").mkdir(parents=True)  # no scored model: the report stage reads an empty folder
    handlers = list(logging.getLogger().handlers)
    try:
        with contextlib.chdir(root):
            for b in PAPER_BENCHMARKS:
                for stage in ("prepare", "metrics", "calibrate", "ablate", "groups"):
                    assert main(["-q", stage, "--benchmark", b]) == 0, (stage, b)
                out = report_layout.report_path(report_layout.compare_file(b))
                assert main(["-q", "compare", "--benchmark", b, "--out", str(out)]) == 0, ("compare", b)
    finally:
        logging.getLogger().handlers[:] = handlers
    return root


@pytest.fixture(scope="session")
def workspace_reports() -> Path:
    """The workspace's ``reports/`` with the DVC-cached detail of every run in place (after ``make repro``);
    skipped on a clean clone, where each test that asks for it has a counterpart on reports the tests build
    (:func:`reference_reports`, or the e2e slice)."""
    from gece.io.paths import layout
    from gece.io.settings.params import load_params
    from gece.pipeline import runs

    params = load_params(ROOT / "params.yaml")
    reports = ROOT / layout.REPORTS
    missing = [
        report_layout.metrics_file(b, m)
        for b in params.benchmarks
        for m in runs.runs(params, b, ROOT)
        if not (reports / report_layout.metrics_file(b, m)).is_file()
    ]
    if missing:
        pytest.skip(
            f"reports/ lacks the DVC-cached reports of {len(missing)} runs (e.g. {missing[0]}): `make repro` puts "
            "them there; on a clean clone the claim is checked on reports the tests build (see the docstring)"
        )
    return reports


@pytest.fixture(scope="session")
def full_reports(tmp_path_factory, prepared_dir, reference_scores) -> Path:
    """A tree with every kind of report (see tests/report_data.py): params.yaml, artifacts/scores, reports/."""
    from . import report_data

    return report_data.build(tmp_path_factory.mktemp("full"), prepared_dir, reference_scores)


@pytest.fixture(scope="session")
def built_report(full_reports) -> tuple[Path, dict]:
    """``gece report`` run on ``full_reports``: (reports dir, what the stage returned)."""
    from gece.io.settings.params import load_params
    from gece.pipeline import report as report_stage

    params = load_params(full_reports / "params.yaml")
    result = report_stage.report_stage(
        params,
        full_reports / "reports",
        full_reports / "artifacts" / "scores",
        root=full_reports,
        data_dvc=ROOT / "data.dvc",
    )
    return full_reports / "reports", result


@pytest.fixture(autouse=True)
def _drop_cli_log_handlers():
    """`gece.cli.main` points the root logger at the sys.stderr of its test (a capture that is
    closed afterwards); remove that handler so that later tests do not log into a dead stream."""
    yield
    from rich.logging import RichHandler

    root = logging.getLogger()
    for h in list(root.handlers):
        if type(h) in (logging.StreamHandler, RichHandler):
            root.removeHandler(h)


@pytest.fixture(scope="session")
def params():
    """The repository's params.yaml."""
    from gece.io.settings.params import load_params

    return load_params(ROOT / "params.yaml")


@pytest.fixture(scope="session")
def smol(params):
    """SmolLM2-135M loaded once per session (gece's loader: float32, exact attention, CPU)."""
    from gece.scoring import models

    return models.load(params.registry["smollm2-135m"])


@pytest.fixture(scope="session")
def gemma(params):
    """Gemma-3-270M loaded once per session."""
    from gece.scoring import models

    return models.load(params.registry["gemma-3-270m"])
