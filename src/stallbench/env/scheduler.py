"""--scheduler NAME: the I/O scheduler of the block device under the workload's directory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.journal import Journal
from .locks import exclusive


def scheduler_file(device: str) -> Path:
    return Path("/sys/block") / device / "queue" / "scheduler"


def read_schedulers(device: str) -> tuple[str | None, list[str]]:
    """(active, offered) for a device, e.g. ('none', ['none', 'mq-deadline', 'kyber', 'bfq'])."""
    try:
        text = scheduler_file(device).read_text().split()
    except OSError:
        return None, []
    active = next((t[1:-1] for t in text if t.startswith("[")), None)
    return active, [t.strip("[]") for t in text]


def check_offered(device: str, name: str) -> None:
    active, offered = read_schedulers(device)
    if not offered:
        raise UsageError(f"--scheduler {name}: block device {device} has no I/O scheduler to set")
    if name not in offered:
        raise UsageError(f"--scheduler {name}: not offered by {device} "
                         f"(offered: {', '.join(offered)})")


@contextlib.contextmanager
def scheduler(name: str | None, devices: list[str], journal: Journal,
              metadata: dict[str, Any]) -> Iterator[None]:
    """Switch the first device that has a scheduler to `name`; restore the old one on exit."""
    if name is None:
        yield
        return
    device = next((d for d in devices if read_schedulers(d)[1]), None)
    if device is None:
        raise UsageError(f"--scheduler {name}: no block device with an I/O scheduler under the "
                         f"workload's directory (devices: {', '.join(devices) or 'none'})")
    check_offered(device, name)
    old, _ = read_schedulers(device)
    with exclusive(f"scheduler:{device}", f"the I/O scheduler of {device}"):
        entry = journal.push("write", path=str(scheduler_file(device)), value=old)
        try:
            try:
                scheduler_file(device).write_text(name)
            except OSError as exc:
                raise UsageError(f"--scheduler {name}: {device} refused it ({exc.strerror})"
                                 ) from None
            metadata.update({"device": device, "old": old, "new": name,
                             "now": read_schedulers(device)[0]})
            yield
        finally:
            journal.undo(entry)
