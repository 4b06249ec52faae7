"""`make bench`: run every bench/bench_*.py (each has a main()) and collect reports/bench/*.json."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    for script in scripts:
        spec = importlib.util.spec_from_file_location(script.stem, script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
