"""``gece exp-summary``: DVC experiments as one readable table.

``dvc exp show`` prints a column for every parameter and metric (hundreds here), so its default
view is a grid of ``…``. This reads ``dvc exp show --json`` and keeps, for the workspace, the
baseline commit and its experiments, only the parameters that differ between them and the metrics
of ``reports/summary.json`` that moved by more than a tolerance (those matching ``--keep`` if
given). :func:`table` is pure; :func:`exp_show_json` runs DVC.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gece import options
from gece.errors import GeceError
from gece.io.files import flatten, is_finite_number

MAX_METRICS = 8  # metric columns shown at most (the largest spread first)


@dataclass
class Row:
    name: str  # workspace, the baseline's branch or short rev, or the experiment's name
    rev: str
    params: dict[str, object]
    metrics: dict[str, object]


def exp_show_json(*args: str) -> list:
    """``dvc exp show --json`` (with ``args``, e.g. ``--all-commits``) as parsed JSON."""
    dvc = Path(sys.executable).with_name("dvc")
    cmd = [str(dvc) if dvc.exists() else "dvc", "exp", "show", "--json", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise GeceError("gece exp-summary needs dvc, which is not installed", hint="make install") from e
    if done.returncode != 0:
        raise GeceError(f"dvc exp show failed: {done.stderr.strip()[-500:]}", hint="run it from the repository root")
    return json.loads(done.stdout)


def _row(name: str, entry: dict) -> Row:
    data = entry.get("data") or {}
    params = flatten(((data.get("params") or {}).get("params.yaml") or {}).get("data") or {})
    metrics = {}
    for _path, content in (data.get("metrics") or {}).items():
        metrics.update({k: v for k, v in flatten((content or {}).get("data") or {}).items()})
    return Row(name, entry.get("rev", ""), params, metrics)


def rows(shown: list) -> list[Row]:
    """The workspace, each baseline commit, and each experiment of ``dvc exp show --json``."""
    out = []
    for entry in shown:
        rev = entry.get("rev", "")
        out.append(_row(entry.get("name") or ("workspace" if rev == "workspace" else rev[:7]), entry))
        for exp in entry.get("experiments") or []:
            for r in exp.get("revs") or []:
                out.append(_row(r.get("name") or r.get("rev", "")[:7], r))
    return out


def _differs(values: list[object], tol: float) -> bool:
    present = [v for v in values if v is not None]
    if len(present) != len(values):
        return len(present) > 0
    if all(is_finite_number(v) for v in present):
        return max(present) - min(present) > tol  # type: ignore[type-var,operator]
    return len({json.dumps(v, sort_keys=True) for v in present}) > 1


def table(
    all_rows: list[Row],
    tol: float = 1e-6,
    keep: str | re.Pattern[str] | None = None,
    max_metrics: int = MAX_METRICS,
) -> tuple[list[str], list[str], int]:
    """The parameter and metric columns worth showing: parameters that differ between the rows, metrics that
    moved by more than ``tol`` (matching the regex ``keep`` when given), at most ``max_metrics`` of them with
    the largest spread first. Also returns how many moved metrics were left out."""
    params = sorted({k for r in all_rows for k in r.params})
    params = [k for k in params if _differs([r.params.get(k) for r in all_rows], tol=0.0)]
    pattern = re.compile(keep) if keep else None
    keys = list(dict.fromkeys(k for r in all_rows for k in r.metrics))
    moved = [
        k
        for k in keys
        if (pattern is None or pattern.search(k)) and _differs([r.metrics.get(k) for r in all_rows], tol)
    ]

    def spread(k: str) -> float:
        nums = [r.metrics.get(k) for r in all_rows if is_finite_number(r.metrics.get(k))]
        return max(nums) - min(nums) if len(nums) > 1 else math.inf  # type: ignore[operator,type-var]

    ranked = sorted(moved, key=lambda k: (-spread(k), k))
    shown = [k for k in keys if k in set(ranked[:max_metrics])]
    return params, shown, len(moved) - len(shown)


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "DVC experiments as one readable table: the parameters that differ and the summary metrics that moved (a "
    "readable dvc exp show)"
)
EXAMPLES = (
    "dvc exp run -S metrics.n_bins=15 && gece exp-summary",
    "gece exp-summary --keep 'winobias.*ece$'        # only these metrics",
    "gece exp-summary --all-commits --tol 1e-3",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep",
        type=options.regex,
        help="only metrics whose key (e.g. runs.winobias.smollm2-135m.ece) matches this regex "
        "(default: every metric that moved)",
    )
    p.add_argument(
        "--tol",
        type=options.tolerance,
        default=1e-6,
        help="a metric that moved by this much or less is not shown (default: %(default)g)",
    )
    p.add_argument(
        "--max-metrics",
        type=options.count,
        default=8,
        help="metric columns at most, the largest spread first (default: %(default)s)",
    )
    p.add_argument("--all-commits", action="store_true", help="experiments of every commit, not only HEAD's")


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from gece.command import out
    from gece.terminal import plain, plural

    found = rows(exp_show_json(*(["--all-commits"] if args.all_commits else [])))
    params, metrics, left = table(found, args.tol, args.keep, args.max_metrics)
    view = Table(
        title=plain(
            f"DVC experiments: {plural(len(params), 'parameter')} changed, "
            f"{plural(len(metrics), 'metric')} of reports/summary.json moved by more than "
            f"{args.tol:g}"
        ),
        title_justify="left",
    )
    view.add_column("experiment")
    for k in params:
        view.add_column(plain(k), justify="right")
    for k in metrics:
        view.add_column(plain(k.removeprefix("runs.")), justify="right")
    show = lambda v: "–" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)  # noqa: E731
    for r in found:
        view.add_row(
            plain(r.name),
            *(plain(show(r.params.get(k))) for k in params),
            *(plain(show(r.metrics.get(k))) for k in metrics),
        )
    out.print(view)
    if left:
        out.print(
            f"{plural(left, 'other metric')} moved too (--max-metrics, --keep REGEX or `gece diff` to see them)",
            highlight=False,
        )
    return 0
