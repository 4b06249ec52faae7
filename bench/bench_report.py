"""Report speed: `gece report` on the shipped runs, cold (every figure drawn) and warm (a rebuild with the
figures of the previous build in place, as `dvc repro` finds them: reports/figures is persist: true).

Targets: a rebuild under 10 s (issue 20); index.html under 200 KB, so the page loads fast (issue 38: the tables
are on reports/pages/). Writes reports/bench/report.json. Run alone with
`python bench/run.py report`.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 10.0
TARGET_INDEX_BYTES = 200_000


def _run(out: Path) -> float:
    """One `gece -q report --out OUT` in a fresh process (imports included), in seconds."""
    gece = Path(sys.executable).with_name("gece")
    t0 = time.perf_counter()
    subprocess.run([str(gece), "-q", "report", "--out", str(out)], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def main() -> dict:
    from rich.console import Console

    from gece.io.files.json_writer import write_json

    if not (ROOT / "reports" / "metrics").is_dir() or not (ROOT / "artifacts" / "scores").is_dir():
        raise SystemExit("reports/ and artifacts/scores are missing: run `make repro` (or dvc pull) first")
    with tempfile.TemporaryDirectory(prefix="gece-bench-report-") as tmp:
        out = Path(tmp) / "page"
        cold = _run(out)
        warm = [_run(out) for _ in range(3)]
        figures = sum(1 for _ in (out / "figures").rglob("*.png"))
        index_bytes = (out / "index.html").stat().st_size
        pages_bytes = sum(p.stat().st_size for p in (out / "pages").glob("*.html"))
        shutil.rmtree(out)
    result = {
        "cold_s": round(cold, 2),
        "warm_s": round(min(warm), 2),
        "warm_runs_s": [round(x, 2) for x in warm],
        "figures": figures,
        "index_bytes": index_bytes,
        "pages_bytes": pages_bytes,
        "target_s": TARGET_S,
        "target_index_bytes": TARGET_INDEX_BYTES,
        "meets_target": min(warm) < TARGET_S and index_bytes < TARGET_INDEX_BYTES,
        "what": "gece -q report --out TMP on the shipped runs: cold = empty TMP (every figure drawn); warm = "
        "the same again (unchanged figures are reused, the page and tables rebuilt); index_bytes: the size of "
        "index.html, pages_bytes: of its detail pages together",
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    write_json(ROOT / "reports" / "bench" / "report.json", result)
    Console().print(
        f"report: cold {cold:.1f} s, warm {min(warm):.1f} s ({figures} figures, index.html {index_bytes / 1000:.0f} "
        f"KB; targets < {TARGET_S:.0f} s warm, < {TARGET_INDEX_BYTES / 1000:.0f} KB: "
        f"{'met' if result['meets_target'] else 'NOT met'}) -> reports/bench/report.json",
        highlight=False,
    )
    return result


if __name__ == "__main__":
    main()
