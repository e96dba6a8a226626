"""Checks made before anything on the machine changes: safety, privileges, tools, features.

The shape of the settings (values, what goes with what) is declared in variant.py and checked
from there; what is left here depends on this machine."""

from __future__ import annotations

import os
from pathlib import Path

from ..analysis.display import format_size
from ..core.errors import UsageError
from ..core.options import root_reasons
from ..settings.shapes import check_plain_path
from ..settings.variant import VARIANT_FIELDS, VariantSettings, check_shape
from .loopfs import MIN_SIZE
from .memcg import find_memory_controller
from .sysctl import check_sysctl_key
from .sysmem import SAFE_FLOOR, meminfo
from .tools import find_tool, tool

FORBIDDEN_DIRS = ("/", "/proc", "/sys", "/dev", "/boot")
FORBIDDEN_TREES = ("/proc", "/sys", "/boot")   # nor anything below these

def check_dir_safe(path: Path | str, what: str) -> Path:
    """Refuse system directories; return the path as given (resolved only for the check)."""
    path = check_plain_path(path, what)
    real = os.path.realpath(path)
    forbidden = {os.path.realpath(d) for d in FORBIDDEN_DIRS} | set(FORBIDDEN_DIRS)
    if real in forbidden or str(path) in forbidden:
        raise UsageError(f"{what} {path}: refusing to run a workload in a system directory; "
                         "give a directory of its own, e.g. /mnt/bench")
    for tree in FORBIDDEN_TREES:
        for root in {tree, os.path.realpath(tree)}:
            if real.startswith(root.rstrip("/") + "/"):
                raise UsageError(f"{what} {path}: is inside {tree}; give a directory of its own")
    return path


def check_settings(settings: VariantSettings) -> None:
    """Every check that needs no change to the machine; UsageError (one line) when wrong."""
    from ..core.names import check_name

    check_name(settings.name)
    opt = f"variant {settings.name}: "
    check_shape(settings, opt)
    if settings.fs_size is not None and settings.fs is not None \
            and settings.fs_size < MIN_SIZE[settings.fs]:
        raise UsageError(f"--fs-size {format_size(settings.fs_size)}: {settings.fs} needs at "
                         f"least {format_size(MIN_SIZE[settings.fs])}")
    if settings.system_memory is not None:
        if settings.system_memory < SAFE_FLOOR:
            raise UsageError(f"--system-memory {format_size(settings.system_memory)}: below the "
                             f"safe floor of {format_size(SAFE_FLOOR)}; the machine could stop "
                             "responding")
        total = meminfo().get("MemTotal", 0)
        if settings.system_memory >= total:
            raise UsageError(f"--system-memory {format_size(settings.system_memory)}: the "
                             f"machine has only {format_size(total)} in all")

    if settings.dir is not None:
        path = check_dir_safe(settings.dir, "--dir")
        if not path.is_dir():
            raise UsageError(f"--dir {path}: no such directory (create it first)")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"--dir {path}: not writable by this user")
    if settings.work_dir is not None:
        path = check_dir_safe(settings.work_dir, "--work-dir")
        existing = next((p for p in (path.absolute(), *path.absolute().parents) if p.exists()),
                        None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK):
            raise UsageError(f"--work-dir {path}: {existing} is not a writable directory")

    if settings.kernel is not None:
        return             # root, sysctl names, tools, cgroups: the guest's, checked in it
    if os.geteuid() != 0:
        for flag, why in root_reasons(vars(settings), VARIANT_FIELDS):
            raise UsageError(f"{flag} needs root ({why}); run stallbench as root or "
                             f"leave out {flag}")

    for key, value in settings.sysctls.items():
        check_sysctl_key(key, value)
    if settings.fs is not None:
        for name in (f"mkfs.{settings.fs}", "losetup", "mount", "umount"):
            tool(name)
    if settings.memory is not None and find_memory_controller() is None:
        raise UsageError("--memory needs a cgroup memory controller, and none is mounted "
                         "(neither cgroup2 with memory enabled nor cgroup v1 memory)")


__all__ = ["check_settings", "check_dir_safe", "find_tool"]
