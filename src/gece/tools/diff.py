"""``gece diff``: the JSON values that moved between two git revisions, summarised to fit a screen.

``dvc metrics diff`` lists every value that differs, float noise in the 7th digit included (shown as
a change of 0); this reads the same files from git (``git show REV:path``), from DVC's cache for the
reports DVC holds at that revision (``dvc.fs.DVCFileSystem``: per-run detail, not in git), or the workspace,
flattens them the way DVC names the keys (``runs.winobias.smollm2-135m.ece``) and keeps only the
numbers that moved: by default those whose change DVC shows as non-zero (rounded to
:data:`DVC_PRECISION` decimals), or by more than ``tol`` when one is given (plus added, removed and
non-numeric changes). :func:`review` sums them up per metric family and benchmark (how many moved,
the largest change, its sign and its run); the full list is one flag away. Pure except
:func:`read_revision`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gece.base.errors import GeceError
from gece.catalog import metric_defs
from gece.cmd import options
from gece.io.files.inputs import read_text
from gece.io.files.json_reader import flatten, is_finite_number, parse_json
from gece.io.paths import layout, report_layout
from gece.protocols import declarations

WORKSPACE = "workspace"
DEFAULT_PATHS = (report_layout.summary_path().as_posix(),)  # the DVC metrics of dvc.yaml
DEFAULT_TOL = None  # DVC's rule: a change that `dvc metrics diff` shows as non-zero
DVC_PRECISION = 5  # dvc metrics diff rounds the change to this many decimals (dvc.commands.metrics.DEFAULT_PRECISION)


def moves(delta: float, tol: float | None) -> bool:
    """Whether a number that changed by ``delta`` moved: by more than ``tol`` (absolute), or, when ``tol`` is
    None, by a change that ``dvc metrics diff`` shows as non-zero (``round(delta, 5) != 0``)."""
    return round(delta, DVC_PRECISION) != 0 if tol is None else abs(delta) > tol


def rule(tol: float | None) -> str:
    """The rule of :func:`moves` in words."""
    return "non-zero in dvc metrics diff" if tol is None else f"by more than {tol:g}"


@dataclass(frozen=True)
class Change:
    file: str
    key: str
    old: object
    new: object

    @property
    def delta(self) -> float | None:
        if is_finite_number(self.old) and is_finite_number(self.new):
            return float(self.new) - float(self.old)  # type: ignore[arg-type]
        return None


def leaves(old: dict, new: dict, file: str = "") -> list[Change]:
    """Every leaf of ``old`` and ``new`` (flattened), changed or not; None on the side that lacks it. A null leaf is
    no value, as DVC reads metrics (``dvc metrics diff``, and ``dvc exp show``, which ``gece exp-summary`` reads): a
    key null on both sides is not compared, one null on one side only is added or removed."""
    a, b = ({k: v for k, v in flatten(d).items() if v is not None} for d in (old, new))
    return [Change(file, k, a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b])]


def moved(old: dict, new: dict, tol: float | None, file: str = "") -> tuple[list[Change], int]:
    """The leaves of ``old`` and ``new`` (flattened) that differ: numbers that moved (:func:`moves`),
    anything else when unequal, keys present on one side only. Returns the changes and how many
    numbers differ but did not move (hidden)."""
    return split(leaves(old, new, file), tol)


def split(values: list[Change], tol: float | None) -> tuple[list[Change], int]:
    """``values`` that changed (as :func:`moved`) and how many changed without moving."""
    changes, hidden = [], 0
    for c in values:
        if c.old == c.new:
            continue
        if c.delta is not None and not moves(c.delta, tol):
            hidden += 1
            continue
        changes.append(c)
    return changes, hidden


def _git(args: list[str], hint: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise GeceError("gece diff needs git, which is not installed", hint=hint) from e
    if done.returncode != 0:
        raise GeceError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}", hint=hint)
    return done.stdout


_DVC_FS: dict[str, object] = {}  # DVCFileSystem per revision: opening one reads the revision's pipeline


def _dvc_fs(rev: str):
    """DVC's view of the repository at ``rev`` (git's files and the outputs dvc.lock names there, read from
    DVC's cache), or None outside a DVC project."""
    if rev not in _DVC_FS:
        _DVC_FS[rev] = None
        if Path(".dvc").is_dir():
            from dvc.fs import DVCFileSystem

            _DVC_FS[rev] = DVCFileSystem(repo=".", rev=rev)
    return _DVC_FS[rev]


