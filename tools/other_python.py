"""`make other-python PYVER=3.12`: gece on another Python, end to end, against this commit's build.

The commit checked is this checkout's HEAD; its build is what this checkout's DVC cache holds for its dvc.lock
(`make repro` on 3.11 leaves it there). The steps, each timed, in a work folder (a new temporary one, or --work):

a. the environment: --venv (default .venv-<version> in this checkout) made or reused by `make install VENV=...
   PYTHON=<version>`, which installs the versions of constraints.txt, then `make lock-check`: every installed
   package at the version constraints.txt pins. A fresh clone of HEAD (clone A) pushes the build from this
   checkout's cache to a local DVC remote in the work folder (it fails naming what the cache lacks).
b. `gece stage-code --check` in clone A: the committed manifests, written on this Python.
c. `gece extract` of one model (smollm2-135m) on one target-rule benchmark (winogender) and one sentence-rule
   benchmark (crows_pairs), from the build's prepared pairs; each token file and its meta compared with `cmp` to
   the build's. A difference is described: the footer's metadata keys and the columns that differ.
d. every stage but extract re-run on this Python over the build's token files: the prepare stages first (their
   outputs must be the build's, else extract would re-score), then `dvc repro` of the rest. dvc.lock must come
   out unchanged (every output the same bytes; the outputs that moved are listed), and so must every file git
   holds: reports/summary.json, reports/tables/, reports/index.html, stage-code/.
e. `make repro VENV=... PYTHON=<version>` in a second fresh clone whose default remote is the local one (as a
   new user runs it: make install points the environment's gece at that clone): its account must say "ran 0",
   and no file git holds may change. The environment is then pointed back at this checkout.

Each step's output goes to <work>/<step>.log. The work folder is removed when every check passed (--keep keeps
it). Exit status 0 when every check passed, 1 when one failed, 2 when a step could not run.
--steps runs some of b to e only. It needs the other Python (python3.X on PATH or under pyenv's versions, as `make`
looks for it: `make python`), and no network once the environment is made; most of its time goes to c (crows_pairs'
1,505 pairs) and d (126 stages): docs/development.md, "Another Python", says how long they took.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.11", "3.12", "3.13", "3.14")
REMOTE = "this-build"  # the local remote's name, in each clone's .dvc/config.local (git ignores it)
MODEL = "smollm2-135m"
BENCHMARKS = ("winogender", "crows_pairs")  # one target-rule benchmark, one sentence-rule benchmark
SCORING = ("extract", "lmeval")  # the stage groups that run a model: their outputs come from the build
ACCOUNT = re.compile(r"gece repro: pulled (\d+), ran (\d+)")

# run by the environment's Python (it has PyYAML): every stage of a dvc.lock -> its outputs' paths and hashes
LOCK_OUTS = """
import json, sys, yaml
lock = yaml.safe_load(open(sys.argv[1]))
print(json.dumps({name: {o["path"]: o.get("md5") for o in stage.get("outs", [])}
                  for name, stage in lock["stages"].items()}))
"""
# run by the environment's Python (it has pyarrow): what differs between two Parquet files
PARQUET_DIFF = """
import sys, pyarrow.parquet as pq
a, b = (pq.ParquetFile(p) for p in sys.argv[1:3])
ma, mb = a.schema_arrow.metadata or {}, b.schema_arrow.metadata or {}
for k in sorted(set(ma) | set(mb)):
    if ma.get(k) != mb.get(k):
        x, y = (m.get(k, b"(none)").decode()[:200] for m in (ma, mb))
        print(f"  footer key {k.decode()}: {x} | {y}")
if a.metadata.created_by != b.metadata.created_by:
    print(f"  written by {a.metadata.created_by} | {b.metadata.created_by}")
ta, tb = a.read(), b.read()
if ta.schema != tb.schema:
    print(f"  schemas differ: {ta.schema} | {tb.schema}")
elif ta.num_rows != tb.num_rows:
    print(f"  rows: {ta.num_rows} | {tb.num_rows}")
else:
    for name in ta.column_names:
        x, y = ta[name].to_pylist(), tb[name].to_pylist()
        n = sum(u != v for u, v in zip(x, y))
        if n:
            i = next(i for i, (u, v) in enumerate(zip(x, y)) if u != v)
            print(f"  column {name}: {n} of {len(x)} rows differ, first at row {i}: {x[i]!r} | {y[i]!r}")
