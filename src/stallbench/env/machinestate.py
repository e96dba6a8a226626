"""The machine's state at the start of a run, recorded in run.json under environment.inventory.

Read only, never a change: CPU (model, count, frequency governor and driver, turbo/boost),
transparent huge pages, swap, the block device under the workload's directory (model,
rotational, scheduler, nr_requests, read_ahead_kb, write cache, queue depth), the mount options
of its filesystem, and every vm.* and kernel.sched* sysctl. Each fact is read next to the kernel
file it comes from; a file that is missing or unreadable gives UNAVAILABLE, never an exception.
analysis/environment.py compares two of these records.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .blockdev import mount_of, proc_mounts_entry

UNAVAILABLE = "unavailable"
INVENTORY_VERSION = 1
_MAX_SYSCTL_CHARS = 512
_CPU = Path("/sys/devices/system/cpu")
_THP = Path("/sys/kernel/mm/transparent_hugepage")


def _read(path: str | Path) -> str:
    """The file's text stripped, or UNAVAILABLE."""
    try:
        with open(path, errors="replace") as f:
            return f.read(64 * 1024).strip()
    except OSError:
        return UNAVAILABLE


def _bracketed(path: str | Path) -> str:
    """'always [madvise] never' -> 'madvise' (sysfs shows the active choice in brackets)."""
    text = _read(path)
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text


def _cpuinfo_model() -> str:
    text = _read("/proc/cpuinfo")
    for key in ("model name", "Processor", "cpu model", "cpu"):   # x86, arm, mips, ppc
        match = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return UNAVAILABLE


def _per_cpu(relative: str) -> str:
    """One value if every online CPU agrees, else 'cpu0=a,cpu1=b'; UNAVAILABLE if none has it."""
    values: dict[str, str] = {}
    for cpu_dir in sorted(_CPU.glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        value = _read(cpu_dir / relative)
        if value != UNAVAILABLE:
            values[cpu_dir.name] = value
    if not values:
        return UNAVAILABLE
    if len(set(values.values())) == 1:
        return next(iter(values.values()))
    return ",".join(f"{cpu}={value}" for cpu, value in values.items())


def _boost() -> str:
    """Turbo/boost on or off, from whichever interface the frequency driver offers."""
    no_turbo = _read(_CPU / "intel_pstate/no_turbo")                 # intel_pstate
    if no_turbo != UNAVAILABLE:
        return "off" if no_turbo == "1" else "on"
    boost = _read(_CPU / "cpufreq/boost")                             # acpi-cpufreq, amd
    if boost != UNAVAILABLE:
        return "on" if boost == "1" else "off"
    per_policy = _per_cpu("cpufreq/boost")                            # newer per-policy file
    if per_policy != UNAVAILABLE:
        return {"1": "on", "0": "off"}.get(per_policy, per_policy)
    return UNAVAILABLE


def cpu() -> dict[str, Any]:
    return {
        "model": _cpuinfo_model(),
        "count": os.cpu_count() or UNAVAILABLE,
        "online": _read(_CPU / "online"),
        "governor": _per_cpu("cpufreq/scaling_governor"),
        "driver": _per_cpu("cpufreq/scaling_driver"),
        "boost": _boost(),
        "smt": _read(_CPU / "smt/control"),
    }


def thp() -> dict[str, Any]:
    return {
        "enabled": _bracketed(_THP / "enabled"),
        "defrag": _bracketed(_THP / "defrag"),
        "shmem_enabled": _bracketed(_THP / "shmem_enabled"),
        "khugepaged_defrag": _read(_THP / "khugepaged/defrag"),
    }


def swap() -> dict[str, Any]:
    """Active swap areas from /proc/swaps and the totals from /proc/meminfo."""
    text = _read("/proc/swaps")
    areas: list[dict[str, str]] | str = UNAVAILABLE
    if text != UNAVAILABLE:
        areas = []
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 5:
                areas.append({"name": parts[0], "type": parts[1], "size_kib": parts[2],
                              "priority": parts[4]})
    meminfo = _read("/proc/meminfo")
    total = re.search(r"^SwapTotal:\s*(\d+)", meminfo, re.MULTILINE)
    return {"areas": areas, "count": len(areas) if isinstance(areas, list) else UNAVAILABLE,
            "total_kib": int(total.group(1)) if total else UNAVAILABLE}


def block_device(name: str) -> dict[str, Any]:
    """Queue settings and identity of one whole-disk block device (e.g. 'vda', 'loop3')."""
    base = Path("/sys/block") / name
    queue = base / "queue"
    depth = _read(base / "device/queue_depth")                        # SCSI/SATA
    if depth == UNAVAILABLE:
        depth = _read(base / "mq/0/nr_tags")                          # any blk-mq device
    facts: dict[str, Any] = {
        "name": name,
        "model": _read(base / "device/model"),
        "vendor": _read(base / "device/vendor"),
        "rotational": _read(queue / "rotational"),
        "scheduler": _bracketed(queue / "scheduler"),
        "nr_requests": _read(queue / "nr_requests"),
        "read_ahead_kb": _read(queue / "read_ahead_kb"),
        "write_cache": _read(queue / "write_cache"),
        "queue_depth": depth,
        "max_sectors_kb": _read(queue / "max_sectors_kb"),
        "logical_block_size": _read(queue / "logical_block_size"),
    }
    if (base / "loop").is_dir():
        facts["loop_backing_file"] = _read(base / "loop/backing_file")
        facts["loop_direct_io"] = _read(base / "loop/dio")
    return facts


def filesystem(workdir: Path) -> dict[str, Any]:
    """Type, source and mount options (as /proc/mounts shows them) of the mount holding workdir."""
    try:
        info = mount_of(workdir)
    except OSError:
        info = None
    if info is None:
        return {"type": UNAVAILABLE, "options": UNAVAILABLE}
    try:
        shown = proc_mounts_entry(Path(info.mount_point))
    except OSError:
        shown = None
    return {"type": info.fstype, "source": info.source, "mount_point": info.mount_point,
            "options": shown[2] if shown else UNAVAILABLE}


def sysctls(root: Path = Path("/proc/sys")) -> dict[str, str]:
    """Every world-readable vm.* and kernel.sched* sysctl: write-only triggers (drop_caches)
    and root-only files are skipped; reading vm.stat_refresh (0600) would make every CPU
    fold its counters, a perturbation the record should not cause."""
    values: dict[str, str] = {}
    candidates = sorted((root / "vm").glob("*")) + sorted((root / "kernel").glob("sched*"))
    for path in candidates:
        try:
            if not path.is_file() or not os.stat(path).st_mode & 0o004:
                continue
        except OSError:
            continue
        key = ".".join(path.relative_to(root).parts)
        value = " ".join(_read(path).split())
        values[key] = value[:_MAX_SYSCTL_CHARS]
    return values


def collect(workdir: Path, devices: list[str]) -> dict[str, Any]:
    """The whole record; `devices` as env/blockdev.devices_under returns them (the last one
    is the device the workload's filesystem sits on)."""
    return {
        "version": INVENTORY_VERSION,
        "cpu": cpu(),
        "thp": thp(),
        "swap": swap(),
        "device": block_device(devices[-1]) if devices else {"name": UNAVAILABLE},
        "filesystem": filesystem(workdir),
        "sysctl": sysctls(),
    }