def files_at(rev: str, paths: list[str]) -> list[str]:
    """The ``*.json`` files under ``paths`` (files or directories) at ``rev`` or in the workspace: at a
    revision, those git holds, else those DVC's outputs hold there."""
    if rev == WORKSPACE:
        out = []
        for p in map(Path, paths):
            out += [p.as_posix()] if p.is_file() else sorted(x.as_posix() for x in p.rglob("*.json"))
        return out
    out = []
    for path in paths:
        listed = _git(
            ["ls-tree", "-r", "--name-only", rev, "--", path],
            hint="name a revision git knows (HEAD, HEAD~1, a branch, a tag or a commit)",
        ).splitlines()
        fs = None if listed else _dvc_fs(rev)
        if fs is not None:
            listed = _dvc_files(fs, rev, path)
        out += [x for x in listed if x.endswith(".json")]
    return out


def _dvc_files(fs, rev: str, path: str) -> list[str]:
    """The files under ``path`` in the DVC outputs of ``rev`` (``fs``: :func:`_dvc_fs`); a folder whose listing
    DVC's cache lacks is an error naming the fetch."""
    from dvc_data.index.index import DataIndexDirError

    try:
        if not fs.exists(path):
            return []
        return [path] if fs.isfile(path) else sorted(fs.find(path))
    except (DataIndexDirError, FileNotFoundError) as e:
        raise _not_cached(path, rev, e) from e


def read_revision(rev: str, path: str) -> dict | None:
    """The JSON of ``path`` at ``rev`` (``workspace``: the file on disk; a report DVC holds at ``rev``: from
    DVC's cache); None when it is absent."""
    if rev == WORKSPACE:
        p = Path(path)
        text = read_text(p, "compare JSON reports only", "json_bytes") if p.is_file() else None
    else:
        try:
            text = _git(["show", f"{rev}:{path}"], hint="")
        except GeceError:
            text = _read_dvc(rev, path)
    if text is None:
        return None
    return parse_json(text, f"{path} at {rev}", "compare JSON reports only")  # bounded depth and numbers


def _not_cached(path: str, rev: str, e: Exception) -> GeceError:
    return GeceError(
        f"{path} at {rev}: dvc.lock there names it, but DVC's cache does not hold it ({e})",
        hint=f"fetch it: `dvc fetch --rev {rev}` (from the default remote), or compare with the workspace",
    )


def _read_dvc(rev: str, path: str) -> str | None:
    """``path`` as a DVC output at ``rev`` holds it, None when DVC names no such file there; DVC's cache lacking
    the file is an error."""
    fs = _dvc_fs(rev)
    if fs is None or not fs.isfile(path):
        return None
    try:
        return fs.read_bytes(path).decode("utf-8")
    except (FileNotFoundError, OSError) as e:
        raise _not_cached(path, rev, e) from e
    except UnicodeDecodeError as e:
        raise GeceError(f"{path} at {rev}: not valid UTF-8 ({e})", hint="compare JSON reports only") from e


def compared(old_rev: str, new_rev: str, paths: list[str]) -> tuple[list[Change], int]:
    """Every leaf of the JSON files under ``paths`` at ``old_rev`` and ``new_rev`` (a file on one side
    only is one ``(file)`` change), and the number of files."""
    files = list(dict.fromkeys([*files_at(old_rev, paths), *files_at(new_rev, paths)]))
    values = []
    for f in files:
        old, new = read_revision(old_rev, f), read_revision(new_rev, f)
        if old is None or new is None:
            values.append(Change(f, "(file)", None if old is None else "present", None if new is None else "present"))
        else:
            values += leaves(old, new, f)
    return values, len(files)


def diff(old_rev: str, new_rev: str, paths: list[str], tol: float | None) -> tuple[list[Change], int, int]:
    """Every change that moved (:func:`moves`) in the JSON files under ``paths`` from ``old_rev`` to
    ``new_rev``; also the number of values that changed without moving and the number of files compared."""
    values, n_files = compared(old_rev, new_rev, paths)
    changes, hidden = split(values, tol)
    return changes, hidden, n_files