"""


class StepFailed(Exception):
    """A check that ran and found a difference (exit 1)."""


class CannotRun(Exception):
    """A step that could not run (exit 2): a missing interpreter, a build missing from the cache, a command failing."""


class Runner:
    """Commands of one check: each one's output appended to a log file of the work folder."""

    def __init__(self, work: Path, venv: Path):
        self.work, self.venv = work, venv
        self.log: Path = work / "setup.log"

    def env(self, src: Path | None) -> dict[str, str]:
        """The environment's bin/ first on PATH (DVC's stages call `gece`), and gece imported from ``src``
        (a clone's) when given, else from wherever the environment's install points."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = os.pathsep.join([str(self.venv / "bin"), env.get("PATH", "")])
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        if src is not None:
            env["PYTHONPATH"] = str(src)
        return env

    def attempt(self, cmd: list[str], cwd: Path, src: Path | None = None) -> tuple[int, str]:
        """``cmd`` in ``cwd``: its exit status and its output (stdout and stderr), which is logged."""
        with self.log.open("a") as log:
            log.write(f"\n$ (cd {cwd} && {' '.join(cmd)})\n")
        res = subprocess.run(cmd, cwd=cwd, env=self.env(src), capture_output=True, text=True, check=False)
        with self.log.open("a") as log:
            log.write(res.stdout + res.stderr)
        return res.returncode, res.stdout + res.stderr

    def run(self, cmd: list[str], cwd: Path, src: Path | None = None) -> str:
        """:meth:`attempt`, its output returned; a failure raises CannotRun with the command and its last lines."""
        code, out = self.attempt(cmd, cwd, src)
        if code != 0:
            tail = "\n".join(out.strip().splitlines()[-25:])
            raise CannotRun(f"`{' '.join(cmd)}` failed in {cwd} (exit {code}):\n{tail}\n(all of it: {self.log})")
        return out

    def dvc(self, *args: str, cwd: Path, src: Path | None = None) -> str:
        return self.run([str(self.venv / "bin" / "dvc"), *args], cwd, src)

    def python(self, script: str, *args: str, cwd: Path) -> str:
        return self.run([str(self.venv / "bin" / "python"), "-c", script, *args], cwd)

    def lock_outs(self, lock: Path) -> dict[str, dict[str, str]]:
        return json.loads(self.python(LOCK_OUTS, str(lock), cwd=lock.parent))


def clone(run: Runner, commit: str, dest: Path, remote: Path) -> None:
    """A fresh clone of ``commit`` at ``dest`` whose default DVC remote is ``remote`` (in its local config)."""
    run.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(dest)], ROOT)
    run.run(["git", "checkout", "--quiet", "--detach", commit], dest)
    run.dvc("remote", "add", "--local", "--default", REMOTE, str(remote), cwd=dest)


def changed_files(run: Runner, repo: Path) -> list[str]:
    """The files git holds that differ from the commit, and any new file git does not ignore."""
    return run.run(["git", "status", "--porcelain"], repo).splitlines()


def moved_outputs(run: Runner, repo: Path, commit_lock: Path) -> list[str]:
    """The outputs whose hash in ``repo``'s dvc.lock is not the committed one's."""
    before, after = run.lock_outs(commit_lock), run.lock_outs(repo / "dvc.lock")
    return [
        f"{stage}: {path} ({md5} -> {after.get(stage, {}).get(path)})"
        for stage, outs in before.items()
        for path, md5 in outs.items()
        if after.get(stage, {}).get(path) != md5
    ]


def step_env(run: Runner, version: str) -> str:
    """(a) The environment: made or reused by make install, checked by make lock-check; its Python's version."""
    make = ["make", "--no-print-directory", f"VENV={run.venv}", f"PYTHON={version}"]
    run.run([*make, "install"], ROOT)
    have = run.run([str(run.venv / "bin" / "python"), "-c", "import platform; print(platform.python_version())"], ROOT)
    if not have.strip().startswith(version + "."):
        raise CannotRun(f"{run.venv} holds Python {have.strip()}, not {version}: remove it, or name another (--venv)")
    run.run([*make, "lock-check"], ROOT)
    return have.strip()


def fill_remote(run: Runner, a: Path) -> None:
    """The build of this commit, from this checkout's DVC cache, pushed to the local remote from clone A, whose
    cache is then its own (empty) one."""
    cache = run.dvc("cache", "dir", cwd=ROOT).strip().splitlines()[-1]
    run.dvc("config", "--local", "cache.dir", cache, cwd=a)
    try:
        code, out = run.attempt([str(run.venv / "bin" / "dvc"), "push", "--remote", REMOTE], a)
    finally:
        run.dvc("config", "--local", "--unset", "cache.dir", cwd=a)
    if code != 0 or "missing" in out.lower():
        raise CannotRun(
            f"dvc push from this checkout's DVC cache ({cache}) failed or lacked files of dvc.lock ({run.log}): "
            "run make repro here first (on Python 3.11, the reference), then this again"
        )


