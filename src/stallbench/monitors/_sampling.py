"""Shared machinery for the sampling monitors: a thread that calls `sample()` every interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..core.context import RunContext

# How long a monitor's stop waits for a sample in flight. Its thread's state (the rows, a
# spill file half written, a trace pipe) is the monitor's until it ends: one sample took over
# 10 s in a TCG guest on a loaded host, and a last sample taken beside it wrote a spilled chunk
# twice (a psi table pyarrow could not read back, a run lost).
STOP_WAIT_S = 120.0


def join_sampling(thread: threading.Thread | None) -> None:
    """Wait for a monitor's sampling thread to end; raise when it has not within STOP_WAIT_S:
    what it was writing cannot be read (the runner records the monitor as failed)."""
    if thread is None or thread.ident is None:   # never started
        return
    thread.join(timeout=STOP_WAIT_S)
    if thread.is_alive():
        raise RuntimeError(f"its sampling thread did not end within {STOP_WAIT_S:g} s of the "
                           "workload's end (a sample stuck): its rows are left out")


class SamplerThread:
    """Calls `sample(t_ns)` at start, every `interval_s`, and once more at stop: when the
    workload ends (RunContext.on_end) or the monitor stops, whichever comes first.

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
        self._stopped = False
        self._lock = threading.Lock()
        # the last sample with the last op, before slower end hooks (a tracer turning off)
        ctx.on_end.insert(0, self._stop_at_workload_end)

    def start(self) -> None:
        self._call()
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling after one last sample; later calls do nothing. Raises (every call)
        while the thread is still in a sample after STOP_WAIT_S: no last sample is taken
        beside it, and its rows must not be read."""
        with self._lock:
            if not self._stopped:
                self._stopped = True
                self._stop.set()
                if self._thread.is_alive():
                    join_sampling(self._thread)
                self._call()
            elif self._thread.is_alive():
                join_sampling(self._thread)

    def _stop_at_workload_end(self) -> None:
        try:
            self.stop()
        except RuntimeError:   # the monitor's own stop() raises it again, and fails alone
            pass

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
    """Samples kept out of the Python heap: rows (dicts, or tuples in `schema` order) are
    buffered and every `chunk` rows turned into an Arrow table, which is written to a file in
    `spill_dir` when one is given (memory stays flat however long the run) or kept in memory.
    Columns may appear later in the run (missing values become nulls)."""

    def __init__(self, schema: pa.Schema | None = None, chunk: int = 64,
                 spill_dir: Path | None = None, name: str = "rows",
                 value_type: pa.DataType | None = None):
        self._schema = schema
        # without a schema: every column of this type (no inference, no cast afterwards,
        # which would import pyarrow.compute: 1.6 s in a guest under TCG)
        self._value_type = value_type
        self._chunk = chunk
        self._spill_dir = spill_dir
        self._name = name
        self._pending: list[Any] = []
        self._tables: list[pa.Table] = []
        self._files: list[Path] = []
        self._count = 0
        self.first: Any = None
        self.last: Any = None

    def append(self, row: dict[str, Any] | tuple) -> None:
        if self.first is None:
            self.first = row
        self.last = row
        self._pending.append(row)
        self._count += 1
        if len(self._pending) >= self._chunk:
            self._compact()

    def __len__(self) -> int:
        return self._count

    def __iter__(self):
        """The rows again, as tuples in column order (reads the spilled chunks back)."""
        table = self.table()
        return zip(*(column.to_pylist() for column in table.columns), strict=True)

    def _compact(self) -> None:
        if not self._pending:
            return
        if isinstance(self._pending[0], tuple):
            assert self._schema is not None, "tuple rows need a schema"
            table = tuples_to_table(self._pending, self._schema)
        elif self._schema is not None:
            table = pa.Table.from_pylist(self._pending, schema=self._schema)
        else:   # from_pylist would take the columns of the first row only
            columns = dict.fromkeys(key for row in self._pending for key in row)
            table = pa.table({c: pa.array([row.get(c) for row in self._pending],
                                           type=self._value_type) for c in columns})
        self._pending = []
        if self._spill_dir is None:
            self._tables.append(table)
            return
        self._spill_dir.mkdir(parents=True, exist_ok=True)
        path = self._spill_dir / f"{self._name}-{len(self._files):06d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        self._files.append(path)

    def table(self) -> pa.Table:
        self._compact()
        tables = [pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in self._files]
        tables += self._tables
        if not tables:
            return (self._schema or pa.schema([])).empty_table()
        return pa.concat_tables(tables, promote_options="default")

    def discard(self) -> None:
        """Remove the spilled chunks (after the table has been written out)."""
        for path in self._files:
            path.unlink(missing_ok=True)
        self._files = []


def tuples_to_table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    """Rows of plain tuples (in schema order) -> an Arrow table of that schema."""
    columns = list(zip(*rows, strict=True)) if rows else [[]] * len(schema)
    return pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, columns, strict=True)})


def spill_dir(ctx: RunContext) -> Path:
    """Where monitors spill their samples during a run (removed with the run's spool)."""
    return Path(ctx.run_dir) / ".spool" / "monitors"
