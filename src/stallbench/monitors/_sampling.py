"""Shared machinery for the sampling monitors: a thread that calls `sample()` every interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ..context import RunContext


class SamplerThread:
    """Calls `sample(t_ns)` at start, every `interval_s`, and once more at stop.

    Sampling is aligned to a fixed schedule (no drift); a slow sample skips missed ticks
    instead of bunching them. Exceptions in `sample` are kept, not raised, so that a monitor
    never crashes the run; `errors` holds the first few.
    """

    def __init__(self, ctx: RunContext, interval_s: float, sample: Callable[[int], None],
                 name: str):
        self._ctx = ctx
        self._interval_ns = max(1, int(interval_s * 1e9))
        self._sample = sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"stallbench-{name}",
                                        daemon=True)
        self.errors: list[str] = []
        self.samples = 0

    def start(self) -> None:
        self._call()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._call()

    def _call(self) -> None:
        try:
            self._sample(self._ctx.since_start_ns())
            self.samples += 1
        except Exception as exc:  # noqa: BLE001 - a monitor must never crash the run
            if len(self.errors) < 5:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        next_ns = time.monotonic_ns() + self._interval_ns
        while not self._stop.wait(max(0.0, (next_ns - time.monotonic_ns()) / 1e9)):
            self._call()
            now = time.monotonic_ns()
            next_ns += self._interval_ns
            if next_ns <= now:
                next_ns = now + self._interval_ns - (now - next_ns) % self._interval_ns


def read_text(path: str) -> str | None:
    """A /proc or /sys file's text, or None when it is gone or unreadable."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class RowStore:
    """Samples kept compact: rows (dicts) are buffered and turned into an Arrow table every
    `chunk` rows, so an hour-long run holds ~8 bytes per value instead of a Python dict per
    sample. Columns may appear later in the run (missing values become nulls)."""

    def __init__(self, schema: pa.Schema | None = None, chunk: int = 64):
        self._schema = schema
        self._chunk = chunk
        self._pending: list[dict[str, Any]] = []
        self._tables: list[pa.Table] = []
        self._count = 0
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None

    def append(self, row: dict[str, Any]) -> None:
        if self.first is None:
            self.first = row
        self.last = row
        self._pending.append(row)
        self._count += 1
        if len(self._pending) >= self._chunk:
            self._compact()

    def __len__(self) -> int:
        return self._count

    def _compact(self) -> None:
        if self._pending:
            self._tables.append(pa.Table.from_pylist(self._pending, schema=self._schema))
            self._pending = []

    def table(self) -> pa.Table:
        self._compact()
        if not self._tables:
            return (self._schema or pa.schema([])).empty_table()
        return pa.concat_tables(self._tables, promote_options="default")


def tuples_to_table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    """Rows of plain tuples (in schema order) -> an Arrow table of that schema."""
    columns = list(zip(*rows, strict=True)) if rows else [[]] * len(schema)
    return pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, columns, strict=True)})
