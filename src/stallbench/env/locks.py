"""Machine-wide locks for system settings two runs must not change at the same time.

An abstract unix socket name is the lock: binding it succeeds for exactly one process, the kernel
releases it when that process dies (also on kill -9), and nothing is left on disk.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

from ..core.errors import UsageError


@contextlib.contextmanager
def exclusive(resource: str, purpose: str) -> Iterator[None]:
    """Hold the lock for `resource` (e.g. 'sysctl:vm.dirty_ratio') or refuse with a UsageError."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.bind(b"\0stallbench-lock:" + resource.encode()[:80])
    except OSError:
        sock.close()
        raise UsageError(f"another stallbench run is changing {purpose} right now; wait for it "
                         "to finish (two runs may not change the same system setting)") from None
    try:
        yield
    finally:
        sock.close()
