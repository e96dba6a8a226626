"""Op loops in C, for workloads whose per-op cost in Python would be a large part of the op.

readloop.c is randread's loop: Python's `os.preadv` call alone costs about as much as fio's
whole op on a page-cached 4K read (BENCHMARKS.md "recorder"). It is compiled with the
machine's C compiler (`cc`) at install time (`make`, or `python -m stallbench.workloads.native`)
next to this file, or else on first use into root's own cache directory; a shared object is
only loaded from a directory owned by this user and writable by nobody else, named by the
source's hash so a changed source is rebuilt. Without a compiler the workloads keep their
Python loops and the run says so; STALLBENCH_NO_C_LOOP=1 asks for the Python loops. A guest
(run/vmhost.py) uses the loop its host found or built, through XDG_CACHE_HOME when it is not
next to the source, and the host's STALLBENCH_NO_C_LOOP.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from functools import cache
from pathlib import Path

SOURCE = Path(__file__).with_name("readloop.c")
NO_C_LOOP = "STALLBENCH_NO_C_LOOP"
PYTHON_LOOP_NOTE = ("the read loop ran in Python ({why}): about 0.8x fio's ops/s on "
                    "cached reads and ~0.3 us more per op; a C compiler (cc) gives the C loop")


def _library_name() -> str:
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return f"readloop-{digest}.so"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stallbench"


def _trusted(directory: Path) -> bool:
    """Owned by this user and writable by nobody else: a .so found there is ours."""
    try:
        info = directory.stat()
    except OSError:
        return False
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def build(directory: Path) -> Path:
    """Compile readloop.c into `directory` (atomically: a concurrent build cannot leave half a
    file); returns the library's path. Raises OSError or CalledProcessError."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc) on PATH")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = directory / _library_name()
    partial = directory / f".{target.name}.{os.getpid()}"
    try:
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(partial), str(SOURCE)],
                       check=True, capture_output=True, text=True, timeout=120)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


@cache
def _library() -> tuple[Path | None, str | None]:
    """(the C loop's shared object, None) or (None, why there is none): found next to the
    source or in the cache directory, or built into the cache directory now."""
    if os.environ.get(NO_C_LOOP) == "1":
        return None, f"{NO_C_LOOP}=1"
    name = _library_name()
    candidates = [SOURCE.parent, _cache_dir()]
    path = next((d / name for d in candidates if (d / name).is_file() and _trusted(d)), None)
    why = None
    if path is None:
        try:
            path = build(_cache_dir())
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or str(exc)
            why = f"the C loop could not be built: {detail.strip().splitlines()[-1]}"
    if path is not None and not _trusted(path.parent):
        path, why = None, f"{path.parent} is writable by others"
    return path, why


def cache_home_for_guest() -> str | None:
    """The XDG_CACHE_HOME under which a guest finds the C loop this host built, when it is not
    next to the source (a guest sees the host's files read-only: it could not build one where
    HOME is the host's /tmp, and elsewhere its cc under QEMU TCG would take seconds a run)."""
    path, _ = _library()
    if path is None or path.parent == SOURCE.parent:
        return None
    return str(path.parent.parent)


@cache
def read_ops() -> tuple[ctypes._CFuncPtr | None, str | None]:
    """(the C function sb_read_ops, None) or (None, why not)."""
    path, why = _library()
    if path is None:
        return None, why
    function = ctypes.CDLL(str(path)).sb_read_ops
    function.restype = ctypes.c_int64
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]
    return function, None


def main() -> int:
    """Build next to the source (install time)."""
    try:
        print(build(SOURCE.parent))
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"stallbench: the C op loop was not built ({exc}); the Python loop is used",
              file=sys.stderr)
    return 0
