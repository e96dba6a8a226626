"""Data files shared by the Python workloads: create once per directory, reuse when they match."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UsageError
from ..units import format_size

FILL_CHUNK = 1 << 20


def ensure_file(path: Path, size: int, progress_label: str | None = None) -> bool:
    """Create `path` of exactly `size` bytes of incompressible data unless a matching file from
    an earlier run is there. Returns True when the file was (re)created."""
    marker = path.with_name(f".{path.name}.stallbench.json")
    if path.exists() and marker.exists():
        try:
            recorded = json.loads(marker.read_text())
        except ValueError:
            recorded = {}
        if recorded.get("size") == size and path.stat().st_size == size:
            return False
    marker.unlink(missing_ok=True)
    chunk = os.urandom(FILL_CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < size:
            n = min(FILL_CHUNK, size - written)
            os.write(fd, chunk[:n] if n < FILL_CHUNK else chunk)
            written += n
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise UsageError(f"cannot create {path} ({format_size(size)}): {exc.strerror}") from exc
    os.close(fd)
    marker.write_text(json.dumps({"size": size}))
    return True


def check_space(directory: Path, needed: int, existing: list[Path] = ()) -> None:
    """UsageError when `directory` lacks room for `needed` bytes (minus files being reused)."""
    reusable = sum(p.stat().st_size for p in existing if p.exists())
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if needed - reusable > free:
        raise UsageError(
            f"{directory} has {format_size(free)} free but the workload needs "
            f"{format_size(needed - reusable)} more: give a smaller size or another --dir"
        )


def memory_available() -> int:
    """MemAvailable from /proc/meminfo, in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable in /proc/meminfo")
