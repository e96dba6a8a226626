"""What a cleanup journal file may make root do (issue 34 items 8, 10).

A journal read back from disk (`stallbench cleanup`, after a crash) crosses a trust boundary:
whoever could write it chose what root unlinks, removes, writes and kills. So the state folder
and each journal must be this user's and writable by nobody else, and every entry read back
must name something stallbench makes: a path whose last part has `stallbench` in it or is one
of its own scratch names, a file under /proc/sys, an I/O scheduler or tracing switch, a process
with a start time.
Entries a process made itself and undoes itself are its own code's and are not checked here.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import UsageError

# scratch names stallbench gives what it makes outside a stallbench-named folder: a guest's
# exchange folder, PostgreSQL's data folder, a probe's folder, partial files `.NAME.PID`
_SCRATCH_RE = re.compile(r"^(\.guest|pgdata|\.probe-\d+|\.partial-[0-9a-f]+-\d+|"
                         r"\.src\.partial-\d+|\.[^/]+\.\d+)$")
_WRITABLE_RE = re.compile(r"^(/proc/sys/[A-Za-z0-9_./-]+|/sys/block/[A-Za-z0-9_.:-]+/queue/"
                          r"scheduler|/sys/kernel/(debug/)?tracing/[A-Za-z0-9_./-]+)$")
_SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
_TRACEFS_MOUNTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
# kinds that hold a value saved before a change: a new run must not save the changed one
RESTORED_KINDS = ("sysctl", "write")
# the keys of an entry that name a path, by kind (kinds not named: "path")
_PATH_KEYS = {"umount": "target", "loop_umount": "target", "detach_loop": "image"}


def folder_problem(path: Path) -> str | None:
    """Why a state folder is not this user's alone (None: it is)."""
    try:
        info = path.lstat()
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder (a symlink?)"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def file_problem(path: Path) -> str | None:
    """Why a journal file may not be trusted (None: a regular file of this user's that no one
    else can write)."""
    try:
        info = path.lstat()
    except OSError as exc:
        return f"{exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a symlink?)"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return f"writable by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def stallbench_path(text: object) -> bool:
    """An absolute, normal path whose last part stallbench names: `stallbench` in it, or a
    scratch name of its own. Not any part: a user's file under a folder someone called
    stallbench-something (a test's basetemp, a user's ~/stallbench) is not stallbench's."""
    if not isinstance(text, str) or not text.startswith("/"):
        return False
    path = PurePosixPath(text)
    if ".." in path.parts or os.path.normpath(text) != text:
        return False
    return "stallbench" in path.name.lower() or bool(_SCRATCH_RE.match(path.name))


def entry_problem(action: dict[str, Any]) -> str | None:
    """Why an entry read back from a journal file may not be carried out (None: it may)."""
    kind = action.get("kind")
    if kind in ("kill", "pg_stop"):
        pid, start = action.get("pid"), action.get("start_time")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or start is None:
            return "names no process of stallbench's (pid <= 1, or no start time)"
        return None
    if kind == "write":
        path = action.get("path")
        if not isinstance(path, str) or ".." in path or not _WRITABLE_RE.match(path):
            return f"writes {path!r}, which is not a sysctl, I/O scheduler or tracing switch"
        return None
    if kind == "sysctl":
        restore = action.get("restore")
        if not isinstance(restore, list) or not all(
                isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                and _SYSCTL_KEY_RE.match(pair[0]) for pair in restore):
            return "restores something that is not a sysctl"
        return None
    if kind == "finalize_run":
        path = action.get("path")
        if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/") \
                or not Path(path, "run.json").is_file():
            return f"{path!r} is not a run folder"
        return None
    key = _PATH_KEYS.get(str(kind), "path")
    if key in action:
        value = action[key]
        if kind == "umount" and value in _TRACEFS_MOUNTS:
            return None
        if not stallbench_path(value):
            return f"{value!r} is not a path stallbench makes"
    return None


def dead_journals(directory: Path) -> list[tuple[Path, list[dict[str, Any]]]]:
    """Journals with entries whose process is gone (nobody holds their lock): what a killed
    run left changed. Only looks; `stallbench cleanup` undoes them."""
    found = []
    for path in sorted(directory.glob("journal-*.json")):
        lock = path.with_suffix(".lock")
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue           # no lock file: a journal being made, or one cleanup reads
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    continue   # its run is alive
                raise
            try:
                entries = json.loads(path.read_text() or "{}").get("entries", [])
            except (OSError, ValueError, AttributeError):
                entries = []
            if entries:
                found.append((path, entries))
        finally:
            os.close(fd)
    return found


def refuse_after_a_killed_run(directory: Path) -> None:
    """UsageError when a killed run left a saved value unrestored (RESTORED_KINDS): a new run
    would take the leftover sysctl (or scheduler, or huge pages) for the machine's own value
    and restore it. Its cgroups, mounts and unfinished run folder mislead no new run (a bisect
    resumes beside them; `stallbench cleanup` removes them later)."""
    left = [(path, entries) for path, entries in dead_journals(directory)
            if any(isinstance(e, dict) and e.get("kind") in RESTORED_KINDS for e in entries)]
    if left:
        path, entries = left[0]
        kinds = ", ".join(dict.fromkeys(str(e.get("kind")) for e in entries
                                        if isinstance(e, dict)
                                        and e.get("kind") in RESTORED_KINDS))
        raise UsageError(f"a stallbench run that was killed left changes not undone yet "
                         f"({path.name}: {kinds}); run `stallbench cleanup` first, so this run "
                         "starts from the machine's own settings")
