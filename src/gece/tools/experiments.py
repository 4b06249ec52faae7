"""``gece exp-summary``: DVC experiments summed up in one screen.

``dvc exp show`` prints a column for every parameter and metric (hundreds here), so its default
view is a grid of ``…``. This reads ``dvc exp show --json`` and shows, for the workspace, the
baseline commit and its experiments, the parameters that differ between them, how many metrics of
``reports/summary.json`` each experiment moved against its baseline (the count ``dvc metrics diff``
shows as non-zero, by default), and per metric family and benchmark what moved, the largest change
and its run (``gece.tools.diff.review``). ``--all`` shows the metrics themselves as columns, ranked
within their family. :func:`table` and :func:`reviews` are pure; :func:`exp_show_json` runs DVC.
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

from gece.base.errors import GeceError
from gece.cmd import options
from gece.io.files.json_reader import flatten, is_finite_number
from gece.tools import diff

MAX_METRICS = 8  # metric columns shown at most (the largest spread first)


@dataclass
class Row:
    name: str  # workspace, the baseline's branch or short rev, or the experiment's name
    rev: str
    params: dict[str, object]
    metrics: dict[str, object]
    baseline: str | None = None  # the name of the row it is compared with (None: a baseline commit)


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


def _row(name: str, entry: dict, baseline: str | None = None) -> Row:
    data = entry.get("data") or {}
    params = flatten(((data.get("params") or {}).get("params.yaml") or {}).get("data") or {})
    metrics = {}
    for _path, content in (data.get("metrics") or {}).items():
        metrics.update({k: v for k, v in flatten((content or {}).get("data") or {}).items() if v is not None})
    return Row(name, entry.get("rev", ""), params, metrics, baseline)


def rows(shown: list) -> list[Row]:
    """The workspace, each baseline commit, and each experiment of ``dvc exp show --json``. The workspace
    is compared with the first commit listed (HEAD), an experiment with the commit it was run on."""
    out = []
    commits = [e for e in shown if e.get("rev") != "workspace"]
    first = None
    for entry in shown:
        rev = entry.get("rev", "")
        name = entry.get("name") or ("workspace" if rev == "workspace" else rev[:7])
        if rev == "workspace":
            head = commits[0] if commits else None
            first = (head.get("name") or head.get("rev", "")[:7]) if head else None
            out.append(_row(name, entry, first))
        else:
            out.append(_row(name, entry))
        for exp in entry.get("experiments") or []:
            for r in exp.get("revs") or []:
                out.append(_row(r.get("name") or r.get("rev", "")[:7], r, name))
    return out


def reviews(all_rows: list[Row], tol: float | None = diff.DEFAULT_TOL) -> list[tuple[Row, Row, diff.Review]]:
    """Each row with a baseline, its baseline and what moved between them (``gece.tools.diff.review``): the
    same count as ``dvc metrics diff BASELINE EXPERIMENT``."""
    by_name = {r.name: r for r in all_rows if r.baseline is None}
    out = []
    for r in all_rows:
        base = by_name.get(r.baseline or "")
        if base is None:
            continue
        keys = dict.fromkeys([*base.metrics, *r.metrics])
        values = [diff.Change("", k, base.metrics.get(k), r.metrics.get(k)) for k in keys]
        out.append((r, base, diff.review(values, tol)))
    return out


def _differs(values: list[object], tol: float | None) -> bool:
    present = [v for v in values if v is not None]
    if len(present) != len(values):
        return len(present) > 0
    if all(is_finite_number(v) for v in present):
        return diff.moves(max(present) - min(present), tol)  # type: ignore[type-var,operator]
    return len({json.dumps(v, sort_keys=True) for v in present}) > 1


def table(
    all_rows: list[Row],
    tol: float | None = diff.DEFAULT_TOL,
    keep: str | re.Pattern[str] | None = None,
    max_metrics: int = MAX_METRICS,
) -> tuple[list[str], list[str], int]:
    """The parameter and metric columns worth showing: parameters that differ between the rows, metrics that
    moved (``gece.tools.diff.moves``; matching the regex ``keep`` when given), at most ``max_metrics`` of them.
    They are ranked within their metric family only (``gece.tools.diff.family``: a count is never ranked
    beside an ECE): the largest spread of each family first, then the second of each, and so on. Also returns
    how many moved metrics were left out."""
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

    order = {f: i for i, f in enumerate(diff.FAMILIES)}
    fam = {k: diff.family(k.rsplit(".", 1)[-1]) for k in moved}
    within = sorted(moved, key=lambda k: (-spread(k), k))
    rank = {k: sum(fam[j] == fam[k] for j in within[: within.index(k)]) for k in within}
    ranked = sorted(moved, key=lambda k: (rank[k], order[fam[k]], -spread(k), k))
    shown = [k for k in keys if k in set(ranked[:max_metrics])]
    return params, shown, len(moved) - len(shown)


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "DVC experiments in one screen: the parameters that differ, and per metric family and benchmark how many "
    "summary metrics moved, the largest change and its run (a readable dvc exp show)"
)
EXAMPLES = (
    "dvc exp run -S metrics.n_bins=15 && gece exp-summary",
    "gece exp-summary --all                          # the metrics themselves as columns",
    "gece exp-summary --all --keep 'winobias.*ece$'  # only these metrics",
    "gece exp-summary --all-commits --tol 1e-3 --json",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep",
        type=options.regex,
        help="with --all: only metrics whose key (e.g. runs.winobias.smollm2-135m.ece) matches this regex "
        "(default: every metric that moved)",
    )
    p.add_argument(
        "--tol",
        type=options.tolerance,
        default=diff.DEFAULT_TOL,
        help="a metric that moved by this much or less has not moved (default: none given, DVC's rule: a change "
        f"that dvc metrics diff shows as non-zero, rounded to {diff.DVC_PRECISION} decimals)",
    )
    p.add_argument(
        "--max-metrics",
        type=options.count,
        default=8,
        help="with --all: metric columns at most, ranked within their family (default: %(default)s)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="show the metrics that moved as columns (default: the summary per metric family and benchmark)",
    )
    p.add_argument("--all-commits", action="store_true", help="experiments of every commit, not only HEAD's")
    p.add_argument("--json", action="store_true", help="print the rows, their changed parameters and reviews as JSON")


def as_json(found: list[Row], params: list[str], tol: float | None) -> dict:
    """What ``--json`` prints: each row's changed parameters, and against its baseline the review and every
    metric that moved."""
    done = {r.name: rv for r, _, rv in reviews(found, tol)}
    out = []
    for r in found:
        entry: dict = {
            "name": r.name,
            "rev": r.rev,
            "baseline": r.baseline,
            "params": {k: r.params.get(k) for k in params},
        }
        if r.name in done and r.baseline is not None:
            base = next(b for b in found if b.name == r.baseline and b.baseline is None)
            entry["review"] = done[r.name].as_json()
            changes, _ = diff.split(
                [
                    diff.Change("", k, base.metrics.get(k), r.metrics.get(k))
                    for k in dict.fromkeys([*base.metrics, *r.metrics])
                ],
                tol,
            )
            entry["changes"] = [{"key": c.key, "old": c.old, "new": c.new, "change": c.delta} for c in changes]
        out.append(entry)
    return {"rule": diff.rule(tol), "params": params, "rows": out}


def run(args: argparse.Namespace) -> int:
    from rich import box

    from gece.base.terminal import plain, plural
    from gece.base.terminal_table import Table
    from gece.cmd.command import out

    found = rows(exp_show_json(*(["--all-commits"] if args.all_commits else [])))
    params, metrics, left = table(found, args.tol, args.keep, args.max_metrics)
    if args.json:
        print(json.dumps(as_json(found, params, args.tol), indent=2))
        return 0
    show = lambda v: "–" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)  # noqa: E731
    if not args.all:
        done = reviews(found, args.tol)
        moved = {r.name: rv for r, _, rv in done}
        view = Table(
            title=plain(
                f"DVC experiments: {plural(len(params), 'parameter')} changed; metrics moved ({diff.rule(args.tol)})"
            ),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        view.add_column("experiment", ids=True)
        view.add_column("vs", ids=True)
        for k in params:
            view.add_column(plain(k), justify="right")
        view.add_column("moved", justify="right", whole=True)
        for r in found:
            rv = moved.get(r.name)
            view.add_row(
                plain(r.name),
                plain(r.baseline or "(baseline)"),
                *(plain(show(r.params.get(k))) for k in params),
                "" if rv is None else f"{rv.moved}" + (f" +{rv.other}" if rv.other else ""),
            )
        out.print(view)
        seen: dict[tuple, str] = {}
        for r, base, rv in done:
            same = (r.baseline, json.dumps(r.metrics, sort_keys=True, default=str))
            if not (rv.moved or rv.other):
                continue
            if same in seen:
                out.print(f"{plain(r.name)}: the same metrics as {plain(seen[same])}", highlight=False)
                continue
            seen[same] = r.name
            out.print()
            diff.print_review(rv, f"{r.name} vs {base.name}: what moved, per section and family", out, "")
        out.print(
            "--all shows the metrics as columns; gece diff --old REV --new REV lists every value.", highlight=False
        )
        return 0
    view = Table(
        title=plain(
            f"DVC experiments: {plural(len(params), 'parameter')} changed, "
            f"{plural(len(metrics) + left, 'metric')} of reports/summary.json moved ({diff.rule(args.tol)})"
            + (f", {len(metrics)} shown" if left else "")
        ),
        title_justify="left",
    )
    view.add_column("experiment", ids=True)
    for k in params:
        view.add_column(plain(k), justify="right")
    for k in metrics:
        view.add_column(plain(k.removeprefix("runs.")), justify="right")
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
