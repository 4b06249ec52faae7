"""Bounded cost of validation (issue 49, item 5): `gece validate` on hostile benchmark CSVs at 1x and 4x the size.

difflib's alignment of two sentences of one repeated word grows with the cube of their length (one pair of
100,000-character sentences took over three minutes); ``gece.io.formats.benchmarks.align`` stops at a budget of
``GECE_MAX_ALIGN_STEPS`` (10) steps a word of the pair and validate refuses the row. Measured, each in its own
process (start-up included): ``gece validate`` of
- ``long-pair``: one pair of sentences of one repeated word, 100,000 and 400,000 characters (the second is over the
  CSV field limit of 131,072 characters);
- ``repeated-rows``: 1 MiB and 4 MiB of rows of 41 words of one repeated word, each refused;
- ``plain-rows``: 1 MiB and 4 MiB of ordinary pairs, each accepted.
Also checked: every pair of the shipped benchmarks aligns to the same opcodes with the budget as with difflib alone,
within the budget. Writes reports/bench/align.json; about 30 s on 2 cores.
"""

from __future__ import annotations

import csv
import difflib
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def _long_pair(n_chars: int) -> str:
    more = ("word " * (n_chars // 5)).strip() + "."
    less = "word " * (n_chars // 5 - 1) + "she."
    return f"sent_more,sent_less,y\n{more},{less},1\n"


def _rows(size: int, repeated: bool) -> str:
    out, total, i = ["sent_more,sent_less,y\n"], 0, 0
    while total < size:
        if repeated:
            row = "w " * 40 + f"he {i}.," + "w " * 40 + f"she {i}.,1\n"
        else:
            row = f"The nurse {i} said that he was late.,The nurse {i} said that she was late.,1\n"
        out.append(row)
        total, i = total + len(row), i + 1
    return "".join(out)


def _validate(path: Path) -> dict:
    t = time.perf_counter()
    done = subprocess.run(["gece", "-q", "validate", str(path)], capture_output=True, text=True, cwd=ROOT)
    return {
        "exit": done.returncode,
        "seconds": round(time.perf_counter() - t, 2),
        "mb": round(path.stat().st_size / MiB, 2),
    }


def shipped_alignments() -> int:
    """Every shipped pair: the budgeted matcher gives difflib's opcodes within its budget. Returns the pairs."""
    from gece.io.files.limits import limit
    from gece.io.formats.benchmarks import CountedMatcher, words

    n = 0
    sources = sorted((ROOT / "data").glob("benchmarks/*.csv")) + sorted((ROOT / "data").glob("[cw]*/*.csv"))
    for path in sources:
        with path.open(encoding="utf-8-sig", newline="") as f:
            for row in csv.DictReader(f):
                a = [w.text for w in words(row.get("sent_more") or "")]
                b = [w.text for w in words(row.get("sent_less") or "")]
                counted = CountedMatcher(a, b, limit("align_steps") * max(len(a) + len(b), 50))
                assert counted.get_opcodes() == difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
                n += 1
    return n


def main() -> dict:
    from gece.io.files.json_writer import write_json

    cases: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="gece-bench-align-") as tmp:
        for name, make in (
            ("long-pair", lambda k: _long_pair(100_000 * k)),
            ("repeated-rows", lambda k: _rows(k * MiB, True)),
            ("plain-rows", lambda k: _rows(k * MiB, False)),
        ):
            for k in (1, 4):
                path = Path(tmp) / f"{name}-{k}.csv"
                path.write_text(make(k), encoding="utf-8")
                print(f"bench align: gece validate {name} x{k} ...", flush=True)
                cases[f"{name}-x{k}"] = _validate(path)
    report = {
        "command": "gece -q validate <file>",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "cases": cases,
        "shipped_pairs_same_alignment": shipped_alignments(),
    }
    report["ratio_4x_over_1x"] = {
        name: round(cases[f"{name}-x4"]["seconds"] / cases[f"{name}-x1"]["seconds"], 2)
        for name in ("long-pair", "repeated-rows", "plain-rows")
    }
    write_json(ROOT / "reports" / "bench" / "align.json", report)
    for name, c in cases.items():
        print(f"  {name}: {c['mb']} MB, exit {c['exit']}, {c['seconds']} s")
    print(
        f"  4x over 1x: {report['ratio_4x_over_1x']}; "
        f"shipped pairs aligned alike: {report['shipped_pairs_same_alignment']}"
    )
    return report


if __name__ == "__main__":
    main()
