"""A complete reports tree for the report tests: every kind of input the page shows.

Two of the authors' paper runs (real scores) on their three benchmarks, plus a synthetic small
model scored with and without special tokens on all five benchmarks, run through the real
stage functions (metrics, ablations, neutral wording, special tokens, comparison). Calibration
reports and extract metadata come from the calibrate and extract stages in the pipeline; here
they are written in the same shapes from simple maps (a temperature and a histogram map, one
method that failed), so the report can be tested on every part.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from gece.io.files.json_writer import write_json
from gece.io.files.readers import read_table
from gece.io.files.writer import write_table
from gece.io.paths import report_layout
from gece.io.schemas.metric_reports import BinsReport, MetricsReport
from gece.io.schemas.pair_rows import SCORE_PAIR_COLUMNS, PreparedPair, ScoreRow
from gece.io.schemas.tokens import ExtractMeta
from gece.io.settings.params import load_params
from gece.io.settings.sections import MetricsParams
from gece.pipeline import ablate as ablate_stage
from gece.pipeline import compare as compare_stage
from gece.pipeline import metrics as metrics_stage
from gece.pipeline import neutral as neutral_stage
from gece.pipeline import special_tokens as special_tokens_stage
from gece.pipeline.runs import load_run_file, read_run
from gece.stats import gap, metrics

from .conftest import ROOT

BENCHMARKS = ("winobias", "winogender", "genderlex", "genderlex_person", "genderlex_someone")
PAPER_BENCHMARKS = ("winobias", "winogender", "genderlex")
PAPER_MODELS = ("gpt-j-6b", "gemma-2-9b")
MODEL, NOBOS = "tiny-lm", "tiny-lm-nobos"

PARAMS = {
    "benchmarks": {b: {"neutral_of": "genderlex"} if b.startswith("genderlex_") else {} for b in BENCHMARKS},
    "models": [MODEL, NOBOS],
    "references": [f"paper-{m}" for m in PAPER_MODELS],
    "registry": {
        MODEL: {"source": "package:tiny-lm"},
        NOBOS: {"source": "package:tiny-lm", "special_tokens": False},
        **{f"paper-{m}": {"source": f"reference:{m}"} for m in PAPER_MODELS},
    },
    "ablate": {"sizes": [50, 100, 500], "draws": 10, "special_tokens": {MODEL: NOBOS}},
    "calibrate": {"headline": "temperature"},  # :func:`calibration_reports` fits temperature and histogram
}


def synthetic_scores(prepared: Path, seed: int, sharpen: float) -> pd.DataFrame:
    """Scores for the prepared pairs: p = sigmoid(sharpen · logit(q)) with y ~ the pair's label noise."""
    pairs, _ = read_table(prepared, PreparedPair)
    rng = np.random.default_rng(seed)
    q = np.clip(np.where(pairs["y"] == 1, rng.beta(4, 2, len(pairs)), rng.beta(2, 4, len(pairs))), 0.01, 0.99)
    z = sharpen * np.log(q / (1 - q))
    df = pairs[SCORE_PAIR_COLUMNS].copy()
    df["n_tokens_more"] = 1
    df["n_tokens_less"] = 1
    df["logprob_more"] = -np.logaddexp(0, -z)  # log sigmoid(z)
    df["logprob_less"] = -np.logaddexp(0, z)
    df["logit_more"] = z
    df["logit_less"] = 0.0
    df["p"] = 1 / (1 + np.exp(-z))
    return df


def _logit(p):
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def _temperature(p_fit, y_fit, p_eval):
    """Temperature by grid search on the log-loss (log(1 + e^-z) = logaddexp(0, -z))."""
    z_fit = _logit(p_fit)
    grid = np.exp(np.linspace(-2, 2, 81))
    loss = [np.mean(np.logaddexp(0, -(2 * y_fit - 1) * z_fit / t)) for t in grid]
    t = float(grid[int(np.argmin(loss))])
    return {"temperature": t}, 1 / (1 + np.exp(-_logit(p_eval) / t))


def _histogram(p_fit, y_fit, p_eval, n_bins=10):
    edges = np.linspace(0, 1, n_bins + 1)
    idx_fit = np.clip(np.searchsorted(edges[1:-1], p_fit), 0, n_bins - 1)
    means = np.array(
        [y_fit[idx_fit == i].mean() if (idx_fit == i).any() else (i + 0.5) / n_bins for i in range(n_bins)]
    )
    out = means[np.clip(np.searchsorted(edges[1:-1], p_eval), 0, n_bins - 1)]
    return {"bins": n_bins}, np.clip(out, 0.0, 1.0)


