"""Drop the page cache, dentries and inodes before each run so runs start equally cold."""

from __future__ import annotations

import os


def drop_caches() -> str | None:
    """sync, then echo 3 > /proc/sys/vm/drop_caches; returns a note when that is not possible."""
    if os.geteuid() != 0:
        return "caches not dropped: dropping the page cache needs root"
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError as exc:
        return f"caches not dropped: /proc/sys/vm/drop_caches: {exc.strerror}"
    return None
