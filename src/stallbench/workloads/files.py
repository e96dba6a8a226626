"""Data files shared by the Python workloads: create once per directory, reuse when they match."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..analysis.display import format_size
from ..core.errors import UsageError

FILL_CHUNK = 1 << 20
SYNC_EVERY = 128 << 20      # fdatasync this often while filling: the rate seen is the device's
PROGRESS_EVERY_S = 5.0


def ensure_file(path: Path, size: int, log: Callable[[str], None] | None = None,
                max_seconds: float | None = None, fix: str = "",
                progress_every_s: float = PROGRESS_EVERY_S) -> bool:
    """Create `path` of exactly `size` bytes of incompressible data unless a matching file from
    an earlier run is there. Returns True when the file was (re)created.

    Says the size before writing and how far it got every `progress_every_s` (through `log`).
    With `max_seconds`, once the rate is known (after the first SYNC_EVERY bytes) a file that
    would take longer than that is removed and refused with a UsageError ending in `fix`."""
    marker = path.with_name(f".{path.name}.stallbench.json")
    for own in (path, marker):      # in a folder others write: never write through their link
        if own.is_symlink():
            raise UsageError(f"{own} is a symlink (to {os.readlink(own)}): stallbench writes its "
                             "data files itself and never through a link; remove it or give "
                             "another --dir")
    if path.exists() and marker.exists():
        try:
            recorded = json.loads(marker.read_text())
        except ValueError:
            recorded = {}
        if recorded.get("size") == size and path.stat().st_size == size:
            return False
    marker.unlink(missing_ok=True)
    say = log or (lambda text: None)
    say(f"creating {path} of {format_size(size)} before the run (not timed; kept for the next "
        "run with the same size)")
    chunk = os.urandom(FILL_CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    start = last_said = time.monotonic()
    try:
        written = 0
        while written < size:
            n = min(FILL_CHUNK, size - written)
            os.write(fd, chunk[:n] if n < FILL_CHUNK else chunk)
            written += n
            if written % SYNC_EVERY and written < size:
                continue
            os.fdatasync(fd)
            now = time.monotonic()
            rate = written / max(now - start, 1e-6)
            left_s = (size - written) / rate
            if max_seconds is not None and now - start + left_s > max_seconds:
                raise _TooSlow(f"writing {path.name} ({format_size(size)}) would take about "
                               f"{now - start + left_s:.0f} s at {format_size(int(rate))}/s, "
                               f"longer than the {max_seconds:g} s run; {fix}")
            if now - last_said >= progress_every_s and written < size:
                last_said = now
                say(f"  {path.name}: {format_size(written)} of {format_size(size)} "
                    f"({100 * written / size:.0f}%), {format_size(int(rate))}/s, about "
                    f"{left_s:.0f} s left")
        os.fsync(fd)
    except _TooSlow as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise UsageError(str(exc)) from None
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise UsageError(f"cannot create {path} ({format_size(size)}): {exc.strerror}") from exc
    os.close(fd)
    marker_fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(marker_fd, "w") as f:
        f.write(json.dumps({"size": size}))
    return True


class _TooSlow(Exception):
    pass


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


def too_slow(workload, duration_s: float) -> tuple[float | None, str]:
    """(max_seconds, fix) for ensure_file: a file sized by default may not take longer to
    write than the run itself; a size the user gave is written however long it takes."""
    flag = workload.default_size_flag()
    if flag is None:
        return None, ""
    return duration_s, (f"without {flag} the file is 2x the memory available: give {flag} "
                        "SIZE, --memory SIZE (a smaller cgroup), or a longer --duration")


def memory_available() -> int:
    """MemAvailable from /proc/meminfo, in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable in /proc/meminfo")
