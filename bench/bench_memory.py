"""Bounded memory: peak RSS of extract and metrics on 1,000 vs 50,000 pairs (smollm2-135m).

Extraction streams (pairs are read, tokenized, ordered and scored ``WINDOW_PAIRS`` at a time,
shards go to disk, the output is assembled window by window) and the metrics stage keeps only
the run's columns and bootstraps in chunks of bounded size, so peak memory should not grow
with the benchmark. The synthetic benchmark repeats WinoBias' 771 pairs behind numbered
lead-ins ("Case 17: The developer argued with ...") until it has 50,000 distinct pairs.

Each measurement runs in its own process (the peak RSS is its own): ``gece extract`` of the
first 1,000 pairs and of all 50,000, then ``gece metrics`` (1000 bootstrap draws) of each
output. Target (issue 8): the 50,000-pair peak within 10% of the 1,000-pair peak, for extract.
Writes reports/bench/memory.json. ``GECE_BENCH_LARGE=N`` sets the large size (quick checks;
the committed numbers use 50,000).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, however this is loaded
from common import run_worker

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
SMALL, LARGE = 1_000, 50_000
TARGET = 1.10  # large / small peak RSS


def synthetic_csv(path: Path, n: int) -> None:
    """n distinct pairs: WinoBias pairs behind the lead-in "Case k: " (k = 1, 2, ...)."""
    import pandas as pd

    base = pd.read_csv(ROOT / "data" / "benchmarks" / "winobias.csv")
    reps = -(-n // len(base))
    frames = []
    for k in range(reps):
        f = base.copy()
        f["sent_more"] = f"Case {k + 1}: " + f["sent_more"]
        f["sent_less"] = f"Case {k + 1}: " + f["sent_less"]
        frames.append(f)
    pd.concat(frames, ignore_index=True).head(n).to_csv(path, index=False)


# ------------------------------------------------------------------------ workers
def _rss_mb() -> float:
    from gece.scoring.memory import peak_rss_mb

    return peak_rss_mb()


def worker_extract(prepared: Path, out: Path, n: int) -> dict:
    from gece.io.settings.extract_params import ExtractParams
    from gece.io.settings.params import load_params
    from gece.pipeline import extract as extract_stage
    from gece.scoring import models

    spec = load_params(ROOT / "params.yaml").registry[MODEL]
    lm = models.load(spec)
    loaded_mb = _rss_mb()
    meta, timing = extract_stage.extract(prepared, out, MODEL, spec, ExtractParams(batch_size=32, limit=n), loaded=lm)
    return {
        "pairs": meta.pairs,
        "seconds": timing.seconds,
        "pairs_per_s": timing.pairs_per_s,
        "rss_after_load_mb": round(loaded_mb, 1),
        "peak_rss_mb": round(_rss_mb(), 1),
    }


def worker_metrics(scores: Path, out: Path, n: int) -> dict:
    from gece.io.settings.sections import MetricsParams
    from gece.pipeline import metrics as metrics_stage

    t = time.perf_counter()
    report, _, _ = metrics_stage.metrics_stage(scores, out, None, MetricsParams())
    return {
        "pairs": report["n"],
        "seconds": round(time.perf_counter() - t, 3),
        "ece": report["ece"],
        "peak_rss_mb": round(_rss_mb(), 1),
    }


WORKERS = {"extract": worker_extract, "metrics": worker_metrics}


def _run(name: str, a: Path, b: Path, n: int, work: Path) -> dict:
    result = work / f"{name}-{n}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    return run_worker(__file__, [name, str(a), str(b), str(n), str(result)], result, env, f"{name} ({n} pairs)")


def main() -> dict:
    from rich.console import Console
    from rich.table import Table

    from gece.io.files.json_writer import write_json
    from gece.pipeline import prepare as prepare_stage
    from gece.scoring import extraction

    large = int(os.environ.get("GECE_BENCH_LARGE", "0")) or LARGE
    console = Console()
    rows: dict[str, dict[str, dict]] = {"extract": {}, "metrics": {}}
    with tempfile.TemporaryDirectory(prefix="gece-bench-memory-") as tmp:
        work = Path(tmp)
        csv, prepared = work / "synthetic.csv", work / "synthetic.parquet"
        synthetic_csv(csv, large)
        prepare_stage.prepare(csv, prepared)
        for n in (SMALL, large):
            scores = work / f"scores-{n}.parquet"
            console.print(f"bench memory: extract {n} pairs ...", highlight=False)
            rows["extract"][str(n)] = _run("extract", prepared, scores, n, work)
            console.print(f"bench memory: metrics {n} pairs ...", highlight=False)
            rows["metrics"][str(n)] = _run("metrics", scores, work / f"metrics-{n}.json", n, work)
    ratios = {stage: round(r[str(large)]["peak_rss_mb"] / r[str(SMALL)]["peak_rss_mb"], 4) for stage, r in rows.items()}
    report = {
        "model": MODEL,
        "benchmark": f"synthetic ({large} WinoBias pairs behind numbered lead-ins)",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "window_pairs": extraction.WINDOW_PAIRS,
        "sizes": [SMALL, large],
        "stages": rows,
        "peak_rss_ratio": ratios,
        "target_ratio": TARGET,
        "met": {"extract": ratios["extract"] <= TARGET},
    }
    write_json(ROOT / "reports" / "bench" / "memory.json", report)
    table = Table(title=f"peak RSS, {SMALL} vs {large} pairs ({MODEL})", title_justify="left")
    for col in ("stage", "pairs", "seconds", "peak RSS MB", "ratio"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for stage, r in rows.items():
        for n, v in r.items():
            table.add_row(
                stage,
                n,
                f"{v['seconds']:.1f}",
                f"{v['peak_rss_mb']:.0f}",
                f"{ratios[stage]:.3f}" if n == str(large) else "",
            )
    console.print(table)
    console.print(
        f"target: extract peak RSS at {large} pairs within {TARGET - 1:.0%} of {SMALL} pairs: "
        + ("met" if report["met"]["extract"] else "NOT met"),
        highlight=False,
    )
    return report


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--worker":
        out = WORKERS[sys.argv[2]](Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5]))
        Path(sys.argv[6]).write_text(json.dumps(out))
    else:
        main()
