"""Shared pieces of the importers: reading foreign logs line by line with errors that name the
file and line, collecting samples, and writing them as a normal run directory.

Parsers produce `Samples`: per operation its name, worker, start and latency in nanoseconds, with
start times on the log's own clock (`clock` says which: "epoch", "relative" or "ordinal"). The
importer shifts them so the run starts at 0; the workloads (fio, pgbench, command) map epoch
times onto the run's CLOCK_MONOTONIC instead.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:   # numpy, pyarrow and store load on first use: workloads import this module
    import numpy as np
    import pyarrow as pa

MAX_LINE_SHOWN = 80
# A sane upper bound for one operation's latency: anything larger is a parse error, not data.
MAX_LATENCY_NS = 10 * 86400 * 1_000_000_000


class LogError(UsageError):
    """A line of a foreign log that cannot be read."""


def line_error(path: Path | str, lineno: int, what: str, line: str = "") -> LogError:
    shown = line.strip()
    if len(shown) > MAX_LINE_SHOWN:
        shown = shown[:MAX_LINE_SHOWN] + "..."
    suffix = f": {shown!r}" if shown else ""
    return LogError(f"{path}:{lineno}: {what}{suffix}")


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without newline) of a text file; undecodable bytes become U+FFFD."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            for lineno, line in enumerate(f, 1):
                if "\x00" in line:
                    raise line_error(path, lineno, "binary data (NUL byte) in a text log")
                yield lineno, line.rstrip("\r\n")
    except IsADirectoryError as exc:
        raise UsageError(f"{path}: is a directory, expected a log file") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from exc


def parse_number(text: str, path: Path | str, lineno: int, line: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise line_error(path, lineno, f"{what} {text!r} is not a number", line) from None
    if not math.isfinite(value) or value < 0:
        raise line_error(path, lineno, f"{what} {text!r} is out of range", line)
    return value


def parse_int(text: str, path: Path | str, lineno: int, line: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise line_error(path, lineno, f"{what} {text!r} is not an integer", line) from None
    if value < 0 or value > 1 << 62:
        raise line_error(path, lineno, f"{what} {text!r} is out of range", line)
    return value


class Samples:
    """Operations collected from a log, in compact arrays."""

    def __init__(self, clock: str = "relative"):
        self.clock = clock                  # "epoch", "relative" or "ordinal"
        self.op_names: list[str] = []
        self._codes: dict[str, int] = {}
        self.op_codes = array("i")
        self.worker = array("i")
        self.start_ns = array("q")
        self.latency_ns = array("q")
        self.intended_ns: array | None = None   # planned starts (paced ops), -1: not paced

    def add(self, op: str, worker: int, start_ns: int, latency_ns: int,
            intended_ns: int | None = None) -> None:
        code = self._codes.get(op)
        if code is None:
            code = self._codes[op] = len(self.op_names)
            self.op_names.append(op)
        self.op_codes.append(code)
        self.worker.append(worker if -(1 << 31) <= worker < 1 << 31 else -1)
        self.start_ns.append(start_ns)
        self.latency_ns.append(latency_ns)
        if intended_ns is not None and self.intended_ns is None:
            self.intended_ns = array("q", [-1]) * (len(self.latency_ns) - 1)
        if self.intended_ns is not None:
            self.intended_ns.append(-1 if intended_ns is None else intended_ns)

    def __len__(self) -> int:
        return len(self.latency_ns)

    def extend(self, other: Samples) -> None:
        import numpy as np

        remap = np.array([self._code_for(name) for name in other.op_names] or [0], dtype=np.int32)
        codes = np.frombuffer(other.op_codes, dtype=np.int32) if len(other) else np.empty(0, int)
        if other.intended_ns is not None and self.intended_ns is None:
            self.intended_ns = array("q", [-1]) * len(self.latency_ns)
        if self.intended_ns is not None:
            self.intended_ns.extend(other.intended_ns if other.intended_ns is not None
                                    else array("q", [-1]) * len(other))
        self.op_codes.extend(remap[codes].tolist())
        self.worker.extend(other.worker)
        self.start_ns.extend(other.start_ns)
        self.latency_ns.extend(other.latency_ns)

    def _code_for(self, op: str) -> int:
        if op not in self._codes:
            self._codes[op] = len(self.op_names)
            self.op_names.append(op)
        return self._codes[op]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(op_codes, worker, start_ns, latency_ns) sorted by start time."""
        import numpy as np

        codes = np.frombuffer(self.op_codes, dtype=np.int32).copy()
        worker = np.frombuffer(self.worker, dtype=np.int32).copy()
        start = np.frombuffer(self.start_ns, dtype=np.int64).copy()
        latency = np.frombuffer(self.latency_ns, dtype=np.int64).copy()
        order = np.argsort(start, kind="stable")
        return codes[order], worker[order], start[order], latency[order]

    def intended(self) -> np.ndarray | None:
        """Planned starts in the order of arrays() (-1 where an op was not paced), or None."""
        if self.intended_ns is None:
            return None
        import numpy as np

        start = np.frombuffer(self.start_ns, dtype=np.int64)
        order = np.argsort(start, kind="stable")
        return np.frombuffer(self.intended_ns, dtype=np.int64)[order]

    def counts(self) -> dict[str, int]:
        import numpy as np

        codes = np.frombuffer(self.op_codes, dtype=np.int32)
        if not len(codes):
            return {}
        bins = np.bincount(codes, minlength=len(self.op_names))
        return {name: int(bins[i]) for i, name in enumerate(self.op_names) if bins[i]}

    def batches(self, offset_ns: int = 0, chunk: int = 1 << 20) -> Iterator[pa.RecordBatch]:
        """Ops record batches with start_ns shifted by -offset_ns (negative starts become 0)."""
        import numpy as np

        from ..store import ops_batch

        codes, worker, start, latency = self.arrays()
        start = np.maximum(start - offset_ns, 0)
        intended = self.intended()
        if intended is not None:
            intended = np.where(intended >= 0, np.maximum(intended - offset_ns, 0), -1)
        for i in range(0, len(start), chunk):
            yield ops_batch(self.op_names, codes[i:i + chunk], worker[i:i + chunk],
                            start[i:i + chunk], latency[i:i + chunk],
                            None if intended is None else intended[i:i + chunk])

    def span_ns(self) -> tuple[int, int]:
        """(first start, last end) on the log's clock; (0, 0) when empty."""
        import numpy as np

        if not len(self):
            return 0, 0
        start = np.frombuffer(self.start_ns, dtype=np.int64)
        end = start + np.frombuffer(self.latency_ns, dtype=np.int64)
        first = int(start.min())
        if self.intended_ns is not None:       # a planned start can precede the first start
            planned = np.frombuffer(self.intended_ns, dtype=np.int64)
            planned = planned[planned >= 0]
            if planned.size:
                first = min(first, int(planned.min()))
        return first, int(end.max())