# ------------------------------------------------------------------ the one-screen review
# metric families, in the order shown; each holds quantities of one unit, so their changes can be ranked
FAMILIES = (
    "ECE-like",
    "Gender-ECE",
    "gender gap",
    "Brier",
    "accuracy/shares",
    "counts",
    "other",
)
# a family's name in the per-benchmark table, short enough that a benchmark's row stays one line at 100 columns
SHORT = {"ECE-like": "ECE", "Gender-ECE": "G-ECE", "gender gap": "gap", "accuracy/shares": "acc", "counts": "n"}
# the protocols' numbers by key (gece.protocols.declarations), ranked in the families like the registry's
PROTOCOL_METRICS = {m.key: m for p in declarations.PROTOCOLS for m in p.metrics}
_AFFIXES = ("_ci_low", "_ci_high", "_split", "_crossfit", "_min", "_max", "_change")


def family(leaf: str) -> str:
    """The family of a leaf key, from the metric table: ``ece``, ``best_ece_crossfit`` and ``ece_change``
    are ECE-like (the registered errors whose worse end is high), ``gender_ece*`` Gender-ECE, signed gaps and
    ``gap_*`` gender gaps, ``brier*`` Brier, metrics whose worse end is low (and shares) accuracy/shares,
    registered counts and the comparison's ``*_significant`` counts of model pairs; a number defined as a share
    with the shares. A protocol's numbers
    (:attr:`gece.report.protocol.Protocol.metrics`) the same way, an accuracy over a baseline (``over_*``) with the
    accuracies."""
    if leaf.endswith("_significant"):
        return "counts"
    key = leaf.removeprefix("best_")
    for affix in _AFFIXES:
        key = key.removesuffix(affix)
    if key.startswith("over_"):  # a protocol's accuracy minus a baseline
        return "accuracy/shares"
    m = metric_defs.METRIC.get(key) or PROTOCOL_METRICS.get(key)
    if m is None:
        if key.startswith("gap"):
            return "gender gap"
        if "share" in key or "shortfall" in key:
            return "accuracy/shares"
        return "counts" if key.startswith("n_") or key == "n" else "other"
    if m.key.startswith("gender_ece"):
        return "Gender-ECE"
    if m.key.startswith("brier"):
        return "Brier"
    if m.signed or m.key in metric_defs.GAPS or m.key == "bias_gap":
        return "gender gap"
    if m.worse == "high":
        return "ECE-like"
    if m.worse == "low" or "share" in m.key or "confidence" in m.key or m.key == "pct_stereotype":
        return "accuracy/shares"
    if m.definition.startswith("share of"):  # a share by its definition (the referent's pronoun sensitivity)
        return "accuracy/shares"
    return "counts" if not m.interval else "other"


@dataclass(frozen=True)
class Place:
    """Where a value lives: the summary's section (or the report folder), the benchmark, the run, the leaf key."""

    section: str
    benchmark: str
    run: str
    leaf: str


def place(c: Change, benchmarks: set[str]) -> Place:
    """The section, benchmark and run of a change. In ``reports/summary.json`` the section is the first key
    (``runs``, ``calibration``, ``neutral``, ...) and the benchmark is the key part that names one (``neutral``
    and ``special_tokens`` put the run first); in a detail file ``reports/<kind>/<benchmark>/<run>.json`` they
    come from the path."""
    parts = c.key.split(".")
    path = Path(c.file)
    if c.file and path.name != report_layout.summary_path().name:
        folder = path.parts[1:-1] if path.parts[:1] == ("reports",) else path.parts[:-1]
        section = folder[0] if folder else path.stem
        bench = folder[1] if len(folder) > 1 else (parts[0] if parts[0] in benchmarks else "")
        return Place(section, bench, path.stem if len(folder) > 1 else "", parts[-1])
    section, middle = parts[0], parts[1:-1]
    i = next((i for i, p in enumerate(middle) if p in benchmarks), 0 if middle else None)
    if i is None:
        return Place(section, "", "", parts[-1])
    # a run id may hold dots (paper-qwen2.5-7b), which flattening cannot tell from the key's own
    return Place(section, middle[i], ".".join(middle[:i] + middle[i + 1 :]), parts[-1])


@dataclass
class Group:
    """What moved in one group of values (a section and family, or a benchmark)."""

    name: str
    total: int = 0  # values compared
    moved: int = 0  # numbers that moved (:func:`moves`)
    up: int = 0
    down: int = 0
    other: int = 0  # added, removed or non-numeric changes
    largest: Change | None = None  # the largest absolute change (groups of one family only)
    where: Place | None = None
    families: dict[str, int] | None = None  # per benchmark: moved values per family

    def as_json(self) -> dict:
        out = {"name": self.name, "total": self.total, "moved": self.moved, "up": self.up, "down": self.down}
        out["other_changes"] = self.other
        if self.families is not None:
            out["families"] = self.families
        if self.largest is not None and self.where is not None:
            out["largest"] = {
                "key": self.largest.key,
                "file": self.largest.file,
                "old": self.largest.old,
                "new": self.largest.new,
                "change": self.largest.delta,
                "benchmark": self.where.benchmark,
                "run": self.where.run,
            }
        return out