def step_manifests(run: Runner, a: Path) -> list[str]:
    """(b) The committed manifests are what this Python writes."""
    code, out = run.attempt(["gece", "stage-code", "--check"], a, src=a / "src")
    if code != 0:
        raise StepFailed(f"gece stage-code --check (exit {code}): {out.strip()}")
    return [line for line in out.strip().splitlines()[-1:]]


def step_extract(run: Runner, a: Path) -> list[str]:
    """(c) The token files of MODEL on BENCHMARKS scored on this Python from the build's prepared pairs, against
    the build's."""
    out_dir = run.work / "extract"
    out_dir.mkdir()
    lines, differ = [], []
    for b in BENCHMARKS:
        ours, theirs = out_dir / f"{b}.parquet", a / "artifacts" / "tokens" / MODEL / f"{b}.parquet"
        run.run(["gece", "extract", f"artifacts/prepared/{b}.parquet", str(ours), "--model", MODEL], a, src=a / "src")
        for suffix in (".parquet", ".meta.json"):
            x, y = ours.with_name(b + suffix), theirs.with_name(b + suffix)
            same = run.attempt(["cmp", str(x), str(y)], a)[0] == 0
            lines.append(f"{MODEL}/{b}{suffix}: {'identical' if same else 'DIFFERS'} ({x.stat().st_size} bytes)")
            if not same:
                differ.append(lines[-1])
                if suffix == ".parquet":
                    lines.append(run.python(PARQUET_DIFF, str(x), str(y), cwd=a).rstrip())
                else:
                    lines.append(run.attempt(["diff", str(x), str(y)], a)[1].rstrip())
    if differ:
        raise StepFailed("\n".join(lines))
    return lines


def step_downstream(run: Runner, a: Path, lock: dict[str, dict[str, str]], commit_lock: Path) -> list[str]:
    """(d) Every stage but the scoring ones and the code stage (step b) run again on this Python, over the build's
    token files: their outputs are removed (those git holds too), then rebuilt by dvc repro, the prepare stages
    first (if their outputs moved, extract would re-score), with --force and --single-item (not the code stage
    above them): the clone's cache holds their outputs
    (pulled for step c), and DVC checks an unchanged stage's outputs out of the cache instead of running it;
    --no-run-cache for the rest, else DVC restores a stage from its run cache."""
    rebuilt = [s for s in lock if s.split("@")[0] not in (*SCORING, "code")]
    for s in rebuilt:
        for path in lock[s]:
            shutil.rmtree(a / path) if (a / path).is_dir() else (a / path).unlink(missing_ok=True)
    out = run.dvc("repro", "--force", "--single-item", "--no-run-cache", "--glob", "prepare@*", cwd=a, src=a / "src")
    moved = moved_outputs(run, a, commit_lock)
    if moved:
        raise StepFailed("the prepare stages wrote other bytes than the build's:\n  " + "\n  ".join(moved))
    out += run.dvc("repro", "--no-run-cache", cwd=a, src=a / "src")
    ran = re.findall(r"^Running stage '([^']+)'", out, flags=re.M)
    problems = [f"not run: {s}" for s in rebuilt if s not in ran]
    problems += [f"ran, though it should not: {s}" for s in ran if s not in rebuilt]
    problems += [f"output moved: {m}" for m in moved_outputs(run, a, commit_lock)]
    problems += [f"file changed: {line}" for line in changed_files(run, a) if not line.endswith(" dvc.lock")]
    if problems:
        raise StepFailed(f"dvc repro ran {len(ran)} stages:\n  " + "\n  ".join(problems))
    return [f"dvc repro ran the {len(ran)} stages; dvc.lock and every file git holds unchanged"]


def step_make_repro(run: Runner, b: Path, remote: Path, commit: str, version: str) -> list[str]:
    """(e) make repro in a fresh clone against the local remote: ran 0, nothing git holds changed."""
    clone(run, commit, b, remote)
    out = run.run(["make", "--no-print-directory", f"VENV={run.venv}", f"PYTHON={version}", "repro"], b)
    account = ACCOUNT.findall(out)
    changed = changed_files(run, b)
    if not account or account[-1][1] != "0" or changed:
        said = f"pulled {account[-1][0]}, ran {account[-1][1]}" if account else "no account line"
        raise StepFailed(f"make repro: {said}; files changed: {changed or 'none'}")
    return [f"make repro: pulled {account[-1][0]}, ran 0; no file git holds changed"]


