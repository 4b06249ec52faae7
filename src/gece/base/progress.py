"""Progress of long loops: a rich bar (pairs/s, ETA) on a terminal, plain log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType

log = logging.getLogger("gece")


class Progress:
    """Count items done out of ``total``. Use as a context manager; call :meth:`advance`.

    On a terminal (stderr is a TTY) it draws a rich progress bar with items/s and the ETA;
    otherwise (DVC logs, CI) it logs one line every ``every`` seconds and one at the end.
    """

    def __init__(
        self, description: str, total: int, unit: str = "pairs", every: float = 10.0, terminal: bool | None = None
    ):
        self.description, self.total, self.unit, self.every = description, total, unit, every
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.done = 0
        self._bar = None
        self._task = None
        self._t0 = self._last = 0.0

    def __enter__(self) -> Progress:
        self._t0 = self._last = time.perf_counter()
        if self.terminal:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            unit = self.unit
            self._bar = RichProgress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True, emoji=False),
                transient=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total, rate=f"- {unit}/s")
        return self

    def rate(self) -> float | None:
        dt = time.perf_counter() - self._t0
        return self.done / dt if dt > 0 and self.done else None

    def advance(self, n: int) -> None:
        self.done += n
        r = self.rate()
        if self._bar is not None:
            self._bar.update(self._task, advance=n, rate=f"{r:.1f} {self.unit}/s" if r else "")
            return
        now = time.perf_counter()
        if now - self._last >= self.every and self.done < self.total:
            self._last = now
            self._log()

    def _log(self) -> None:
        r = self.rate()
        eta = (self.total - self.done) / r if r else float("nan")
        pct = 100.0 * self.done / self.total if self.total else 100.0
        log.info(
            "%s: %d/%d %s (%.0f%%), %.1f %s/s, ETA %.0f s",
            self.description,
            self.done,
            self.total,
            self.unit,
            pct,
            r or 0.0,
            self.unit,
            eta,
        )

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(et, ev, tb)
        elif et is None:
            self._log()
