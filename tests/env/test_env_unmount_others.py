"""Unmounting kills only the run's own processes; anyone else's using the filesystem is named
and left running, and the filesystem is left for `stallbench cleanup` (issue 15 item 10)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from env_support import TinyWorkload, loop_listing, mount_line

from conftest import alive, run_stallbench, stallbench_cmd
from stallbench.core.journal import Journal
from stallbench.env import environment
from stallbench.settings.variant import VariantSettings

pytestmark = [pytest.mark.machine, pytest.mark.root]


def _foreign_process_in(directory) -> int:
    """A process with its cwd in `directory` that stallbench did not start: not one of this
    process's descendants (its parent shell exits, so init adopts it), like an engineer's shell."""
    out = subprocess.run(["sh", "-c", f"cd '{directory}' && (setsid sleep 120 >/dev/null 2>&1 "
                          "</dev/null & echo $!)"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_someone_elses_process_is_left_running_and_named(results):
    run = subprocess.Popen(stallbench_cmd("run", "randread", "--variant", "busy", "--results",
                                          str(results), "--fs", "ext2", "--file-size", "4M",
                                          "--duration", "4s", "--monitors", "none",
                                          "--no-progress", "--no-drop-caches"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        deadline = time.monotonic() + 30
        while not list(results.glob(".work/stallbench-*.mnt/randread.data")):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        mount_point = next(results.glob(".work/stallbench-*.mnt"))
        pid = _foreign_process_in(mount_point)
        stdout, stderr = run.communicate(timeout=60)
        assert alive(pid), "a process stallbench did not start was killed"
        assert mount_line(mount_point) is not None, stderr                 # left mounted
        assert f"pid {pid} (sleep)" in stderr and "stallbench cleanup" in stderr, stderr
        meta = json.loads(next(results.glob("busy/randread/*/run.json")).read_text())
        assert any(f"pid {pid} (sleep)" in note for note in meta["notes"])
        assert meta["status"] == "complete"                 # the recorded run is kept
    finally:
        if run.poll() is None:
            run.kill()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                if not alive(pid):
                    break
                time.sleep(0.05)
    out = run_stallbench("cleanup", check=True)
    assert mount_line(mount_point) is None, out.stdout
    assert str(results) not in loop_listing(), out.stdout


def test_the_runs_own_processes_are_stopped_and_the_filesystem_unmounted(tmp_path):
    results = tmp_path / "results"
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as journal:
        with environment(VariantSettings(name="own", fs="ext2"), journal, TinyWorkload(),
                         results) as state:
            mount_point = state.workdir
            child = subprocess.Popen(["sleep", "120"], cwd=mount_point)
        assert journal.errors == []
    assert child.wait(timeout=10) == -signal.SIGKILL
    assert mount_line(mount_point) is None
