"""``gece repro``: pull what the default DVC remote holds, run only what is still missing, say which.

``make repro`` calls it. Three steps:

1. **Pull.** Every stage (and ``.dvc`` file) whose cached outputs dvc.lock records but the workspace
   lacks is pulled from the default remote with ``dvc pull --run-cache --allow-missing <stages>``
   (without the names when more than ``MAX_TARGETS`` are missing: DVC is slow per name): what the
   remote holds is checked out, what it lacks is left missing (never an error), and the remote's run
   cache comes along. DVC never overwrites a changed output it holds no copy of. A remote that is not
   configured or not reachable is named, and the run goes on without it.
2. **Run.** ``dvc repro`` runs the stages still missing or out of date. Where some stage has no
   dvc.lock entry yet (no lock, a new stage) it is ``dvc repro --pull``, so that such stages are
   restored from the remote's run cache instead of being run; with a complete lock the outputs came
   by their hashes in step 1, and ``--pull`` would only retry, stage by stage, what the remote lacks.
3. **Account.** One line: ``pulled N, ran M``. N counts the stages (``data.dvc`` included) whose
   outputs came from the remote: pulled in step 1, or restored from the run cache or pulled by
   ``dvc repro --pull`` in step 2; M counts the stages ``dvc repro`` ran ("Running stage"). A
   stage pulled and then run anyway counts as run. The rest were already in place.

This module is a command module: :func:`add_arguments` and :func:`run`.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gece.base.errors import GeceError

# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "pull what the default DVC remote holds for dvc.lock, then dvc repro what is missing; print the account (make"
    " repro)"
)
EXAMPLES = ("gece repro", "gece repro --no-pull", "gece repro score@winobias-smollm2-135m")

# DVC 3's log lines (dvc/stage/run.py, dvc/stage/cache.py, dvc/stage/__init__.py)
RAN = re.compile(r"^Running stage '([^']+)'")
RESTORED = re.compile(r"^Stage '([^']+)' is cached - skipping run")
PULLING = re.compile(r"^Pulling data for stage: '([^']+)'")
UNABLE = re.compile(r"^Unable to pull data for stage: '([^']+)'")
MISSING_HEAD = "Some of the cache files do not exist neither locally nor on remote"
MISSING_LINE = re.compile(r"^(md5|etag|checksum): [0-9a-f]+(\.dir)?$")  # a folder output's hash ends in .dir
# dvc pull's totals ("131 files fetched and 130 files added"); its per-output lines ("A  path",
# wrapped at the terminal's width) are left out: the account says it shorter
PULL_TOTALS = re.compile(r"^(\d+ files? \w+|Everything is up to date)")
MAX_TARGETS = 10  # stages pulled by name; more missing than this: one pull of the whole lock
UNCHANGED = re.compile(r"^(Stage )?'[^']+' didn't change, skipping$")  # one per stage: the account counts them


@dataclass(frozen=True)
class Stage:
    """A stage of the pipeline as this step needs it: its name and its cached outputs."""

    name: str  # DVC's address: `extract@smollm2-135m`, `data.dvc`
    outs: tuple[Path, ...]  # cached outputs (`cache: false` ones live in git)
    locked: bool  # every cached output has a hash in dvc.lock (or the .dvc file)

    @property
    def missing(self) -> bool:
        return any(not (p.exists() or p.is_symlink()) for p in self.outs)


@dataclass
class Account:
    """What ``gece repro`` did."""

    stages: int = 0
    pulled: list[str] = field(default_factory=list)  # step 1: outputs checked out from the remote
    restored: list[str] = field(default_factory=list)  # step 2: run cache or dvc repro --pull
    ran: list[str] = field(default_factory=list)
    remote: str | None = None  # "name (url)", None when nothing could be pulled
    lacked: int = 0  # cache files the remote did not hold

    @property
    def n_pulled(self) -> int:
        return len(set(self.pulled + self.restored) - set(self.ran))

    def line(self) -> str:
        return f"pulled {self.n_pulled}, ran {len(self.ran)}"

    def detail(self) -> str:
        kept = self.stages - self.n_pulled - len(self.ran)
        if self.remote:
            parts = [
                f"{self.stages} stages: {len(set(self.pulled) - set(self.ran))} pulled from DVC remote {self.remote}",
                f"{len(set(self.restored) - set(self.ran))} restored from its run cache",
            ]
        else:
            parts = [f"{self.stages} stages: nothing pulled (no usable remote)"]
        parts += [f"{len(self.ran)} ran", f"{max(kept, 0)} already in place"]
        if self.lacked:
            parts.append(f"the remote lacked {self.lacked} cache files")
        return "; ".join(parts)


def stages(root: Path) -> list[Stage]:
    """Every stage of the DVC project at ``root`` (dvc.yaml and .dvc files), as DVC reads them."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:  # in root: DVC names a stage relative to the working directory (`dvc.yaml:a` elsewhere)
        with contextlib.chdir(root), Repo(".") as repo:
            found = []
            for stage in repo.index.stages:
                outs = [o for o in stage.outs if o.use_cache]
                found.append(
                    Stage(stage.addressing, tuple(Path(o.fs_path) for o in outs), all(bool(o.hash_info) for o in outs))
                )
            return found
    except DvcException as e:
        raise GeceError(
            f"DVC cannot read the pipeline in {root.absolute()}: {e}",
            hint="run gece repro from the repository root; `dvc status` shows the same error",
        ) from e


