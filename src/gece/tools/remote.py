"""``gece pull``: the data snapshot from the DVC remote, after checking that the remote is there.

``dvc pull`` against a missing local remote prints "Everything is up to date." and fails, which
says nothing about the cause. :func:`pull` first reads the default remote from DVC's config
(resolved as DVC resolves it: a relative path is relative to ``.dvc/``) and, for a local path,
checks that the directory exists; a failing pull is reported with the remote's name and URL, and
an output that did not exist before the pull is removed again, so nothing half-pulled is left.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gece.base.errors import GeceError
from gece.io.paths import data_layout
from gece.io.settings.params import params_or_defaults

DEFAULT_TARGETS = ("data.dvc",)
REMOTE_HINT = (
    "the data snapshot is in ../shared/dvc-store beside the repository: check that ../shared exists, "
    "or point the remote at your copy (dvc remote modify --local {name} url <path>), "
    "or add a default remote (dvc remote add -d <name> <url>)"
)


@dataclass(frozen=True)
class Remote:
    """A DVC remote: its name and its URL (a local remote's path is absolute, as DVC resolves it)."""

    name: str
    url: str

    @property
    def local(self) -> bool:
        """Whether the remote is a directory on this machine: a path, or a ``file://`` URL."""
        return "://" not in self.url or self.url.startswith("file://")

    @property
    def path(self) -> Path:
        """A local remote's directory (``file:///x/y`` is ``/x/y``)."""
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(self.url).path)) if self.url.startswith("file://") else Path(self.url)


def default_remote(root: Path) -> Remote:
    """The default remote of the DVC repository at ``root`` (repo, local, global and system config)."""
    from dvc.config import Config, ConfigError

    dvc_dir = root / ".dvc"
    if not dvc_dir.is_dir():
        raise GeceError(
            f"{root.absolute()}: not a DVC repository (no .dvc/)", hint="run gece pull from the repository root"
        )
    try:
        config = Config(dvc_dir=str(dvc_dir))
    except ConfigError as e:
        raise GeceError(f"{dvc_dir / 'config'}: invalid DVC config ({e})", hint="fix it with dvc remote modify") from e
    name = config["core"].get("remote")
    if not name:
        raise GeceError("no default DVC remote is configured", hint=REMOTE_HINT.format(name="origin"))
    if name not in config["remote"]:
        raise GeceError(
            f"the default DVC remote {name!r} is not defined in {dvc_dir / 'config'}",
            hint=REMOTE_HINT.format(name=name),
        )
    return Remote(name, str(config["remote"][name]["url"]))


def check_remote(remote: Remote) -> None:
    """A local remote must be an existing directory; other remotes are checked by the pull itself."""
    if remote.local and not remote.path.is_dir():
        raise GeceError(
            f"DVC remote {remote.name!r} ({remote.url}) is not reachable: the directory does not exist"
            + ("" if str(remote.path) == remote.url else f": {remote.path}"),
            hint=REMOTE_HINT.format(name=remote.name),
        )


def outputs(root: Path, targets: tuple[str, ...]) -> list[Path]:
    """The paths a pull of ``targets`` (``.dvc`` files) writes."""
    paths = []
    for target in targets:
        dvc_file = root / target
        if not dvc_file.is_file():
            raise GeceError(f"{dvc_file}: no such .dvc file", hint="run gece pull from the repository root")
        from gece.io.settings.params_file import load_yaml  # strict: UTF-8, size-bounded, no key twice

        raw = load_yaml(dvc_file, hint=f"restore it: git checkout -- {target}")
        try:
            outs = (raw or {}).get("outs", [])
            paths += [dvc_file.parent / out["path"] for out in outs]
        except (AttributeError, TypeError, KeyError) as e:
            raise GeceError(
                f"{dvc_file}: not a valid .dvc file ({e})", hint=f"restore it: git checkout -- {target}"
            ) from e
    return paths


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def pull(targets: tuple[str, ...] = DEFAULT_TARGETS, *, quiet: bool = False, root: Path = Path(".")) -> Remote:
    """``dvc pull`` of ``targets`` from the default remote (DVC of this Python environment).

    Raises a GeceError naming the remote when it is missing or the pull fails (with DVC's own
    lines); outputs the pull created are then removed. ``quiet`` hides DVC's output on success.
    Returns the remote pulled from.
    """
    remote = default_remote(root)
    check_remote(remote)
    new = [p for p in outputs(root, targets) if not (p.exists() or p.is_symlink())]
    # never --quiet: DVC then hides why a pull failed; its output is shown unless ``quiet``
    res = subprocess.run(
        [sys.executable, "-m", "dvc", "pull", *targets], cwd=root, capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        created = [p for p in new if p.exists() or p.is_symlink()]
        for path in created:
            _remove(path)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        raise GeceError(
            f"dvc pull {' '.join(targets)} from DVC remote {remote.name!r} ({remote.url}) failed (exit "
            f"{res.returncode})",
            problems=lines[-10:] + [f"removed the partly pulled {p}" for p in created],
            hint="the remote may not hold this snapshot (check data.dvc against git) or be unreachable; "
            + REMOTE_HINT.format(name=remote.name),
        )
    if not quiet:
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
    return remote


# the line `gece --help` shows for this command (read without importing this module)
HELP = "the data snapshot from the DVC remote (dvc pull data.dvc), remote checked first"
EXAMPLES = ("gece pull", "gece pull data.dvc")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "targets", nargs="*", default=list(DEFAULT_TARGETS), help=".dvc files to pull (default: %(default)s)"
    )
    p.set_defaults(inputs=("targets",))


def writes(args: argparse.Namespace) -> dict:
    """What the pull writes: the outputs the targets' .dvc files name (DVC's cache is its own)."""
    from gece.cmd.command import Output

    found = outputs(Path("."), tuple(args.targets))
    return {f"{p} (a .dvc output)": Output(p, "file" if p.is_file() else "folder", updated=True) for p in found}


def run(args: argparse.Namespace) -> int:
    from gece.base.terminal import literal
    from gece.cmd import command

    pulled = pull(tuple(args.targets), quiet=args.quiet)
    params = params_or_defaults(args)
    if params:
        data_layout.check_data(params, args.params)
    if not args.quiet:
        command.out.print(
            f"[green]pulled[/] {literal(' '.join(args.targets))} from DVC remote {literal(pulled.name)} "
            f"({literal(pulled.url)})",
            highlight=False,
        )
    return 0
