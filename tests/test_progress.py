"""Progress reporting: plain periodic log lines when not on a terminal, a rich bar on one."""

from __future__ import annotations

import logging

from gece.base.progress import Progress


def test_plain_lines_when_not_a_terminal(caplog):
    caplog.set_level(logging.INFO, logger="gece")
    with Progress("extract wb/m", total=10, every=0.0, terminal=False) as p:
        for _ in range(5):
            p.advance(2)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("extract wb/m: 2/10 pairs (20%),") and "pairs/s, ETA" in lines[0]
    assert lines[-1].startswith("extract wb/m: 10/10 pairs (100%)")
    assert len(lines) == 5  # one per step (every=0) but the last, then the final line


def test_rich_bar_on_a_terminal(capsys):
    with Progress("extract wb/m", total=4, terminal=True) as p:
        p.advance(4)
    assert p.done == 4 and p.rate() > 0
    assert "extract wb/m" in capsys.readouterr().err
