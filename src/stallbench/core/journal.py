"""The cleanup journal: every change to the system is written down before it is made.

Each stallbench process keeps its own journal file (so two runs never clobber each other's) under
/run/stallbench (or /var/lib/stallbench, or $STALLBENCH_STATE_DIR) and holds an flock on it for
its lifetime. An entry is an undo action as plain data, e.g. {"kind": "write", "path":
"/proc/sys/vm/dirty_ratio", "value": "20"}. Entries are undone in reverse order by the code that
made the change (normally through `Journal.undo`), or, after `kill -9`, by `stallbench cleanup`,
which takes every journal whose owner no longer holds the lock.

Undo kinds are functions registered with `@register_undo("kind")` beside the change they undo;
run/undo.py names every kind and its module, and a Journal or `cleanup_stale` is given that
table (its default: the kinds registered so far, this module's own at least).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError
from .journaltrust import entry_problem, file_problem, folder_problem
from .jsonfile import write_json_atomic

UndoFn = Callable[[dict[str, Any]], None]
UNDO_ACTIONS: dict[str, UndoFn] = {}


class UndoRefused(Exception):
    """An entry that will never be carried out (it would touch what stallbench did not make):
    dropped from the journal, and said."""


def register_undo(kind: str) -> Callable[[UndoFn], UndoFn]:
    def wrap(fn: UndoFn) -> UndoFn:
        UNDO_ACTIONS[kind] = fn
        return fn

    return wrap


def state_dir() -> Path:
    """The first usable state folder: this user's, writable by nobody else (a folder another
    user made first, e.g. /tmp/stallbench-0, is passed over; $STALLBENCH_STATE_DIR is refused)."""
    override = os.environ.get("STALLBENCH_STATE_DIR")
    if override:
        path = Path(override)
        with contextlib.suppress(OSError):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = folder_problem(path)
        if problem:
            raise UsageError(f"STALLBENCH_STATE_DIR: {problem}: the cleanup journal there could "
                             "be changed by another user; give a folder of this user's alone")
        return path
    candidates = [
        Path("/run/stallbench"), Path("/var/lib/stallbench"),
        *([Path(os.environ["XDG_RUNTIME_DIR"]) / "stallbench"]
          if os.environ.get("XDG_RUNTIME_DIR") else []),
        Path.home() / ".cache/stallbench/state",
        Path(tempfile.gettempdir()) / f"stallbench-{os.getuid()}",  # e.g. nobody: no home
    ]
    for path in candidates:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.access(path, os.W_OK) and folder_problem(path) is None:
                return path
        except OSError:
            continue
    raise OSError("no writable state directory for the cleanup journal")


@dataclass
class Entry:
    id: int
    action: dict[str, Any]


class Journal:
    """One process's journal. Use as a context manager; `undo_all` runs on exit."""

    def __init__(self, directory: Path | None = None,
                 kinds: Mapping[str, UndoFn] | None = None):
        """`kinds`: the undo actions this journal may record (run/undo.py: undo_kinds);
        default, those registered so far."""
        self.kinds = UNDO_ACTIONS if kinds is None else kinds
        self.directory = Path(directory) if directory else state_dir()
        stem = f"journal-{os.getpid()}-{time.monotonic_ns()}"
        self.path = self.directory / f"{stem}.json"
        self.lock_path = self.directory / f"{stem}.lock"
        self._fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.entries: list[Entry] = []
        self._next_id = 1
        self.errors: list[str] = []
        self._save()

    # -- recording --------------------------------------------------------------------------
    def push(self, kind: str, **action: Any) -> Entry:
        """Record how to undo a change; call this *before* making the change."""
        if kind not in self.kinds:
            raise KeyError(f"unknown undo kind {kind!r}")
        entry = Entry(self._next_id, {"kind": kind, **action})
        self._next_id += 1
        self.entries.append(entry)
        self._save()
        return entry

    def update(self, entry: Entry, **changes: Any) -> None:
        """Amend an entry once more is known (e.g. the loop device that losetup chose)."""
        entry.action.update(changes)
        self._save()

    def forget(self, entry: Entry) -> None:
        """Drop an entry without undoing (the change turned out not to happen)."""
        self.entries = [e for e in self.entries if e.id != entry.id]
        self._save()

    def undo(self, entry: Entry) -> None:
        """Undo one change now and drop it from the journal. Errors are kept, not raised; an
        entry whose undo failed stays in the journal file, for `stallbench cleanup` to retry
        (one it refuses is dropped)."""
        try:
            run_undo(entry.action, self.kinds)
        except UndoRefused as exc:
            self.errors.append(f"{entry.action.get('kind')}: {exc}")
        except Exception as exc:  # noqa: BLE001 - cleanup must go on with the rest
            self.errors.append(f"{entry.action.get('kind')}: {exc}; left in the journal for "
                               "`stallbench cleanup`")
            return
        self.forget(entry)

    def undo_all(self) -> list[str]:
        """Undo everything still recorded, newest first; returns the errors met."""
        for entry in reversed(list(self.entries)):
            self.undo(entry)
        return self.errors

    def close(self) -> None:
        if self._fd < 0:
            return
        if not self.entries:
            self.path.unlink(missing_ok=True)
            self.lock_path.unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.undo_all()
        self.close()

    def _save(self) -> None:
        write_json_atomic(self.path, {"pid": os.getpid(),
                                      "entries": [{"id": e.id, **e.action} for e in self.entries]})