@dataclass
class Review:
    """A diff summed up: per section and metric family, per benchmark, and the totals."""

    by_family: list[Group]
    by_benchmark: list[Group]
    moved: int
    other: int
    hidden: int
    total: int

    def as_json(self) -> dict:
        return {
            "moved": self.moved,
            "other_changes": self.other,
            "hidden": self.hidden,
            "total": self.total,
            "families": [g.as_json() for g in self.by_family],
            "benchmarks": [g.as_json() for g in self.by_benchmark],
        }


def benchmarks_of(values: list[Change]) -> set[str]:
    """The benchmark names of ``reports/summary.json``: the keys under ``runs`` and ``compare``."""
    names = set()
    for c in values:
        parts = c.key.split(".")
        if parts[0] in ("runs", "compare", "calibration", "binning", "groups") and len(parts) > 2:
            names.add(parts[1])
    return names


def review(values: list[Change], tol: float | None) -> Review:
    """``values`` (every leaf compared, changed or not: :func:`compared`) summed up per section and metric
    family and per benchmark: how many moved (:func:`moves`), up and down, and within a family the largest
    absolute change with its benchmark and run. Changes are ranked within a family only, never across."""
    benchmarks = benchmarks_of(values)
    fam: dict[tuple[str, str], Group] = {}
    bench: dict[str, Group] = {}
    moved_n = other = hidden = 0
    for c in values:
        where = place(c, benchmarks)
        f = family(where.leaf)
        g = fam.setdefault((where.section, f), Group(f"{where.section} · {f}"))
        b = bench.setdefault(where.benchmark or "(none)", Group(where.benchmark or "(none)", families={}))
        g.total += 1
        b.total += 1
        if c.old == c.new:
            continue
        d = c.delta
        if d is None:
            g.other += 1
            b.other += 1
            other += 1
            continue
        if not moves(d, tol):
            hidden += 1
            continue
        moved_n += 1
        for x in (g, b):
            x.moved += 1
            x.up += d > 0
            x.down += d < 0
        b.families[f] = b.families.get(f, 0) + 1  # type: ignore[index]
        if g.largest is None or abs(d) > abs(g.largest.delta or 0.0):
            g.largest, g.where = c, where
    order = {f: i for i, f in enumerate(FAMILIES)}
    sections = list(dict.fromkeys(s for s, _ in fam))
    by_family = [
        fam[k] for k in sorted(fam, key=lambda k: (sections.index(k[0]), order[k[1]])) if fam[k].moved or fam[k].other
    ]
    by_benchmark = [g for g in bench.values() if g.moved or g.other]
    for g in by_benchmark:
        g.families = {f: g.families[f] for f in FAMILIES if f in (g.families or {})}  # type: ignore[index]
    return Review(by_family, by_benchmark, moved_n, other, hidden, len(values))


