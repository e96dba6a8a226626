"""Files stallbench opens for writing or reads whole, bounded (issue 34 item 14): a data file or
its marker that another user made a symlink in a shared --dir, and a plan file that never ends.

Oracles: the symlink's target's own bytes, the memory limit the test sets on the process."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import stallbench

pytestmark = pytest.mark.machine

SOURCE = str(Path(stallbench.__file__).resolve().parents[1])


def sb(*args: str, tmp_path: Path, memory: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=60, preexec_fn=limit,
                          env={**os.environ, "PYTHONPATH": SOURCE,
                               "STALLBENCH_STATE_DIR": str(tmp_path / "state")})


@pytest.mark.parametrize("name", ["randread.data", ".randread.data.stallbench.json"])
def test_a_symlink_where_a_data_file_or_marker_goes_is_never_written_through(tmp_path, name):
    shared = tmp_path / "shared"                     # a --dir other users can write to
    shared.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    (shared / name).symlink_to(victim)
    run = sb("run", "randread", "--dir", str(shared), "--file-size", "1M", "--duration", "0.2",
             "--monitors", "none", "--no-drop-caches", "--results", str(tmp_path / "results"),
             tmp_path=tmp_path)
    assert victim.read_text() == "someone else's file\n", run.stderr
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("stallbench: ") and "symlink" in run.stderr, run.stderr


def test_a_plan_file_that_never_ends_is_refused_within_its_size(tmp_path):
    run = sb("run", "--plan", "/dev/zero", tmp_path=tmp_path, memory=1 << 30)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr[-2000:]
    assert "plan file larger than 1024 KiB" in run.stderr