def run_undo(action: dict[str, Any], kinds: Mapping[str, UndoFn] | None = None) -> None:
    """Carry out one entry with its kind's undo (`kinds`: default, those registered)."""
    kind = action.get("kind")
    fn = (UNDO_ACTIONS if kinds is None else kinds).get(kind)
    if fn is None:
        raise KeyError(f"unknown undo kind {kind!r}")
    fn(action)


# -- after a crash --------------------------------------------------------------------------------


def cleanup_stale(directory: Path | None = None, log: Callable[[str], None] = print,
                  undo_kinds: Callable[[], Mapping[str, UndoFn]] | None = None) -> int:
    """Undo the journals of stallbench processes that died; returns the number of changes not
    undone (each named). A journal that is not this user's alone is left as it is; an entry
    that names what stallbench does not make is dropped unrun (journaltrust.py); an entry
    whose undo fails stays in the journal, for the next cleanup to retry. `undo_kinds` gives
    the undo actions (run/undo.py's table), asked for only once a journal holds entries: it
    imports most of stallbench; default, those registered so far."""
    directory = Path(directory) if directory else state_dir()
    kinds: Mapping[str, UndoFn] | None = None
    errors = 0
    for path in sorted(directory.glob("journal-*.json")):
        lock_path = path.with_suffix(".lock")
        problem = file_problem(path) or (file_problem(lock_path) if lock_path.exists()
                                         else None)
        if problem and not os.path.lexists(path):
            continue                # its run ended and removed it since the listing
        if problem:
            log(f"{path.name}: {problem}: not trusted, left alone (remove it once you know "
                "whose it is)")
            errors += 1
            continue
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    log(f"{path.name}: a stallbench run is still in progress; left alone")
                    continue
                raise
            try:
                data = json.loads(path.read_text() or "{}")
            except FileNotFoundError:
                lock_path.unlink(missing_ok=True)   # made by the open above: its run had ended
                continue
            except json.JSONDecodeError:
                log(f"{path.name}: unreadable journal; removed")
                path.unlink(missing_ok=True)
                lock_path.unlink(missing_ok=True)
                continue
            entries = data.get("entries", []) if isinstance(data, dict) else []
            if entries and kinds is None:
                kinds = undo_kinds() if undo_kinds is not None else UNDO_ACTIONS
            left = []
            for action in reversed(entries):
                refused = entry_problem(action) if isinstance(action, dict) else "not an entry"
                try:
                    if refused:
                        raise UndoRefused(refused)
                    run_undo(action, kinds)
                    log(f"undone: {describe(action)}")
                except UndoRefused as exc:
                    errors += 1
                    log(f"refused {describe(action)}: {exc}; dropped")
                except Exception as exc:  # noqa: BLE001
                    errors += 1
                    left.insert(0, action)
                    log(f"could not undo {describe(action)}: {exc}; kept for the next "
                        "`stallbench cleanup`")
            if left:
                write_json_atomic(path, {**data, "entries": left})
            else:
                path.unlink(missing_ok=True)
                lock_path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return errors