def print_review(r: Review, title: str, out, more: str) -> None:
    """The review as two small tables (per section and family; per benchmark) and a closing line: about 30
    lines at 100 columns whatever moved (a few families per section, a few benchmarks). Run ids fold, never cut."""
    from rich import box

    from gece.base.terminal import plain, plural
    from gece.base.terminal_table import Table

    if r.by_family:  # the hint beside the title, so that the closing line stays one line at 100 columns
        hinted = f"{title} ({more.rstrip('.')})" if more else title
        t = Table(title=plain(hinted), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        t.add_column("section · family")
        t.add_column("moved", justify="right", whole=True)
        t.add_column("largest", justify="right", whole=True)
        t.add_column("benchmark", ids=True)
        t.add_column("run", ids=True)
        for g in r.by_family:
            d = g.largest.delta if g.largest is not None else None
            t.add_row(
                plain(g.name),
                f"{g.moved}/{g.total}" + (f" +{g.other}" if g.other else ""),
                "" if d is None else f"{d:+.4g}",
                plain(g.where.benchmark if g.where else ""),
                plain(g.where.run if g.where else ""),
            )
        out.print(t)  # the second table's header line sets it apart: no blank line, so 40 lines hold both
        b = Table(box=box.SIMPLE_HEAD, show_edge=False)
        b.add_column("benchmark", ids=True)
        b.add_column("moved", justify="right", whole=True)
        b.add_column("up/down", justify="right", whole=True)
        b.add_column("moved per family")
        for g in r.by_benchmark:
            b.add_row(
                plain(g.name),
                f"{g.moved}/{g.total}" + (f" +{g.other}" if g.other else ""),
                f"↑{g.up} ↓{g.down}",
                plain(", ".join(f"{SHORT.get(f, f)} {n}" for f, n in (g.families or {}).items())),
            )
        out.print(b)
    out.print(
        f"{r.moved} of {plural(r.total, 'value')} moved; {r.other} added, removed or not a number (+N); "
        f"{r.hidden} changed without moving." + ("" if r.by_family or not more else f" {more}"),
        highlight=False,
        soft_wrap=False,  # wrapped at the terminal's width, like the tables above it
    )


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "JSON values that moved between two revisions, summed up per metric family and benchmark in one screen: a "
    "dvc metrics diff that float noise cannot flood"
)
EXAMPLES = (
    "gece diff                                    # reports/summary.json, HEAD vs the workspace, one screen",
    "gece diff --all                              # every value that moved, one row each",
    "gece diff --old main --new HEAD --tol 1e-3",
    "gece diff reports/metrics reports/calibration --all  # the detail files, same rule",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", help="JSON files or directories of them (default: reports/summary.json, the DVC metrics)"
    )
    p.add_argument("--old", default="HEAD", help="git revision to compare from (default: %(default)s)")
    p.add_argument("--new", default="workspace", help="git revision to compare to, or workspace (default: %(default)s)")
    p.add_argument(
        "--tol",
        type=options.tolerance,
        default=DEFAULT_TOL,
        help="absolute change at or below which a number is hidden (default: none given, DVC's rule: a change "
        f"that dvc metrics diff shows as non-zero, rounded to {DVC_PRECISION} decimals)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="list every value that moved, one row each (default: the summary per metric family and benchmark)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the summary and every change as JSON ({moved, families, benchmarks, changes, ...})",
    )


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads in the workspace: the given paths, else reports/ (summary.json and the DVC metrics) and
    dvc.yaml, which names the metrics; the revisions' files are read from git."""
    return [Path(p) for p in args.paths] or [layout.REPORTS, Path("dvc.yaml")]


def run(args: argparse.Namespace) -> int:

    from gece.base.terminal import plain, plural
    from gece.base.terminal_table import Table
    from gece.cmd.command import out

    values, n_files = compared(args.old, args.new, args.paths or list(DEFAULT_PATHS))
    changes, hidden = split(values, args.tol)
    if args.json:
        summary = review(values, args.tol).as_json()
        summary["rule"] = rule(args.tol)
        summary["files"] = n_files
        summary["changes"] = [
            {"file": c.file, "key": c.key, "old": c.old, "new": c.new, "change": c.delta} for c in changes
        ]
        print(json.dumps(summary, indent=2))
        return 0
    if not args.all:
        title = f"{args.old} -> {args.new}: values that moved ({rule(args.tol)}), per section and family"
        print_review(review(values, args.tol), title, out, "--all lists them, --json for a script.")
        return 0
    if changes:
        files = list(dict.fromkeys(c.file for c in changes))
        where = f" in {files[0]}" if len(files) == 1 else ""
        table = Table(
            title=plain(f"{args.old} -> {args.new}{where}: values that moved ({rule(args.tol)})"),
            title_justify="left",
        )
        columns = (["file"] if len(files) > 1 else []) + ["key", "old", "new", "change"]
        for col in columns:
            table.add_column(col, justify="left" if col in ("file", "key") else "right")  # a long key folds
        show = lambda v: "–" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)  # noqa: E731
        for c in changes:
            cells = [plain(c.key), plain(show(c.old)), plain(show(c.new)), "" if c.delta is None else f"{c.delta:+.6g}"]
            table.add_row(*([plain(c.file)] if len(files) > 1 else []), *cells)
        out.print(table)
    out.print(
        f"{plural(len(changes), 'value')} moved ({rule(args.tol)}) in "
        f"{plural(n_files, 'file')}; {plural(hidden, 'other value')} changed without moving (hidden)",
        highlight=False,
    )
    return 0
