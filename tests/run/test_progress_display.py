"""The live table's title stays on one line; a short run off a terminal still prints a
progress line (issue 15 item 17)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from conftest import run_stallbench
from stallbench.run.progress import Progress

pytestmark = pytest.mark.pure


def test_the_live_title_does_not_wrap():
    progress = Progress("ext4-with-a-long-variant-name pgioperf 1/3", 30, ["read", "commit"])
    progress.update({"read": (10, 5000), "commit": (2, 9_000_000)})
    out = io.StringIO()
    Console(file=out, width=100, force_terminal=False, color_system=None).print(
        progress._render())
    lines = out.getvalue().splitlines()
    title = [line for line in lines if "elapsed" in line]
    assert len(title) == 1 and title[0].startswith("ext4-with-a-long-variant-name pgioperf 1/3")
    assert "s left" in title[0]
    assert any(line.lstrip("│┃ ").startswith("read") for line in lines)


def test_a_short_run_off_a_terminal_prints_a_progress_line(results, workdir):
    out = run_stallbench("run", "randread", "--variant", "a", "--results", str(results),
                         "--dir", str(workdir), "--file-size", "4M", "--duration", "1s",
                         "--monitors", "none", "--no-drop-caches", check=True)
    lines = [line for line in out.stderr.splitlines() if line.startswith("[a randread 1/1]")]
    assert len(lines) == 1, out.stderr
    assert "elapsed" in lines[0] and "read " in lines[0] and "/s max" in lines[0]
