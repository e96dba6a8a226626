"""Drop the page cache, dentries and inodes before each run so runs start equally cold."""

from __future__ import annotations

import os
from collections.abc import Callable

ANNOUNCEMENT = ("dropping the page cache, dentries and inodes of the whole machine before each "
                "run so runs start equally cold (--no-drop-caches, or drop_caches = false in a "
                "plan, keeps them)")
_announced = False


def drop_caches(log: Callable[[str], None] | None = None) -> str | None:
    """sync, then echo 3 > /proc/sys/vm/drop_caches; returns a note when that is not possible.
    The first drop in this process is announced through `log`: it affects every program."""
    global _announced
    if os.geteuid() != 0:
        return "caches not dropped: dropping the page cache needs root"
    if log is not None and not _announced:
        _announced = True
        log(ANNOUNCEMENT)
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError as exc:
        return f"caches not dropped: /proc/sys/vm/drop_caches: {exc.strerror}"
    return None
