"""Helpers for the fault-injection tests (test_reliability_*.py): the real CLI in subprocesses,
each test with its own cleanup-journal directory, and a census of what a run may leave behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")


def sb_env(state: Path, **extra: str) -> dict[str, str]:
    """Environment for a stallbench subprocess whose journals live in `state` (so that our
    `stallbench cleanup` only ever sees our own runs, never a concurrent test's)."""
    state.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "STALLBENCH_STATE_DIR": str(state), **extra}


def sb(*args: str, state: Path, timeout: float = 120, cwd: Path | None = None,
       **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=sb_env(state, **extra), cwd=cwd)


def sb_start(*args: str, state: Path, **extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "stallbench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=sb_env(state, **extra))


def wait_until(condition: Callable[[], object], proc: subprocess.Popen | None = None,
               timeout: float = 60, poll: float = 0.01) -> object:
    """Poll `condition` until it is truthy; fail if `proc` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"stallbench exited ({proc.returncode}) before the condition held:\n"
                        f"{out}\n{err}")
        time.sleep(poll)
    pytest.fail("timed out waiting")


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def only_run(results: Path, variant: str, workload: str) -> Path:
    runs = sorted((results / variant / workload).iterdir(), key=lambda p: p.name)
    assert len(runs) == 1, runs
    return runs[0]


def run_meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def assert_one_line_exit_2(out: subprocess.CompletedProcess, *needles: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def leftovers(pid: int, work_dir: Path) -> list[str]:
    """Everything a stallbench process `pid` with loop images under `work_dir` could leave: loop
    devices backed by its images, mounts under the work dir, its memory cgroups, image files,
    mount points, tracefs instances."""
    found: list[str] = []
    work = str(work_dir.resolve())
    # a loop device whose image is already deleted is detached by the kernel when its last
    # opener closes it (autoclear): give that a moment before calling it a leak
    deadline = time.monotonic() + 3.0
    while True:
        losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
        loops = [line for line in losetup.splitlines() if work in line]
        if not any("(deleted)" in line for line in loops) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    found += [f"loop: {line}" for line in loops]
    found += [f"mount: {line}" for line in Path("/proc/mounts").read_text().splitlines()
              if work in line]
    if CGROUP_V1_MEMORY.is_dir():
        found += [f"cgroup: {p}" for p in CGROUP_V1_MEMORY.glob(f"stallbench-{pid}-*")]
    if work_dir.is_dir():
        found += [f"file: {p}" for p in work_dir.iterdir()
                  if re.match(r"stallbench-\d+-\d+", p.name)]
    instances = Path("/sys/kernel/tracing/instances")
    if instances.is_dir():
        found += [f"tracefs: {p}" for p in instances.glob(f"stallbench-{pid}*")]
    return found


def sysctl(key: str) -> str:
    return Path("/proc/sys", *key.split(".")).read_text().strip()


def tree_listing(root: Path) -> list[str]:
    """Every path under root (to show that nothing was written there)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
