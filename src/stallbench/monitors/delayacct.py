"""kernel.task_delayacct, shared by the delay monitors of every stallbench process.

It is switched on for a run and restored when the last delay monitor on the machine is done:
each one holds a shared flock on /run/stallbench/delayacct.users while it runs (so one run
finishing does not switch accounting off under another), and the value found before the first
one switched it on is kept in delayacct.original. Whoever leaves last (a monitor's stop, or
`stallbench cleanup` for a killed run: journal kind "delayacct") finds no other holder and
writes that value back. The directory is machine-wide, not the journal's $STALLBENCH_STATE_DIR,
because the sysctl is.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.journal import register_undo, state_dir
from ._sampling import read_text

DELAYACCT_SYSCTL = "/proc/sys/kernel/task_delayacct"

MACHINE_STATE_DIR = Path("/run/stallbench")


def delayacct_dir() -> Path:
    """Where the delay monitors of all stallbench processes meet (machine-wide)."""
    try:
        MACHINE_STATE_DIR.mkdir(parents=True, exist_ok=True)
    except OSError:
        return state_dir()
    return MACHINE_STATE_DIR if os.access(MACHINE_STATE_DIR, os.W_OK) else state_dir()


@contextmanager
def _delayacct_mutex(directory: Path) -> Iterator[None]:
    """Serializes switching on and the last-one-out check among stallbench processes."""
    fd = os.open(directory / "delayacct.mutex", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class DelayacctClaim:
    """This process needs kernel.task_delayacct=1 while the claim is held."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.id = f"{os.getpid()}-{time.monotonic_ns()}"
        self._fd = -1

    def acquire(self) -> bool:
        """Hold the claim and switch accounting on; True when this call switched it on."""
        with _delayacct_mutex(self.directory):
            fd = os.open(self.directory / "delayacct.users",
                         os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                current = (read_text(DELAYACCT_SYSCTL) or "0").strip()
                if current == "1":
                    # on already: by the user (nothing saved) or by another stallbench process,
                    # live or killed (saved: the last one out restores it)
                    self._fd = fd
                    _HELD[self.id] = self
                    return False
                saved = self.directory / "delayacct.original"
                temporary = saved.with_suffix(f".{os.getpid()}.tmp")
                temporary.write_text(current)
                os.replace(temporary, saved)
                with open(DELAYACCT_SYSCTL, "w") as f:
                    f.write("1")
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            _HELD[self.id] = self
            return True

    def drop(self) -> None:
        """Give the claim up (without restoring: see release_delayacct)."""
        _HELD.pop(self.id, None)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# this process's claims by id: the journal's undo (at the end of a run whose monitor never got
# to stop) drops its own claim before looking for other holders
_HELD: dict[str, DelayacctClaim] = {}


def _drop_claims_in_child() -> None:
    # a forked workload worker would otherwise share the claim's lock and, outliving a killed
    # run, keep `stallbench cleanup` from restoring the sysctl
    for claim in list(_HELD.values()):
        claim.drop()


os.register_at_fork(after_in_child=_drop_claims_in_child)


def release_delayacct(directory: Path) -> bool:
    """Restore kernel.task_delayacct to its value before stallbench switched it on, if no live
    process holds a claim any more; True when it wrote the value back."""
    with _delayacct_mutex(directory):
        fd = os.open(directory / "delayacct.users", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC,
                     0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another run still needs it: it restores the value when done
            saved = directory / "delayacct.original"
            original = read_text(str(saved))
            if original is None or not original.strip():
                return False
            with open(DELAYACCT_SYSCTL, "w") as f:
                f.write(original.strip())
            saved.unlink()
            return True
        finally:
            os.close(fd)


@register_undo("delayacct")
def _undo_delayacct(action: dict[str, Any]) -> None:
    claim = _HELD.get(action.get("claim", ""))
    if claim is not None:
        claim.drop()
    release_delayacct(Path(action["dir"]))
