"""A private tracefs instance, journaled: shared by the trace monitors and the `command` workload.

Never touches the global buffer: an instance instances/<name> is created after its removal is
recorded in the journal (undo kind "tracefs_instance"), so `stallbench cleanup` removes it after
kill -9. Event triggers are recorded in the same journal entry before they are set: rmdir of an
instance fails while a trigger is active, so the undo switches them off first. tracefs is found
at its usual places or mounted (also journaled, undo kind "umount").

The instance runs on clock `mono`, so its timestamps are CLOCK_MONOTONIC; its trace_pipe is read
without blocking; its per-CPU stats tell how many events were lost.
"""

from __future__ import annotations

import errno
import os
import select
import subprocess
import time
from typing import Any

from .journal import Entry, Journal, register_undo

TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

# journals written before triggers were recorded in the entry: only the trace monitor set one
_LEGACY_TRIGGERS = (("sched/sched_switch", "stacktrace if prev_state & 2"),)


def find_tracefs() -> str | None:
    """The mounted tracefs that supports instances, or None."""
    for path in TRACEFS_CANDIDATES:
        if os.path.isdir(os.path.join(path, "instances")):
            return path
    return None


def tracefs_supported() -> bool:
    """The kernel has tracefs (it may still need mounting)."""
    try:
        with open("/proc/filesystems") as f:
            return "tracefs" in f.read()
    except OSError:
        return False


def mount_tracefs(journal: Journal | None) -> tuple[str, Entry | None]:
    """Find tracefs, or mount it at /sys/kernel/tracing (journaled first). Returns (root, the
    journal entry of the mount or None); undo that entry once the instances are removed."""
    root = find_tracefs()
    if root is not None:
        return root, None
    target = TRACEFS_CANDIDATES[0]
    entry = journal.push("umount", target=target) if journal is not None else None
    try:
        subprocess.run(["mount", "-t", "tracefs", "nodev", target], check=True,
                       capture_output=True, text=True)
    except BaseException:
        if journal is not None and entry is not None:
            journal.forget(entry)
        raise
    return target, entry


def write(path: str, value: str, append: bool = False) -> None:
    """Write a tracefs control file in one write(2)."""
    # os.open, not open(..., "a"): Python seeks to the end on append, which tracefs refuses
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def lost_events(instance_path: str) -> int:
    """Events the instance's ring buffers lost: overwritten (overrun) or refused (dropped)."""
    lost = 0
    per_cpu = os.path.join(instance_path, "per_cpu")
    for cpu in os.listdir(per_cpu) if os.path.isdir(per_cpu) else []:
        try:
            with open(os.path.join(per_cpu, cpu, "stats")) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(":")
            if key.strip() in ("overrun", "dropped events"):
                try:
                    lost += int(value.strip() or 0)
                except ValueError:
                    continue
    return lost


@register_undo("tracefs_instance")
def _undo_instance(action: dict[str, Any]) -> None:
    """Remove a tracefs instance: switch its triggers and events off, then rmdir (frees its
    buffers)."""
    path = action["path"]
    if not os.path.isdir(path):
        return
    triggers = action.get("triggers")
    for event, trigger in _LEGACY_TRIGGERS if triggers is None else triggers:
        trigger_file = os.path.join(path, "events", event, "trigger")
        if os.path.exists(trigger_file):
            try:
                write(trigger_file, f"!{trigger}")
            except OSError:
                pass  # never set (the entry is written before the trigger is)
    try:
        write(os.path.join(path, "tracing_on"), "0")
    except OSError:
        pass
    try:
        os.rmdir(path)
    except OSError:
        # an instance with events still enabled can refuse; switch them all off and retry;
        # one whose files a reader is still closing refuses with EBUSY for a moment
        try:
            write(os.path.join(path, "events/enable"), "0")
        except OSError:
            pass
        for pause in (0.0, 0.05, 0.2, 0.5, 1.0):
            time.sleep(pause)
            try:
                os.rmdir(path)
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
        os.rmdir(path)


class TracefsInstance:
    """One tracefs instance: created (journaled), configured, drained through trace_pipe,
    switched off and removed. Tracing stays off until `on()`."""

    def __init__(self, root: str, name: str, journal: Journal | None, buffer_kb: int):
        self.path = os.path.join(root, "instances", name)
        self._journal = journal
        self._entry = journal.push("tracefs_instance", path=self.path, triggers=[]) \
            if journal is not None else None
        self._triggers: list[list[str]] = []
        self._fd: int | None = None
        try:
            os.mkdir(self.path)
        except BaseException:
            if journal is not None and self._entry is not None:
                journal.forget(self._entry)
                self._entry = None
            raise
        try:
            self.write("tracing_on", "0")
            self.write("trace_clock", "mono")
            self.write("buffer_size_kb", str(buffer_kb))
        except BaseException:
            self.remove()
            raise

    # -- configuration --------------------------------------------------------------------------
    def write(self, name: str, value: str, append: bool = False) -> None:
        write(os.path.join(self.path, name), value, append)

    def has_event(self, event: str) -> bool:
        return os.path.isdir(os.path.join(self.path, "events", event))

    def enable(self, event: str, filter_expr: str | None = None) -> None:
        """Enable one event ("group/name") or a whole group ("group"), optionally filtered."""
        if filter_expr:
            self.write(f"events/{event}/filter", filter_expr)
        self.write(f"events/{event}/enable", "1")

    def set_trigger(self, event: str, trigger: str) -> None:
        self._triggers.append([event, trigger])
        if self._journal is not None and self._entry is not None:
            self._journal.update(self._entry, triggers=list(self._triggers))
        self.write(f"events/{event}/trigger", trigger)

    def set_option(self, name: str, value: str) -> None:
        self.write(f"options/{name}", value)

    def add_pids(self, pids: list[int]) -> None:
        """Add threads to set_event_pid (with event-fork, their children follow)."""
        self.write("set_event_pid", " ".join(map(str, pids)), append=True)

    def event_pids(self) -> set[int]:
        """The pids the kernel filters on now: those added and, with event-fork, their
        children (an exited task leaves the list)."""
        try:
            with open(os.path.join(self.path, "set_event_pid")) as f:
                return {int(word) for word in f.read().split() if word.isdigit()}
        except OSError:
            return set()

    # -- recording ------------------------------------------------------------------------------
    def open_pipe(self) -> None:
        if self._fd is None:
            self._fd = os.open(os.path.join(self.path, "trace_pipe"),
                               os.O_RDONLY | os.O_NONBLOCK)

    def on(self) -> None:
        self.open_pipe()
        self.write("tracing_on", "1")

    def off(self) -> None:
        try:
            self.write("tracing_on", "0")
        except OSError:
            pass

    def wait_readable(self, timeout_s: float) -> None:
        if self._fd is not None:
            select.select([self._fd], [], [], timeout_s)

    def drain(self) -> bytes:
        """Everything trace_pipe holds now (consumed from the ring buffer); never blocks."""
        if self._fd is None:
            return b""
        chunks = []
        while True:
            try:
                data = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    def lost_events(self) -> int:
        return lost_events(self.path)

    def close_pipe(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        """Close trace_pipe and remove the instance (through the journal when there is one)."""
        self.close_pipe()
        if self._journal is not None and self._entry is not None:
            entry, self._entry = self._entry, None
            self._journal.undo(entry)      # an error stays in journal.errors
        else:
            _undo_instance({"path": self.path, "triggers": self._triggers})