def describe(action: Any) -> str:
    if not isinstance(action, dict):
        return repr(action)[:200]
    kind = action.get("kind", "?")
    details = ", ".join(f"{k}={v}" for k, v in action.items() if k not in ("kind", "id"))
    return f"{kind} ({details})"


# -- generic undo kinds ---------------------------------------------------------------------------


@register_undo("write")
def _undo_write(action: dict[str, Any]) -> None:
    """Write a saved value back (sysctls, scheduler, tracefs switches, nr_hugepages)."""
    with open(action["path"], "w") as f:
        f.write(str(action["value"]))


@register_undo("unlink")
def _undo_unlink(action: dict[str, Any]) -> None:
    Path(action["path"]).unlink(missing_ok=True)


@register_undo("rmdir")
def _undo_rmdir(action: dict[str, Any]) -> None:
    path = Path(action["path"])
    if path.exists():
        path.rmdir()


@register_undo("rmtree")
def _undo_rmtree(action: dict[str, Any]) -> None:
    """Remove a directory tree that stallbench created itself (never a user's directory)."""
    path = Path(action["path"])
    if path.exists():
        shutil.rmtree(path)


@register_undo("umount")
def _undo_umount(action: dict[str, Any]) -> None:
    target = action["target"]
    if _is_mounted(target):
        subprocess.run(["umount", target], check=True, capture_output=True, text=True)


@register_undo("kill")
def _undo_kill(action: dict[str, Any]) -> None:
    """Stop a process stallbench started, if it is still that process (same start time); with
    `group` (a program the supervisor started in its own session), every process still in its
    process group that started no earlier than it, even when the leader is gone."""
    pid = int(action["pid"])
    if pid <= 1 or action.get("start_time") is None:
        what = "process group" if action.get("group") else "pid"
        raise UndoRefused(f"refusing to signal {what} {pid}: the entry names no process of "
                          "stallbench's (pid <= 1, or no start time to tell it by)")
    if action.get("group"):
        _kill_group(pid, action.get("start_time"))
        return
    if not _same_process(pid, action.get("start_time")):
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not _same_process(pid, action.get("start_time")):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _group_members(pgid: int, start_time: str | None) -> list[int]:
    """Live processes in process group `pgid` that started no earlier than its leader did
    (`start_time`): the program's own, not those of a later group that reused the id."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" or int(fields[2]) != pgid:
            continue
        if start_time is not None and int(fields[19]) < int(start_time):
            continue
        found.append(int(entry.name))
    return found


def _kill_group(pgid: int, start_time: str | None) -> None:
    leader = process_start_time(pgid)
    if leader is not None and start_time is not None and leader != start_time:
        return                                  # the pid and group id are someone else's now
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _group_members(pgid, start_time):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        for _ in range(100):
            if not _group_members(pgid, start_time):
                return
            time.sleep(0.05)


def process_start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat: tells a process from a later one with the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _same_process(pid: int, start_time: str | None) -> bool:
    current = process_start_time(pid)
    return current is not None and (start_time is None or current == start_time)


def _is_mounted(target: str) -> bool:
    real = os.path.realpath(target)
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == real for line in f)
    except OSError:
        return False