def calibration_reports(scores: pd.DataFrame) -> tuple[dict, list[dict]]:
    """The calibrate stage's report and bins, shaped as on the calibrate branch, from simple maps."""
    p, y = scores["p"].to_numpy(np.float64), scores["y"].to_numpy(np.float64)
    gm, gl = scores["gender_more"].to_numpy(object), scores["gender_less"].to_numpy(object)
    n = len(p)
    fit, ev = np.arange(n) % 2 == 0, np.arange(n) % 2 == 1
    folds = np.arange(n) % 3

    def summary(q, mask):
        return MetricsReport.model_validate(
            metrics.summarize(q[mask], y[mask], gm[mask], gl[mask], draws=1000, seed=0)
        ).model_dump()

    def bins(q, mask, protocol, method):
        return [
            {"protocol": protocol, "method": method, **r} for r in metrics.reliability_table(q[mask], y[mask]).records()
        ]

    report, records = {}, []
    everything = np.ones(n, dtype=bool)
    for protocol in ("split", "crossfit"):
        mask = ev if protocol == "split" else everything
        methods = {}
        records += bins(p, mask, protocol, "uncalibrated")
        for name, fn in (("temperature", _temperature), ("histogram", _histogram)):
            q = np.full(n, np.nan)
            params = {}
            if protocol == "split":
                params, q[ev] = fn(p[fit], y[fit], p[ev])
            else:
                per_fold = []
                for k in range(3):
                    prm, q[folds == k] = fn(p[folds != k], y[folds != k], p[folds == k])
                    per_fold.append(prm)
                params = {"folds": per_fold}
            methods[name] = {"status": "ok", "reason": None, "params": params, "metrics": summary(q, mask)}
            records += bins(q, mask, protocol, name)
        methods["beta"] = {"status": "failed", "reason": "synthetic failure: no scores", "params": {}, "metrics": None}
        if protocol == "crossfit":
            for m in methods.values():
                m["fold_status"] = [m["status"]] * 3
        head = (
            {"n_fit": int(fit.sum()), "n_eval": int(ev.sum()), "fraction": 0.5}
            if protocol == "split"
            else {"n_fit": 2 * n, "n_eval": n, "folds": 3}
        )
        report[protocol] = {**head, "uncalibrated": summary(p, mask), "methods": methods}
    return report, records


def tiny_meta(benchmark: str, model: str, pairs: int, sha: str) -> ExtractMeta:
    """The extract metadata of a pretend run of the tiny model."""
    return ExtractMeta(
        benchmark=benchmark,
        model=model,
        source="package:tiny-lm",
        kind="gguf",
        weights={"tiny-lm.gguf": sha},
        dtype="float32",
        device="cpu",
        attention="gece_exact",
        special_tokens=model == MODEL,
        word_prob="chain",
        batch_size=32,
        limit=None,
        torch="2.13.0",
        transformers="5.0.0",
        gece="0.1.0",
        pairs=pairs,
        multi_target_pairs=0,
        multi_token_targets=0,
        continued_pairs=0,
        tokens=10 * pairs,
        tokens_padded=12 * pairs,
        tokens_whole=30 * pairs,
        head_positions=pairs,
        flops=1e9 * pairs,
        flops_per_pair=1e9,
        shards=1,
    )


