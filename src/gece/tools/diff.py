"""``gece diff``: the JSON values that moved between two git revisions by more than a tolerance.

``dvc metrics diff`` lists every value that differs, float noise in the 7th digit included; this
reads the same files from git (``git show REV:path``) or the workspace, flattens them the way DVC
names the keys (``runs.winobias.smollm2-135m.ece``) and keeps only the numbers that moved by more
than ``tol`` (plus added, removed and non-numeric changes). Pure except :func:`read_revision`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gece import options
from gece.errors import GeceError
from gece.io import layout
from gece.io.disk import read_text
from gece.io.files import flatten, is_finite_number

WORKSPACE = "workspace"
DEFAULT_PATHS = (layout.summary_path().as_posix(),)  # the DVC metrics of dvc.yaml
DEFAULT_TOL = 1e-6


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


def moved(old: dict, new: dict, tol: float, file: str = "") -> tuple[list[Change], int]:
    """The leaves of ``old`` and ``new`` (flattened) that differ: numbers by more than ``tol``
    (absolute), anything else when unequal, keys present on one side only. Returns the changes and
    how many numbers differ by ``tol`` or less (hidden)."""
    a, b = flatten(old), flatten(new)
    changes, hidden = [], 0
    for key in list(dict.fromkeys([*a, *b])):
        x, y = a.get(key, _ABSENT), b.get(key, _ABSENT)
        if x == y:
            continue
        if is_finite_number(x) and is_finite_number(y) and abs(float(y) - float(x)) <= tol:  # type: ignore[arg-type]
            hidden += 1
            continue
        changes.append(Change(file, key, None if x is _ABSENT else x, None if y is _ABSENT else y))
    return changes, hidden


_ABSENT = object()


def _git(args: list[str], hint: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise GeceError("gece diff needs git, which is not installed", hint=hint) from e
    if done.returncode != 0:
        raise GeceError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}", hint=hint)
    return done.stdout


def files_at(rev: str, paths: list[str]) -> list[str]:
    """The ``*.json`` files under ``paths`` (files or directories) at ``rev`` or in the workspace."""
    if rev == WORKSPACE:
        out = []
        for p in map(Path, paths):
            out += [p.as_posix()] if p.is_file() else sorted(x.as_posix() for x in p.rglob("*.json"))
        return out
    listed = _git(
        ["ls-tree", "-r", "--name-only", rev, "--", *paths],
        hint="name a revision git knows (HEAD, HEAD~1, a branch, a tag or a commit)",
    )
    return [x for x in listed.splitlines() if x.endswith(".json")]


def read_revision(rev: str, path: str) -> dict | None:
    """The JSON of ``path`` at ``rev`` (``workspace``: the file on disk); None when it is absent."""
    if rev == WORKSPACE:
        p = Path(path)
        text = read_text(p, "compare JSON reports only", "json_bytes") if p.is_file() else None
    else:
        try:
            text = _git(["show", f"{rev}:{path}"], hint="")
        except GeceError:
            text = None
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise GeceError(f"{path} at {rev}: not valid JSON ({e})", hint="compare JSON reports only") from e


def diff(old_rev: str, new_rev: str, paths: list[str], tol: float) -> tuple[list[Change], int, int]:
    """Every change above ``tol`` in the JSON files under ``paths`` from ``old_rev`` to ``new_rev``;
    also the number of values within ``tol`` and the number of files compared."""
    files = list(dict.fromkeys([*files_at(old_rev, paths), *files_at(new_rev, paths)]))
    changes, hidden = [], 0
    for f in files:
        old, new = read_revision(old_rev, f), read_revision(new_rev, f)
        if old is None or new is None:
            changes.append(Change(f, "(file)", None if old is None else "present", None if new is None else "present"))
            continue
        c, h = moved(old, new, tol, f)
        changes += c
        hidden += h
    return changes, hidden, len(files)


# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "JSON values that moved by more than a tolerance between two revisions: a dvc metrics diff that float noise "
    "cannot flood"
)
EXAMPLES = (
    "gece diff                                    # reports/summary.json, HEAD vs the workspace",
    "gece diff --old main --new HEAD --tol 1e-3",
    "gece diff reports/metrics reports/calibration  # the detail files, same rule",
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
        default=1e-6,
        help="absolute change at or below which a number is hidden (default: %(default)g)",
    )
    p.add_argument("--json", action="store_true", help="print the changes as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from rich.table import Table

    from gece.command import out
    from gece.terminal import plain, plural

    changes, hidden, n_files = diff(args.old, args.new, args.paths or list(DEFAULT_PATHS), args.tol)
    if args.json:
        print(
            json.dumps(
                [{"file": c.file, "key": c.key, "old": c.old, "new": c.new, "change": c.delta} for c in changes],
                indent=2,
            )
        )
        return 0
    if changes:
        files = list(dict.fromkeys(c.file for c in changes))
        where = f" in {files[0]}" if len(files) == 1 else ""
        table = Table(
            title=plain(f"{args.old} -> {args.new}{where}: values that moved by more than {args.tol:g}"),
            title_justify="left",
        )
        columns = (["file"] if len(files) > 1 else []) + ["key", "old", "new", "change"]
        for col in columns:
            table.add_column(col, justify="left" if col in ("file", "key") else "right")
        show = lambda v: "–" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)  # noqa: E731
        for c in changes:
            cells = [plain(c.key), plain(show(c.old)), plain(show(c.new)), "" if c.delta is None else f"{c.delta:+.6g}"]
            table.add_row(*([plain(c.file)] if len(files) > 1 else []), *cells)
        out.print(table)
    out.print(
        f"{plural(len(changes), 'value')} moved by more than {args.tol:g} in "
        f"{plural(n_files, 'file')}; {plural(hidden, 'other value')} moved by {args.tol:g} or less "
        "(hidden)",
        highlight=False,
    )
    return 0
