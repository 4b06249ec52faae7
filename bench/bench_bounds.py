"""Bounded work: what `gece metrics` does with a score file too large to hold, and with one at the limit.

Metrics, ablations, comparison and calibration hold a whole score file in memory (equal-mass bins
sort it, the bootstrap resamples it), so they cannot stream: each checks the file's footer
(rows, uncompressed bytes) against ``gece.io.files.limits.LIMITS`` before reading a row, and refuses a
larger file with exit 2, naming the limit and ``GECE_MAX_ROWS`` to raise it.

Measured, each in its own process (its own peak RSS): ``gece metrics --json`` of
- ``5m-identical``: 5,000,000 identical rows (a ~1 MB file; before issue 17: 2.1 GB, then a C++
  ``bad_alloc``, exit 134): refused, exit 2;
- ``accepted``: ``GECE_BENCH_ROWS`` distinct pairs (100,000 by default), read and scored, to give
  the memory per row below the limit.
From the two, the memory per accepted row and the peak at the limit (an extrapolation: memory
grows linearly with the rows). Writes reports/bench/bounds.json; about 30 s.
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
HUGE = 5_000_000
CHUNK = 100_000


def score_file(path: Path, n: int, distinct: bool) -> None:
    """``n`` score rows written ``CHUNK`` at a time: one pair repeated (``distinct=False``) or n pairs."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gece.io.files.writer import arrow_schema
    from gece.io.schemas.pair_rows import ScoreRow

    schema = arrow_schema(ScoreRow)
    rng = np.random.default_rng(0)
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, n, CHUNK):
            k = min(CHUNK, n - start)
            rows = np.arange(start + 1, start + k + 1)
            lm, ll = (
                (np.log(rng.uniform(0.05, 0.95, k)), np.log(rng.uniform(0.05, 0.95, k)))
                if distinct
                else (np.full(k, np.log(0.6)), np.full(k, np.log(0.4)))
            )
            cols = {
                "pair_id": [f"b-{r:07d}" for r in rows] if distinct else ["b-0000001"] * k,
                "row": rows if distinct else np.ones(k, dtype=np.int64),
                "sent_more": ["He left."] * k,
                "sent_less": ["She left."] * k,
                "y": rng.integers(0, 2, k) if distinct else np.ones(k, dtype=np.int64),
                "bias_type": [None] * k,
                "targets_more": [["He"]] * k,
                "targets_less": [["She"]] * k,
                "gender_more": ["male"] * k,
                "gender_less": ["female"] * k,
                "n_tokens_more": np.ones(k, dtype=np.int64),
                "n_tokens_less": np.ones(k, dtype=np.int64),
                "logprob_more": lm,
                "logprob_less": ll,
                "logit_more": np.ones(k),
                "logit_less": np.ones(k),
                "p": 1 / (1 + np.exp(ll - lm)),
            }
            writer.write_table(pa.table(cols, schema=schema))


def worker(scores: str, result: str) -> None:
    """``gece metrics --json`` in this process; its exit status, seconds and peak RSS go to ``result``."""
    import contextlib
    import io

    from gece.cli import main
    from gece.scoring.memory import peak_rss_mb

    t = time.perf_counter()
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["-q", "metrics", scores, "--json"])
    Path(result).write_text(
        json.dumps(
            {
                "exit": code,
                "seconds": round(time.perf_counter() - t, 2),
                "peak_rss_mb": round(peak_rss_mb(), 1),
                "stderr": err.getvalue().strip()[:600],
            }
        )
    )


def _measure(scores: Path, work: Path) -> dict:
    result = work / f"{scores.stem}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t = time.perf_counter()
    measured = run_worker(__file__, [str(scores), str(result)], result, env, f"bounds on {scores}")
    return {
        "file_mb": round(scores.stat().st_size / 2**20, 2),
        "process_seconds": round(time.perf_counter() - t, 2),
        **measured,
    }


def main() -> dict:
    from gece.io.files.json_writer import write_json
    from gece.io.files.limits import limit

    accepted = int(os.environ.get("GECE_BENCH_ROWS", "100000"))
    cases = {}
    with tempfile.TemporaryDirectory(prefix="gece-bench-bounds-") as tmp:
        work = Path(tmp)
        for name, n, distinct in (("5m-identical", HUGE, False), ("accepted", accepted, True)):
            path = work / f"{name}.parquet"
            score_file(path, n, distinct)
            print(f"bench bounds: gece metrics on {n:,} rows ({name}) ...", flush=True)
            cases[name] = {"rows": n, **_measure(path, work)}
    report = {
        "command": "gece -q metrics <file> --json",
        "limit_rows": limit("rows"),
        "limit_parquet_bytes": limit("parquet_bytes"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "cases": cases,
        "huge_refused": cases["5m-identical"]["exit"] == 2,
    }
    per_row_kb = (cases["accepted"]["peak_rss_mb"] - cases["5m-identical"]["peak_rss_mb"]) * 1024 / accepted
    report["kb_per_row"] = round(per_row_kb, 3)
    report["estimated_peak_at_limit_mb"] = round(
        cases["5m-identical"]["peak_rss_mb"] + per_row_kb * limit("rows") / 1024
    )
    report["estimated_seconds_at_limit"] = round(cases["accepted"]["seconds"] * limit("rows") / accepted)
    write_json(ROOT / "reports" / "bench" / "bounds.json", report)
    for name, c in cases.items():
        print(
            f"  {name}: {c['rows']:,} rows, {c['file_mb']} MB file: exit {c['exit']}, {c['seconds']} s in gece "
            f"({c['process_seconds']} s with start-up), peak RSS {c['peak_rss_mb']:.0f} MB"
        )
    print(
        f"  limit {limit('rows'):,} rows: about {report['kb_per_row']:.2f} KB per row, so a peak of about "
        f"{report['estimated_peak_at_limit_mb']:,} MB and {report['estimated_seconds_at_limit']:,} s at the limit"
    )
    return report


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