def check_targets(targets: tuple[str, ...], known: list[Stage], root: Path) -> None:
    """Each target names a stage of ``known``, a stage group (``metrics``: every ``metrics@...``), or a
    ``dvc.yaml``/``.dvc`` file with an optional ``:stage``; else a GeceError naming it, before any pull or run."""
    import difflib

    names = [s.name for s in known]
    groups = {n.split("@")[0] for n in names}
    bad = []
    for target in targets:
        path, _, name = target.rpartition(":") if ":" in target else ("", "", target)
        if not path and name.endswith(("dvc.yaml", ".dvc")):
            path, name = name, ""
        if path and not (root / path).is_file():
            bad.append(f"{target}: no such file {path}")
        elif name and name not in names and name not in groups:
            close = difflib.get_close_matches(name, sorted(groups | set(names)), n=3)
            bad.append(f"{target}: no such stage" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    if bad:
        raise GeceError(
            f"gece repro: {len(bad)} of the targets name{'s' if len(bad) == 1 else ''} no stage of the pipeline",
            problems=bad,
            hint="`dvc stage list` lists the stages; a group such as metrics runs every metrics@<benchmark>",
        )


def _dvc(root: Path) -> tuple[list[str], dict[str, str]]:
    """DVC of this Python environment, with this environment's bin/ first on PATH (stages call `gece`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"  # DVC's lines as they come, not in blocks (its stdout is our pipe)
    return [sys.executable, "-m", "dvc"], env


def _echo(line: str, quiet: bool, account: Account | None = None) -> None:
    """Print one of DVC's lines, except the hash list of its missing-cache warning (counted in
    ``account.lacked`` when given)."""
    if MISSING_LINE.match(line.strip()):
        if account is not None:
            account.lacked += 1
        return
    if MISSING_HEAD in line:
        return
    if not quiet or line.startswith(("ERROR", "WARNING")):
        print(line, flush=True)


def pull(root: Path, account: Account, targets: list[str], quiet: bool) -> bool:
    """Step 1: pull ``targets`` and the run cache from the default remote. False when the remote
    cannot be used (said on stderr); never raises for what the remote lacks."""
    from gece.tools import remote

    try:
        rem = remote.default_remote(root)
        remote.check_remote(rem)
    except GeceError as e:
        _warn(f"{e.message}; going on without it (every missing stage runs)")
        return False
    account.remote = f"{rem.name!r} ({rem.url})"
    if not targets:
        return True
    cmd, env = _dvc(root)
    # DVC collects each target on its own (about 3 s each on 2 cores): past a few, one pull of the whole
    # lock is faster, and as safe (DVC refuses to overwrite a changed output it has no copy of)
    res = subprocess.run(
        [*cmd, "pull", "--run-cache", "--allow-missing", *(targets if len(targets) <= MAX_TARGETS else [])],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in [x for x in res.stdout.splitlines() if PULL_TOTALS.match(x)] + res.stderr.splitlines():
        _echo(line, quiet, account)
    if res.returncode != 0:
        account.remote = None
        _warn(
            f"dvc pull from DVC remote {rem.name!r} ({rem.url}) failed (exit {res.returncode}); going on "
            "without it (every missing stage runs)"
        )
        return False
    return True


def reproduce(root: Path, account: Account, targets: list[str], pull: bool, quiet: bool) -> int:
    """Step 2: ``dvc repro`` (``--pull`` when asked), its lines echoed and counted. DVC's exit status."""
    cmd, env = _dvc(root)
    args = [*cmd, "repro", *(["--pull"] if pull else []), *targets]
    proc = subprocess.Popen(
        args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    pulling: set[str] = set()
    for raw in proc.stdout:
        line = raw.rstrip("\n")
        if m := RAN.match(line):
            account.ran.append(m.group(1))
        elif m := RESTORED.match(line):
            account.restored.append(m.group(1))
        elif m := PULLING.match(line):
            pulling.add(m.group(1))
        elif m := UNABLE.match(line):
            pulling.discard(m.group(1))
        if not UNCHANGED.match(line):
            _echo(line, quiet)
    account.restored += sorted(pulling)
    return proc.wait()


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def repro(
    root: Path = Path("."), targets: tuple[str, ...] = (), *, use_remote: bool = True, quiet: bool = False
) -> Account:
    """Pull, run, account (see the module docstring). Raises a GeceError when ``dvc repro`` fails,
    after printing the account so far."""
    account = Account()
    before = stages(root)
    check_targets(targets, before, root)
    account.stages = len(before)
    missing = [s.name for s in before if s.locked and s.missing]
    remote_ok = False
    if use_remote:
        remote_ok = pull(root, account, missing, quiet)
        if missing:  # what arrived, even from a pull that failed part-way
            now = {s.name: s for s in stages(root)}
            account.pulled = [name for name in missing if name in now and not now[name].missing]
    unlocked = any(not s.locked for s in before)
    status = reproduce(root, account, list(targets), remote_ok and unlocked, quiet)
    print(f"gece repro: {account.line()}", flush=True)
    if not quiet:
        print(f"  ({account.detail()})", flush=True)
    if status != 0:
        raise GeceError(
            f"dvc repro failed (exit {status})",
            problems=[f"the last stage started: {account.ran[-1]}"] if account.ran else [],
            hint="DVC's lines above say why; fix it and run gece repro (or make repro) again: what finished is kept",
        )
    return account


def add_arguments(parser) -> None:
    parser.add_argument("targets", nargs="*", help="stages to reproduce, as dvc repro takes them (default: all)")
    parser.add_argument(
        "--no-pull", action="store_true", help="use no remote: dvc repro only (the account then counts only what ran)"
    )


def writes(args) -> dict:
    """The DVC project: ``dvc repro`` runs its stages, which write what dvc.yaml names, and records dvc.lock."""
    from gece.cmd.command import Output

    return {"the DVC project (every stage's outputs, dvc.lock)": Output(Path("."), "folder", updated=True)}


def run(args) -> int:
    repro(Path("."), tuple(args.targets), use_remote=not args.no_pull, quiet=getattr(args, "quiet", False))
    return 0
