"""Metrics speed: every metric with bootstrap CIs for all 18 reference runs, on one core.

"Every metric" is the whole metrics report: binned, debiased and smooth ECE, Gender-ECE and its
parts, the gender gaps with their bootstrap and permutation p-values, and a bias-corrected
interval for each of the 21 scalars from the same 1000 resamples (issue 19).
Target (issues 3 and 19): under 5 s. Runnable alone: ``python bench/bench_metrics.py``.
Writes reports/bench/metrics.json.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 5.0


def main() -> dict:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from gece.io.files.json_writer import write_json
    from gece.io.files.readers import read_table
    from gece.io.schemas.pair_rows import ScoreRow
    from gece.io.settings.params import load_params
    from gece.stats import metrics

    params = load_params(ROOT / "params.yaml")
    runs = [(b, m) for b in params.paper.benchmarks for m in params.paper.models]
    t0 = time.perf_counter()
    inputs = []
    for b, m in runs:
        path = ROOT / "artifacts" / "scores" / b / f"paper-{m}.parquet"
        if not path.exists():
            raise SystemExit(f"{path} is missing: run `dvc repro metrics-paper` (or make repro) first")
        df, _ = read_table(path, ScoreRow)
        inputs.append(
            (
                df["p"].to_numpy(np.float64),
                df["y"].to_numpy(np.float64),
                df["gender_more"].to_numpy(object),
                df["gender_less"].to_numpy(object),
            )
        )
    read_s = time.perf_counter() - t0
    s = params.metrics
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for p, y, gm, gl in inputs:
            metrics.summarize(
                p, y, gm, gl, n_bins=s.n_bins, binning=s.binning, draws=s.bootstrap, seed=s.seed, level=s.ci
            )
            metrics.reliability_table(p, y, s.n_bins, s.binning)
        times.append(time.perf_counter() - t0)
    from gece.stats import ablation
    from gece.stats.ablation import Run

    arrays = [Run(np.arange(len(p)), p, y, gm, gl) for p, y, gm, gl in inputs]
    t0 = time.perf_counter()
    for run in arrays:
        ablation.sample_size(run, params.ablate.sizes, params.ablate.draws, params.ablate.seed, s.n_bins, s.binning)
    sample_size_s = time.perf_counter() - t0
    result = {
        "runs": len(runs),
        "pairs": int(sum(len(x[0]) for x in inputs)),
        "bootstrap_draws": s.bootstrap,
        "scalars_with_intervals": len(metrics.SCALARS),
        "seconds_best_of_3": min(times),
        "seconds_each": times,
        "seconds_reading_files": read_s,
        "sample_size_ablation_seconds": sample_size_s,
        "target_seconds": TARGET_S,
        "meets_target": min(times) < TARGET_S,
        "cores": 1,
        "machine": platform.processor() or platform.machine(),
    }
    write_json(ROOT / "reports" / "bench" / "metrics.json", result)
    table = Table(
        title=f"metrics: 18 reference runs, {len(metrics.SCALARS)} metrics + 95% bootstrap CIs and "
        "permutation tests, one core"
    )
    for col in (
        "runs",
        "pairs",
        "draws",
        "best of 3 (s)",
        "target (s)",
        "reading files (s)",
        "sample-size ablation (s)",
    ):
        table.add_column(col, justify="right")
    table.add_row(
        str(len(runs)),
        str(result["pairs"]),
        str(s.bootstrap),
        f"{min(times):.2f}",
        f"{TARGET_S:.1f}",
        f"{read_s:.2f}",
        f"{sample_size_s:.2f}",
    )
    Console().print(table)
    return result


if __name__ == "__main__":
    main()
