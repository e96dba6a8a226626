"""Shared by the test_env_* files: a tiny workload double and probes of the machine's state.

The probes read the kernel's own views (losetup's listing, /proc/mounts, the cgroup tree,
/proc/sys), not stallbench's code, so the tests check env/ against an independent oracle.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from stallbench.workloads.base import Workload, WorkloadResult

MIB = 1 << 20


class TinyWorkload(Workload):
    """A workload double: says how much space it needs and remembers what it was told."""

    name = "tiny"
    ops = ("write",)

    def __init__(self, space: int = 8 * MIB):
        self.space = space
        self.memory_seen: int | None = None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> TinyWorkload:
        return cls(int(options.get("space", 8 * MIB)))

    def params(self) -> dict[str, Any]:
        return {"space": self.space}

    def resolve(self, memory_available: int) -> None:
        self.memory_seen = memory_available

    def space_needed(self, memory_available: int) -> int:
        return self.space

    def prepare(self, ctx) -> None:
        pass

    def run(self, ctx, progress) -> WorkloadResult:
        return WorkloadResult(batches=[])


def loop_listing() -> str:
    """`losetup --list` as the kernel reports it: every attached loop device and its file."""
    return subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                          capture_output=True, text=True, check=True).stdout


def proc_mounts() -> list[list[str]]:
    return [line.split() for line in Path("/proc/mounts").read_text().splitlines()]


def mount_line(mount_point: Path) -> list[str] | None:
    found = [m for m in proc_mounts() if m[1] == str(mount_point)]
    return found[-1] if found else None


_TRACKED: set[str] = {str(os.getpid())}


def sysctl(key: str) -> str:
    return Path("/proc/sys", key.replace(".", "/")).read_text().strip()


def nothing_left(results: Path, pid: int | None = None) -> list[str]:
    """Everything of ours still on the machine, as readable lines (empty list = clean)."""
    pids = {str(pid)} if pid else _TRACKED
    left = []
    for line in loop_listing().splitlines():
        if str(results) in line or any(f"stallbench-{p}-" in line for p in pids):
            left.append(f"loop: {line}")
    for m in proc_mounts():
        if m[1].startswith(str(results)) or any(f"stallbench-{p}-" in m[1] for p in pids):
            left.append(f"mount: {m[1]}")
    for p in Path("/sys/fs/cgroup/memory").iterdir():
        if any(p.name.startswith(f"stallbench-{q}-") for q in pids):
            left.append(f"cgroup: {p}")
    work = results / ".work"
    if work.exists():
        left += [f"file: {f}" for f in work.iterdir()]
    return left


def where_stuck(pid: int) -> str:
    """What a process that did not end is doing, for a failure message: each of its threads'
    and its children's state, wait channel and kernel stack (a write stuck in the kernel shows
    there), and the kernel's own hung-task reports."""
    lines = []
    for proc in [pid, *_descendants(pid)]:
        for task in sorted(Path(f"/proc/{proc}/task").glob("*")):
            try:
                stat = (task / "stat").read_text()
                wchan = (task / "wchan").read_text()
                stack = (task / "stack").read_text().strip().replace("\n", " | ")
            except OSError:
                continue
            name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
            lines.append(f"pid {proc} task {task.name} ({name}) state {state} wchan {wchan}: "
                         f"{stack}")
    dmesg = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
    hung = [i for i, line in enumerate(dmesg) if "blocked for more than" in line]
    if hung:
        lines += ["dmesg:", *dmesg[hung[-1]:hung[-1] + 40]]
    return "\n".join(lines)


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found