def size(path: Path) -> str:
    total = sum(p.lstat().st_size for p in path.rglob("*"))
    return f"{total / 1e9:.1f} GB" if total > 1e9 else f"{total / 1e6:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/other_python.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("version", choices=VERSIONS, help="the other Python's version")
    parser.add_argument("--venv", type=Path, help="its environment (default: .venv-<version> in this checkout)")
    parser.add_argument("--work", type=Path, help="the work folder, new or empty (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder when every check passed")
    parser.add_argument(
        "--steps", default="bcde", help="which of the checks b, c, d and e to run, in this order (default: bcde)"
    )
    args = parser.parse_args(argv)
    if not args.steps or set(args.steps) - set("bcde"):
        parser.error(f"--steps {args.steps}: letters of bcde")
    venv = (args.venv or ROOT / f".venv-{args.version}").absolute()
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        if any(args.work.iterdir()):
            print(f"other-python: --work {args.work} is not empty", file=sys.stderr)
            return 2
    work = (args.work or Path(tempfile.mkdtemp(prefix=f"gece-py{args.version}-"))).absolute()
    run = Runner(work, venv)
    commit = run.run(["git", "rev-parse", "HEAD"], ROOT).strip()
    if changed_files(run, ROOT):
        print(f"other-python: this checkout has changes beside HEAD {commit[:7]}; only HEAD is checked")
    a, b, remote = work / "clone-a", work / "clone-b", work / "remote"
    results: list[tuple[str, str, float, list[str]]] = []
    status = 0

    def step(name: str, label: str, fn, *fn_args) -> bool:
        nonlocal status
        run.log = work / f"{name}.log"
        start = time.monotonic()
        print(f"other-python: ({name}) {label} ...", flush=True)
        try:
            lines = fn(*fn_args) or []
            verdict = "passed"
        except StepFailed as e:
            lines, verdict, status = str(e).splitlines(), "FAILED", max(status, 1)
        except CannotRun as e:
            lines, verdict, status = str(e).splitlines(), "COULD NOT RUN", 2
        seconds = time.monotonic() - start
        results.append((f"({name}) {label}", verdict, seconds, lines if isinstance(lines, list) else [lines]))
        print(f"other-python: ({name}) {verdict} in {seconds:.0f} s", flush=True)
        return verdict == "passed"

    total = time.monotonic()

    def setup() -> list[str]:
        have = step_env(run, args.version)
        remote.mkdir()
        clone(run, commit, a, remote)
        fill_remote(run, a)
        made = [f"{venv}: Python {have}, {size(venv)}; the build of {commit[:7]} pushed to {remote} ({size(remote)})"]
        if set(args.steps) & set("cd"):  # the data snapshot, the token files and the prepared pairs they came from
            pulled = [s for s in run.lock_outs(a / "dvc.lock") if s.split("@")[0] in (*SCORING, "prepare")]
            run.dvc("pull", "data.dvc", *pulled, cwd=a)
            said = run.dvc("status", *pulled, cwd=a, src=a / "src")
            if "up to date" not in said:  # else step d would re-score: dvc.lock is not the build of this commit
                raise CannotRun(f"dvc.lock of {commit[:7]} is not its build (dvc status):\n{said.strip()}")
        return made

    if step("a", f"environment for Python {args.version} and the build of {commit[:7]}", setup):
        lock = run.lock_outs(a / "dvc.lock")
        commit_lock = work / "dvc.lock.committed"
        shutil.copyfile(a / "dvc.lock", commit_lock)
        checks = {
            "b": ("gece stage-code --check", step_manifests, (run, a)),
            "c": (f"extract {MODEL} on {', '.join(BENCHMARKS)}", step_extract, (run, a)),
            "d": (
                "every stage but extract, over the build's token files",
                step_downstream,
                (run, a, lock, commit_lock),
            ),
            "e": (
                "make repro in a fresh clone against the build's remote",
                step_make_repro,
                (run, b, remote, commit, args.version),
            ),
        }
        for name in args.steps:
            label, fn, fn_args = checks[name]
            step(name, label, fn, *fn_args)
        if "e" in args.steps:  # make install in clone B pointed the environment's gece at it: back to this checkout
            run.attempt(["make", "--no-print-directory", "-W", "pyproject.toml", f"VENV={venv}", "install"], ROOT)
    print(f"\nother-python: Python {args.version}, commit {commit[:7]}, {time.monotonic() - total:.0f} s in all")
    for label, verdict, seconds, lines in results:
        print(f"  {label}: {verdict} ({seconds:.0f} s)")
        for line in lines:
            print(f"      {line}")
    if status == 0 and not args.keep:
        shutil.rmtree(work)
    else:
        print(f"  the work folder and each step's log: {work}")
    return status


if __name__ == "__main__":
    sys.exit(main())
