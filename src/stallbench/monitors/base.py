"""The monitor interface. One module per monitor in this package; see monitors/__init__.py."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import pyarrow as pa

    from ..context import RunContext


@dataclass
class MonitorResult:
    """What a monitor leaves behind for one run."""

    tables: dict[str, pa.Table] = field(default_factory=dict)  # -> monitors/<key>.parquet
    summary: dict[str, Any] = field(default_factory=dict)      # -> run.json["monitors"][name]
    folded_stacks: str | None = None                           # -> stacks.folded


class Monitor(abc.ABC):
    name: ClassVar[str]
    in_default_set: ClassVar[bool] = False

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        """Why this monitor cannot work on this machine (one line), or None when it can."""
        return None

    @abc.abstractmethod
    def start(self, ctx: RunContext) -> None:
        """Begin observing; called after the run clock started, before the workload starts.

        Processes appear later: sample ctx.processes.pids() each time. Record every change to the
        system through ctx.journal before making it. Must return quickly (use a thread).
        """

    @abc.abstractmethod
    def stop(self) -> MonitorResult:
        """Stop observing, undo own changes, return the data. Must not raise on a dead pid."""
