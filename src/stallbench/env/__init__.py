"""The environment layer: set up one variant for one run and always put the machine back.

`environment()` is the one entry point the runner uses; each module here makes one kind of change
and writes down how to undo it in the journal before making it (see journal.py), so that an
exception, Ctrl-C, SIGTERM or - through `stallbench cleanup` - even kill -9 leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ..analysis.display import format_size
from ..core.context import EnvState
from ..core.errors import UsageError
from ..core.journal import Journal
from ..settings.variant import VariantSettings
from . import (
    iocgroup,
    leftovers,  # noqa: F401 - registers nothing, but cleanup uses it through env
    memknobs,
)
from .blockdev import devices_under, mount_of
from .checks import check_dir_safe, check_settings
from .dropcaches import drop_caches
from .loopfs import default_size, loop_filesystem
from .machinestate import collect as collect_inventory
from .memcg import find_memory_controller, memory_cgroup
from .scheduler import check_offered, scheduler
from .sysctl import sysctls
from .sysmem import meminfo, reserve_system_memory

__all__ = ["environment", "drop_caches", "check_settings", "check_dir_safe", "TerminatedBySignal"]


class SizedWorkload(Protocol):
    """What the environment asks of a workload (workloads/base.Workload has it): its name and
    the space its files take, which may depend on the memory the variant leaves it."""

    name: str

    def resolve(self, memory_available: int) -> None: ...

    def space_needed(self, memory_available: int) -> int: ...

    def default_size_flag(self) -> str | None: ...


class TerminatedBySignal(KeyboardInterrupt):
    """SIGTERM arrived while an environment was set up (raised only where nobody else handles
    SIGTERM), so that the environment unwinds like on Ctrl-C."""


@contextlib.contextmanager
def environment(settings: VariantSettings, journal: Journal, workload: SizedWorkload,
                results: Path, own_dir: str | None = None) -> Iterator[EnvState]:
    """Set up one variant for one run and undo it on exit (also on exceptions/KeyboardInterrupt).
    `own_dir`: the default directory is results/.work/<workload>/<own_dir>, for runs of several
    variants at the same time (duet.py: one per CPU slot of the round).

    Order: all checks (nothing changed before they pass) -> system memory reservation -> memory
    cgroup -> workload.resolve(memory available) -> loop filesystem, --dir or a default directory
    under results/.work/<workload> -> free-space check -> sysctls -> scheduler -> yield.
    """
    check_settings(settings)
    results = Path(results)
    is_root = os.geteuid() == 0
    controller = find_memory_controller() if is_root else None
    io_controller = iocgroup.find_io_controller() if iocgroup.wanted(settings) else None
    memknobs.check(settings, controller)            # cgroup knobs: refused before any change
    iocgroup.check(settings, io_controller)
    if settings.dir is not None and settings.scheduler is not None:
        for device in devices_under(Path(settings.dir))[-1:]:
            check_offered(device, settings.scheduler)

    metadata: dict[str, Any] = {}
    stack = contextlib.ExitStack()
    previous_sigterm = _raise_on_sigterm()
    try:
        if settings.system_memory is not None:
            stack.enter_context(reserve_system_memory(
                settings.system_memory, journal, metadata.setdefault("system_memory", {})))
        cgroup = None
        if controller is not None:
            cgroup = stack.enter_context(memory_cgroup(
                controller, settings.memory, journal, metadata.setdefault("memory", {})))
            memknobs.apply(settings, cgroup, metadata["memory"].setdefault("knobs", {}))
        memory_available = settings.memory or meminfo()["MemAvailable"]
        metadata["memory_limit"] = settings.memory
        metadata["memory_available"] = memory_available
        workload.resolve(memory_available)
        needed = int(workload.space_needed(memory_available) or 0)
        metadata["space_needed"] = needed
        default_dir = results / ".work" / workload.name
        if own_dir:
            default_dir = default_dir / own_dir
        _check_default_size(settings, workload, needed, memory_available, results, default_dir)

        if settings.fs is not None:
            size = settings.fs_size or default_size(settings.fs, needed)
            work_dir = Path(settings.work_dir) if settings.work_dir else results / ".work"
            loop = stack.enter_context(loop_filesystem(
                settings.fs, size, settings.mkfs_opts, settings.mount_opts, work_dir,
                settings.keep_image, settings.name, journal,
                metadata.setdefault("filesystem", {}),
                cgroup=str(cgroup.path) if cgroup is not None else None))
            workdir, devices = loop.mount_point, [loop.device]
            where = f"the {settings.fs} filesystem of {format_size(size)}"
            fix = "give a larger --fs-size (fs_size in a plan)"
        else:
            if settings.dir is not None:
                workdir = Path(settings.dir)
                fix = "free space there or give another --dir"
            else:
                workdir = default_dir
                workdir.mkdir(parents=True, exist_ok=True)
                fix = "free space there, or use --dir or --fs"
            devices = devices_under(workdir)
            where = str(workdir)
            info = mount_of(workdir)
            metadata["filesystem"] = {"dir": str(workdir)} if info is None else {
                "dir": str(workdir), "type": info.fstype, "source": info.source,
                "mount_point": info.mount_point, "mount_options": info.mount_options,
                "superblock_options": info.super_options}
        _check_space(workdir, needed, where, fix, workload.name)
        joins = [cgroup.child_setup()] if cgroup is not None else []
        if io_controller is not None:
            joins.append(stack.enter_context(iocgroup.io_cgroup(
                settings, io_controller, devices, cgroup, journal, metadata.setdefault("io", {}))))

        if cgroup is not None:
            entry = journal.push("cgroup_evict", path=str(cgroup.path))
            stack.callback(journal.undo, entry)
        stack.enter_context(sysctls(settings.sysctls, journal,
                                    metadata.setdefault("sysctls", {})))
        if settings.scheduler is not None:
            stack.enter_context(scheduler(settings.scheduler, devices, journal,
                                          metadata.setdefault("scheduler", {})))
        metadata["devices"] = devices
        metadata["workdir"] = str(workdir)
        metadata["inventory"] = collect_inventory(workdir, devices)   # the machine as it ran
        yield EnvState(
            workdir=workdir,
            child_setup=_chained(joins),
            cgroup={"version": cgroup.version, "path": str(cgroup.path)} if cgroup else None,
            devices=devices,
            memory_limit=(metadata.get("memory") or {}).get("limit"),
            metadata=metadata,
        )
    finally:
        errors_before = len(journal.errors)
        with _signals_deferred():
            stack.close()
        if len(journal.errors) > errors_before:
            metadata["cleanup_errors"] = journal.errors[errors_before:]
        _restore_sigterm(previous_sigterm)


def _chained(functions: list[Any]) -> Any:
    """One child-setup function that runs each of `functions` (joins each cgroup)."""
    if len(functions) == 1:
        return functions[0]

    def run_all() -> None:
        for function in functions:
            function()

    return run_all


def _check_space(workdir: Path, needed: int, where: str, fix: str, workload_name: str) -> None:
    if not needed:
        return
    st = os.statvfs(workdir)
    free = st.f_bavail * st.f_frsize
    reusable = _bytes_under(workdir)
    if free + reusable < needed:
        raise UsageError(f"{where} has {format_size(free)} free but the {workload_name} workload "
                         f"needs {format_size(needed)}; {fix}")


SAFE_SHARE = 0.5   # a file sized by default may take at most this share of the free space


def _check_default_size(settings: VariantSettings, workload: SizedWorkload, needed: int,
                        memory_available: int, results: Path, default_dir: Path) -> None:
    """A data file the user did not size (2x the memory available) may not fill the disk:
    refuse, naming the flag, when it would take more than SAFE_SHARE of the free space."""
    flag = workload.default_size_flag()
    if flag is None or not needed:
        return
    if settings.fs is not None:
        host = Path(settings.work_dir) if settings.work_dir else results / ".work"
        reusable = 0                       # a fresh filesystem: everything is written
    else:
        host = Path(settings.dir) if settings.dir is not None else default_dir
        reusable = _bytes_under(host) if host.is_dir() else 0
    existing = host
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    st = os.statvfs(existing)
    free = st.f_bavail * st.f_frsize
    if needed - reusable > SAFE_SHARE * (free + reusable):
        raise UsageError(
            f"without {flag} the {workload.name} files take {format_size(needed)} (the data "
            f"file is 2x the {format_size(memory_available)} of memory available), more than "
            f"{SAFE_SHARE:.0%} of the {format_size(free)} free in {existing}; give {flag} SIZE "
            f"(e.g. {flag} {max(1, int(SAFE_SHARE * free / 4)) >> 20}M) or --memory SIZE")


def _bytes_under(path: Path, limit: int = 10_000) -> int:
    """Space already taken by files in the directory (a workload reuses its files)."""
    total = 0
    seen = 0
    for root, dirs, files in os.walk(path):
        for name in files:
            seen += 1
            if seen > limit:
                return total
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                total += st.st_blocks * 512
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    return total


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_on_sigterm() -> Any:
    """Turn SIGTERM into an exception while set up, unless the caller handles SIGTERM itself."""
    if not _in_main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def handler(signum: int, frame: Any) -> None:
        raise TerminatedBySignal("SIGTERM")

    signal.signal(signal.SIGTERM, handler)
    return signal.SIG_DFL


def _restore_sigterm(previous: Any) -> None:
    if previous is not None and _in_main_thread():
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while the machine is being put back; deliver them afterwards."""
    if not _in_main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, lambda s, f: pending.append(s))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in pending:
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                if signum == signal.SIGINT:
                    raise KeyboardInterrupt
                os.kill(os.getpid(), signum)
