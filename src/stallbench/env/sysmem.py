"""--system-memory SIZE: leave only about SIZE of memory available to the whole system.

Done as seed 000 did it by hand with a small machine: here by taking memory away with huge pages
(vm.nr_hugepages), which the kernel holds aside until the old value is written back. The result
is checked against MemAvailable; the old value is journaled, so `stallbench cleanup` gives the
memory back after a kill -9. Huge pages need 2 MiB of contiguous memory: where the page cache
of an earlier run (a 6 GiB file read) and fragmentation leave too few, the page cache is dropped
and memory compacted once (vm.drop_caches, vm.compact_memory), then the reservation is tried
again; the memory taken would have pushed that cache out anyway.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..analysis.display import format_size
from ..core.errors import UsageError
from ..core.journal import Journal
from .dropcaches import drop_caches
from .locks import exclusive

NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")
COMPACT_MEMORY = Path("/proc/sys/vm/compact_memory")
SAFE_FLOOR = 512 << 20
_ATTEMPTS = 6


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (HugePages_* counts stay counts)."""
    result: dict[str, int] = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if not parts:
                continue
            value = int(parts[0])
            result[key] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return result


def tolerance(target: int) -> int:
    return max(64 << 20, target // 20)


def _read_hugepages() -> int:
    return int(NR_HUGEPAGES.read_text().split()[0])


def _take(target: int, tol: int, old: int, page: int) -> None:
    """Grow (or shrink, never below `old`) vm.nr_hugepages until MemAvailable is about
    `target`; the kernel may grant fewer pages than asked."""
    for _ in range(_ATTEMPTS):
        excess = meminfo()["MemAvailable"] - target
        if abs(excess) <= tol // 2:
            return
        current = _read_hugepages()
        wanted = max(old, current + excess // page)
        if wanted == current:
            return
        NR_HUGEPAGES.write_text(str(wanted))


def _free_contiguous_memory() -> str:
    """Drop the page cache and compact memory, so that huge pages can be found: what was done,
    for run.json."""
    done = [drop_caches() or "page cache dropped"]
    try:
        COMPACT_MEMORY.write_text("1")
        done.append("memory compacted")
    except OSError as exc:
        done.append(f"memory not compacted: {COMPACT_MEMORY}: {exc.strerror}")
    return ", ".join(done)


@contextlib.contextmanager
def reserve_system_memory(target: int, journal: Journal, metadata: dict[str, Any]
                          ) -> Iterator[None]:
    if target < SAFE_FLOOR:
        raise UsageError(f"--system-memory {format_size(target)}: below the safe floor of "
                         f"{format_size(SAFE_FLOOR)}; the machine could stop responding")
    with exclusive("system-memory", "the system memory reservation (vm.nr_hugepages)"):
        info = meminfo()
        before = info["MemAvailable"]
        page = info.get("Hugepagesize", 2 << 20)
        if before <= target:
            raise UsageError(f"--system-memory {format_size(target)}: only "
                             f"{format_size(before)} is available now, nothing to take away; "
                             "ask for less")
        old = _read_hugepages()
        entry = journal.push("write", path=str(NR_HUGEPAGES), value=str(old))
        try:
            tol = tolerance(target)
            _take(target, tol, old, page)
            if meminfo()["MemAvailable"] > target + tol:
                metadata["freed_first"] = _free_contiguous_memory()
                _take(target, tol, old, page)
            available = meminfo()["MemAvailable"]
            reserved = _read_hugepages() - old
            metadata.update({
                "requested": target, "mem_available_before": before,
                "mem_available_after": available, "hugepage_size": page,
                "nr_hugepages_old": old, "nr_hugepages_set": old + reserved,
                "reserved": reserved * page, "method": "vm.nr_hugepages",
            })
            if available > target + tol:
                raise UsageError(
                    f"--system-memory {format_size(target)}: could only take away "
                    f"{format_size(reserved * page)} as huge pages; {format_size(available)} is "
                    "still available (memory too fragmented?); ask for more")
            if available < SAFE_FLOOR:
                raise UsageError(f"--system-memory {format_size(target)}: other processes "
                                 f"left only {format_size(available)} available; gave it back")
            yield
        finally:
            journal.undo(entry)
