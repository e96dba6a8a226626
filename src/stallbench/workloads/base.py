"""The workload interface. One module per workload in this package; see workloads/__init__.py.

A workload knows nothing about monitors or environments: it is given a RunContext (directory,
duration, child_setup to run in each child process, a ProcessSet to register its pids in) and
returns the operations it recorded as Arrow record batches in store.OPS_SCHEMA.
"""

from __future__ import annotations

import abc
import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from ..context import RunContext
from ..errors import UsageError

# Called by the workload with live per-op progress: {op: (count_total, max_latency_ns_recent)}
ProgressFn = Callable[[dict[str, tuple[int, int]]], None]


@dataclass
class WorkloadResult:
    batches: Iterable[pa.RecordBatch]          # every operation (store.OPS_SCHEMA), streamed
    counted: dict[str, int] = field(default_factory=dict)  # the workers' own count per op
    rusage: dict[str, float] = field(default_factory=dict)  # user_s, system_s, elapsed_s
    extra: dict[str, Any] = field(default_factory=dict)    # -> run.json["workload_summary"]
    status: str = "complete"                   # or "failed" / "interrupted"
    reason: str | None = None


class Workload(abc.ABC):
    name: ClassVar[str]
    ops: ClassVar[tuple[str, ...]]   # ops it can record: an op with no samples still shows
    help: ClassVar[str] = ""
    # seconds run first and left out of the statistics when the plan gives no warm-up
    default_warmup_s: ClassVar[float] = 0.0

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Workload options for `stallbench run NAME`; dest names are the plan-file keys."""

    @classmethod
    @abc.abstractmethod
    def from_options(cls, options: dict[str, Any]) -> Workload:
        """Validate options (from the command line or a plan file); UsageError when bad."""

    @abc.abstractmethod
    def params(self) -> dict[str, Any]:
        """Every parameter, resolved, for run.json."""

    def space_needed(self, memory_available: int) -> int:
        """Bytes the workload's files need in its directory (to size filesystems, check space)."""
        return 0

    def resolve(self, memory_available: int) -> None:
        """Fill defaults that depend on the memory available to the workload (limit or system)."""

    @abc.abstractmethod
    def prepare(self, ctx: RunContext) -> None:
        """Create or reuse the workload's files in ctx.workdir (not timed)."""

    @abc.abstractmethod
    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        """Run for ctx.duration_s (or until ctx.stop is set) and return what was recorded."""


def int_option(options: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    """A whole-number workload option, checked; errors name the command-line flag."""
    flag = "--" + key.replace("_", "-")
    value = options.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UsageError(f"{flag} must be a whole number, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{flag} must be a whole number, got {value!r}") from None
    if not low <= number <= high:
        raise UsageError(f"{flag} must be between {low} and {high}, got {number}")
    return number
