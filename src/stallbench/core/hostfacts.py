"""Facts of this host and its processes that a run records: the time now in UTC, the kernel
(uname and its command line), whether a process is alive."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def kernel_info() -> dict[str, str]:
    uname = os.uname()
    try:
        cmdline = Path("/proc/cmdline").read_text().strip()
    except OSError:
        cmdline = ""
    return {"release": uname.release, "version": uname.version, "machine": uname.machine,
            "cmdline": cmdline}


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