@dataclass
class Imported:
    """What an importer read, ready to be written as a run."""

    workload: str
    samples: Samples
    params: dict[str, Any]
    ops_declared: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rusage: dict[str, float] | None = None
    duration_s: float | None = None        # None: derived from the samples' span
    interval_sampled: bool = False
    monitor_tables: dict[str, pa.Table] = field(default_factory=dict)
    offset_ns: int | None = None            # subtracted from start times; None: first start
    meta: dict[str, Any] = field(default_factory=dict)   # more run.json keys (histogram_derived)


def write_run(imported: Imported, results: Path, variant: str,
              workload: str | None = None) -> Path:
    """Write an imported log as RESULTS/<variant>/<workload>/<n>/ and return that directory."""
    from ..runmeta import Status
    from ..store import RunWriter

    samples = imported.samples
    if not len(samples):
        raise UsageError("no operations found in the log: nothing to import")
    first, last = samples.span_ns()
    offset = first if imported.offset_ns is None else imported.offset_ns
    duration = imported.duration_s
    if duration is None:
        duration = (last - offset) / 1e9 if samples.clock != "ordinal" else None
    writer = RunWriter(results, variant, workload or imported.workload, imported.params)
    meta = writer.meta
    meta.imported = True
    meta.ops_declared = sorted(set(imported.ops_declared) | set(samples.op_names))
    meta.duration_s = duration
    meta.interval_sampled = imported.interval_sampled
    meta.workload_summary = imported.summary
    meta.update(imported.meta)
    if imported.rusage:
        meta.rusage = imported.rusage
    for note in imported.notes:
        writer.note(note)
    writer.save()
    try:
        counts = writer.write_ops(samples.batches(offset))
        for name, table in imported.monitor_tables.items():
            writer.write_monitor(name, table)
    except BaseException as exc:
        writer.finalize(Status.FAILED, f"import failed: {exc}")
        raise
    meta.samples = counts
    meta.counted = samples.counts()
    writer.finalize(Status.COMPLETE)
    return writer.path
