"""The live display flags an op that stops completing while others go on."""

from __future__ import annotations

import time

import pytest

from stallbench.run.progress import Progress

pytestmark = pytest.mark.pure


def test_an_op_that_stops_completing_is_flagged_while_others_go_on():
    progress = Progress("t", 10, ["read", "commit", "fsync"], enabled=False)
    with progress:
        reads = commits = 0
        for step in range(6):
            time.sleep(0.3)
            reads += 1000
            if step < 2:
                commits += 5          # commits stop after 0.6 s; fsync never completes
            progress.update({"read": (reads, 5000), "commit": (commits, 9_000_000),
                             "fsync": (0, 0)})
        assert progress.starving() == ["commit"]
        assert 2500 < progress.ops["read"].rate < 4500
        assert progress.ops["commit"].rate == 0
        assert "commit" in progress._plain_line() and "STARVED" in progress._plain_line()
