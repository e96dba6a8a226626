"""--memory-high, --memory-soft-limit, --swap-limit: more knobs of the workload's memory cgroup.

cgroup v2: memory.high (reclaim and throttling above it) and memory.swap.max (swap only).
cgroup v1 has no memory.high; its nearest is memory.soft_limit_in_bytes, which is only enforced
when the whole machine is short of memory, so the two are separate options and each is refused
on the other version. The v1 swap limit is memory.memsw.limit_in_bytes, a limit on memory plus
swap: it is written as the memory limit plus --swap-limit, so --swap-limit needs --memory on v1,
and exists only when the kernel accounts swap (swapaccount). The files belong to the workload's
own cgroup (env/memcg.py), which is journaled and removed after the run: the settings go with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..settings.variant import VariantSettings
from .memcg import Controller, MemoryCgroup

# option name -> (attribute, {cgroup version: file}); a version missing has no such knob
KNOBS = {
    "--memory-high": ("memory_high", {2: "memory.high"}),
    "--memory-soft-limit": ("memory_soft_limit", {1: "memory.soft_limit_in_bytes"}),
    "--swap-limit": ("swap_limit", {2: "memory.swap.max", 1: "memory.memsw.limit_in_bytes"}),
}
_NEAREST = {
    ("--memory-high", 1): "cgroup v1 has no memory.high; the nearest is --memory-soft-limit "
                          "(enforced only under machine-wide memory pressure)",
    ("--memory-soft-limit", 2): "cgroup v2 has no soft limit; use --memory-high",
}


def requested(settings: VariantSettings) -> list[str]:
    return [flag for flag, (attr, _) in KNOBS.items() if getattr(settings, attr) is not None]


def check(settings: VariantSettings, controller: Controller | None) -> None:
    """Refuse knobs this machine's memory controller does not have (before any change)."""
    wanted = requested(settings)
    if not wanted:
        return
    if controller is None:
        raise UsageError(f"{wanted[0]}: no memory cgroup controller here (needs root and a "
                         "cgroup v1 or v2 memory controller)")
    for flag in wanted:
        files = KNOBS[flag][1]
        name = files.get(controller.version)
        if name is None:
            raise UsageError(f"{flag}: {_NEAREST[(flag, controller.version)]}")
        if not (controller.root / name).exists() and not _child_only(name):
            raise UsageError(f"{flag}: this kernel's cgroup v{controller.version} memory "
                             f"controller has no {name} (for swap: boot with swapaccount=1)")
    if settings.swap_limit is not None and controller.version == 1 and settings.memory is None:
        raise UsageError("--swap-limit: on cgroup v1 the swap limit is memory.memsw (memory + "
                         "swap), so it needs --memory too")


def _child_only(name: str) -> bool:
    """v2 root cgroups lack memory.high / memory.swap.max; only children have them."""
    return name in ("memory.high", "memory.swap.max")


def apply(settings: VariantSettings, cgroup: MemoryCgroup, metadata: dict[str, Any]) -> None:
    """Write each requested knob into the workload's cgroup; metadata gets what the kernel
    shows afterwards (rounded to pages)."""
    for flag in requested(settings):
        attr, files = KNOBS[flag]
        name = files[cgroup.version]
        value = getattr(settings, attr)
        if attr == "swap_limit" and cgroup.version == 1:
            value = int(settings.memory or 0) + value
        path = Path(cgroup.path) / name
        if not path.exists():
            raise UsageError(f"{flag}: {path} does not exist (swap accounting off?)")
        try:
            path.write_text(str(value))
        except OSError as exc:
            raise UsageError(f"{flag}: the kernel refused {name}={value} ({exc.strerror})"
                             ) from None
        metadata[name] = {"requested": value, "now": path.read_text().strip()}