def build(root: Path, prepared_dir: Path, reference_scores: dict) -> Path:
    """Write params.yaml, artifacts/scores and reports/ under ``root``; return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    params = load_params(root / "params.yaml")
    scores_dir, reports = root / "artifacts" / "scores", root / "reports"
    runs = []
    for b in BENCHMARKS:  # the references' data, read through their registry source as in a repository
        (root / "artifacts" / "prepared").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(prepared_dir / f"{b}.parquet", root / "artifacts" / "prepared" / f"{b}.parquet")
    paper_scores = {}
    for b in PAPER_BENCHMARKS:
        for m in PAPER_MODELS:
            (root / "data" / "reference" / b).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / "data" / "reference" / b / f"{m}.csv", root / "data" / "reference" / b / f"{m}.csv")
            paper_scores[(b, f"paper-{m}")] = reference_scores[(b, m)]
            runs.append((b, f"paper-{m}"))
    for i, b in enumerate(BENCHMARKS):
        for model, sharpen in ((MODEL, 1.3), (NOBOS, 4.0)):  # without BOS: much sharper, overconfident
            df = synthetic_scores(prepared_dir / f"{b}.parquet", seed=i, sharpen=sharpen)
            write_table(scores_dir / b / f"{model}.parquet", df, ScoreRow, {"benchmark": b, "model": model})
            write_json(scores_dir / b / f"{model}.meta.json", tiny_meta(b, model, len(df), "0" * 63 + str(i % 2)))
            runs.append((b, model))
    found, draws = {}, {}
    for b, m in runs:  # the metrics stage's reports: each gender gap Holm-corrected over the benchmark's runs
        draws[(b, m)] = {}
        scores, _ = read_run(paper_scores.get((b, m), scores_dir / b / f"{m}.parquet"))
        found[(b, m)], bins = metrics_stage.run_metrics(scores, params.metrics, None, draws[(b, m)])
        write_json(reports / "bins" / b / f"{m}.json", bins, BinsReport)
    for b in BENCHMARKS:
        mine = [k for k in runs if k[0] == b]
        gap.holm_over_runs([found[k] for k in mine], [draws[k] for k in mine])
        for k in mine:
            write_json(reports / "metrics" / b / f"{k[1]}.json", MetricsReport.model_validate(found[k]))
    for b, m in runs:
        s = paper_scores.get((b, m), scores_dir / b / f"{m}.parquet")
        ablate_stage.ablate(
            s,
            reports / "ablation" / "sample_size" / b / f"{m}.json",
            reports / "ablation" / "binning" / b / f"{m}.json",
            reports / "ablation" / "sample_size" / b / f"{m}.png",
            params.metrics,
            params.ablate,
        )
        scores, _ = read_table(s, ScoreRow)
        cal, cal_bins = calibration_reports(scores)
        write_json(reports / "calibration" / b / f"{m}.json", cal)
        write_json(reports / "calibration_bins" / b / f"{m}.json", cal_bins)
    for m in (MODEL, NOBOS):
        neutral_stage.neutral(
            m,
            {b: reports / "metrics" / b / f"{m}.json" for b in params.neutral_benchmarks},
            reports / "ablation" / "neutral" / f"{m}.json",
        )
    special_tokens_stage.special_tokens(
        {
            b: (
                reports / "metrics" / b / f"{MODEL}.json",
                scores_dir / b / f"{MODEL}.parquet",
                reports / "metrics" / b / f"{NOBOS}.json",
                scores_dir / b / f"{NOBOS}.parquet",
            )
            for b in BENCHMARKS
        },
        reports / "ablation" / "special_tokens" / f"{MODEL}.json",
    )
    for b in BENCHMARKS:
        loaded = [
            load_run_file(paper_scores.get((bb, m), scores_dir / bb / f"{m}.parquet")) for bb, m in runs if bb == b
        ]
        compare_stage.compare(
            loaded,
            reports / "compare" / f"{b}.json",
            reports / "compare" / f"{b}.md",
            MetricsParams(),
            params.ablate.compare,
            power_runs=[m for bb, m in runs if bb == b and m in params.references],
        )
    return root


# ---------------------------------------------------------------- reading markdown back
def md_row_cells(line: str) -> list[str]:
    """The cells of a markdown table row as written (still escaped), split at the pipes that no
    backslash escapes; the leading and trailing pipes bound the row."""
    cells, current, i = [], [], 0
    line = line.strip()
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            current.append(line[i : i + 2])
            i += 2
            continue
        if line[i] == "|":
            cells.append("".join(current))
            current = []
        else:
            current.append(line[i])
        i += 1
    cells.append("".join(current))
    return [c.strip() for c in cells[1:-1]]


_MD_ESCAPES = re.compile(r"\\([!-/:-@\[-`{-~])|&(?:#[xX][0-9a-fA-F]+|#[0-9]+|[A-Za-z][A-Za-z0-9]*);")


def md_unescape(text: str) -> str:
    """Undo markdown's escapes: a backslash before ASCII punctuation, and character references."""
    return _MD_ESCAPES.sub(lambda m: m.group(1) if m.group(1) is not None else html.unescape(m.group(0)), text)


def report_pages(reports: Path) -> list[Path]:
    """index.html, then its detail pages (``reports/pages/*.html``), sorted."""
    return [reports / report_layout.PAGE_FILE, *sorted((reports / report_layout.PAGES_DIR).glob("*.html"))]


def report_text(reports: Path) -> str:
    """The text of index.html and every detail page, one after the other."""
    return "\n".join(p.read_text(encoding="utf-8") for p in report_pages(reports))
