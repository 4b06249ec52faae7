"""Crash points for the kill tests: ``GECE_KILL_AT=<point>`` makes the process SIGKILL itself there.

The crash tests (tests/e2e/test_crash.py) must kill ``gece extract`` at exact places (before
the first shard, after shard N, between writing the output's temporary file and renaming it),
which a timer cannot hit reliably. Each place calls :func:`checkpoint` with its name; unless
the environment variable names that point, the call does nothing. Points:

- ``extract:loaded``: the model is loaded, no shard is written yet;
- ``extract:shard:<i>``: shard i (0-based) has been written;
- ``rename:<file name>``: an atomic write of that file has its bytes on disk, not yet renamed.
"""

from __future__ import annotations

import os
import signal

KILL_ENV = "GECE_KILL_AT"


def checkpoint(point: str) -> None:
    """SIGKILL this process (no cleanup, no finally blocks) when ``$GECE_KILL_AT == point``."""
    if os.environ.get(KILL_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
