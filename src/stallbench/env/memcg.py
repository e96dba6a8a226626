"""--memory SIZE: the workload's processes in a memory cgroup of their own.

cgroup v2 `memory.max` where a cgroup2 hierarchy has the memory controller enabled for children,
else cgroup v1 `memory.limit_in_bytes`. Cgroups are named `stallbench-<pid>-<n>` and made at the
top of the hierarchy. As root the cgroup is made even without a limit: it keeps every workload
process findable (monitors, and killing leftovers before unmounting their filesystem).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.journal import Entry, Journal, register_undo
from .blockdev import mounts

CGROUP_NAME_RE = re.compile(r"^stallbench-(\d+)-(\d+)$")
_counter = itertools.count(1)


@dataclass
class Controller:
    version: int
    root: Path


def find_controller(v2_name: str, v1_name: str) -> Controller | None:
    """The cgroup hierarchy with a controller: v2 where it is offered and enabled for children
    (cgroup.controllers and cgroup.subtree_control), else a v1 hierarchy mounted with it, else
    None."""
    found_v1 = None
    for info in mounts():
        root = Path(info.mount_point)
        if info.fstype == "cgroup2":
            try:
                offered = (root / "cgroup.controllers").read_text().split()
                enabled = (root / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if v2_name in offered and v2_name in enabled:
                return Controller(2, root)
        elif info.fstype == "cgroup" and v1_name in info.options.split(","):
            found_v1 = found_v1 or Controller(1, root)
    return found_v1


def find_memory_controller() -> Controller | None:
    """The cgroup hierarchy that can limit memory: v2 if enabled there, else v1, else None."""
    return find_controller("memory", "memory")


def cgroup_roots() -> list[Controller]:
    """Every hierarchy where stallbench may have made a cgroup: memory, or blkio for the I/O
    knobs of env/iocgroup.py (for cleanup)."""
    roots = []
    for info in mounts():
        options = info.options.split(",")
        if info.fstype == "cgroup2" or (info.fstype == "cgroup"
                                        and ("memory" in options or "blkio" in options)):
            roots.append(Controller(2 if info.fstype == "cgroup2" else 1, Path(info.mount_point)))
    return roots


@dataclass
class MemoryCgroup:
    version: int
    path: Path
    limit: int | None

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def child_setup(self) -> Callable[[], None]:
        """A function for a child process after fork: joins this cgroup before exec."""
        return cgroup_joiner(self.path)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except OSError:
            return []

    def stats(self) -> dict[str, Any]:
        """Peak and how often the limit was hit (read before the cgroup is removed)."""
        result: dict[str, Any] = {}
        if self.version == 1:
            result["peak"] = _read_int(self.path / "memory.max_usage_in_bytes")
            result["failcnt"] = _read_int(self.path / "memory.failcnt")
            oom = _read_keyed(self.path / "memory.oom_control")
            result["oom_kill"] = oom.get("oom_kill")
            stat = _read_keyed(self.path / "memory.stat")
        else:
            result["peak"] = _read_int(self.path / "memory.peak")
            result["events"] = _read_keyed(self.path / "memory.events")
            stat = _read_keyed(self.path / "memory.stat")
        for key in ("pgmajfault", "pgscan", "pgsteal", "workingset_refault_file",
                    "total_pgmajfault"):
            if key in stat:
                result[f"stat_{key}"] = stat[key]
        return result


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed(path: Path) -> dict[str, int]:
    result: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                result[parts[0]] = int(parts[1])
    except OSError:
        pass
    return result


def cgroup_joiner(path: Path) -> Callable[[], None]:
    """preexec for a child: between fork and exec it writes its pid into the cgroup's
    cgroup.procs, so the program runs in that cgroup from its first instruction."""
    procs = os.fsencode(Path(path) / "cgroup.procs")

    def join() -> None:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    return join


def make_cgroup(controller: Controller, journal: Journal) -> tuple[Path, Entry]:
    """A new cgroup of this process under the controller's root, journaled ("cgroup") before
    it is made."""
    while True:
        path = controller.root / f"stallbench-{os.getpid()}-{next(_counter)}"
        entry = journal.push("cgroup", path=str(path), version=controller.version)
        try:
            path.mkdir()
            return path, entry
        except FileExistsError:
            journal.forget(entry)


def _limit_file(version: int) -> str:
    return "memory.max" if version == 2 else "memory.limit_in_bytes"


@contextlib.contextmanager
def memory_cgroup(controller: Controller, limit: int | None, journal: Journal,
                  metadata: dict[str, Any]) -> Iterator[MemoryCgroup]:
    """Make the cgroup (journaled), set the limit, and on exit record peak/failcnt into
    `metadata` before killing what is left in it and removing it."""
    path, entry = make_cgroup(controller, journal)
    try:
        cgroup = MemoryCgroup(controller.version, path, limit)
        metadata.update({"cgroup": str(path), "cgroup_version": controller.version,
                         "limit": None})
        if limit is not None:
            (path / _limit_file(controller.version)).write_text(str(limit))
            metadata["limit"] = _read_int(path / _limit_file(controller.version))
            metadata["limit_requested"] = limit
        yield cgroup
    finally:
        try:
            metadata.update(cgroup.stats())
        except Exception as exc:  # noqa: BLE001 - the cgroup must still go
            metadata["stats_error"] = str(exc)
        finally:
            journal.undo(entry)


def _checked_path(action: dict[str, Any]) -> Path | None:
    path = Path(action["path"])
    if not CGROUP_NAME_RE.match(path.name):
        raise ValueError(f"{path} is not a stallbench cgroup; left alone")
    return path if path.is_dir() else None


def evict(path: Path, timeout_s: float = 10.0) -> list[int]:
    """Kill every process left in the cgroup and wait until it is empty; returns those killed."""
    procs = path / "cgroup.procs"
    killed: list[int] = []
    kill_file = path / "cgroup.kill"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pids = [int(p) for p in procs.read_text().split()]
        except (OSError, ValueError):
            return killed
        pids = [p for p in pids if p != os.getpid()]
        if not pids:
            return killed
        if time.monotonic() > deadline:
            # stuck in uninterruptible sleep: move them out so the cgroup can still be removed
            parent_procs = path.parent / "cgroup.procs"
            for pid in pids:
                with contextlib.suppress(OSError):
                    parent_procs.write_text(str(pid))
            return killed
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                if pid not in killed:
                    killed.append(pid)
        time.sleep(0.02)


@register_undo("cgroup_evict")
def _undo_evict(action: dict[str, Any]) -> None:
    """Kill the workload's leftover processes (before their filesystem is unmounted)."""
    path = _checked_path(action)
    if path is not None:
        evict(path)


@register_undo("cgroup")
def _undo_cgroup(action: dict[str, Any]) -> None:
    path = _checked_path(action)
    if path is None:
        return
    evict(path)
    deadline = time.monotonic() + 10.0
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            # exited tasks may take a moment to leave the cgroup
            if time.monotonic() > deadline:
                raise
            evict(path, timeout_s=1.0)
            time.sleep(0.05)
