"""Samples: the ops read from a log, in compact arrays, on the log's own clock.

`clock` says which: "epoch", "relative" or "ordinal". An importer shifts them so the run starts
at 0; a live workload (fio, pgbench, command) maps epoch times onto the run's CLOCK_MONOTONIC
with clock_offset_ns().
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # numpy loads on first use: workloads import this module
    import numpy as np


def clock_offset_ns() -> int:
    """time.time_ns() - time.monotonic_ns(), from the tightest of a few paired readings."""
    best = None
    offset = 0
    for _ in range(5):
        a = time.monotonic_ns()
        wall = time.time_ns()
        b = time.monotonic_ns()
        if best is None or b - a < best:
            best = b - a
            offset = wall - (a + b) // 2
    return offset


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

    def chunks(self, offset_ns: int = 0, chunk: int = 1 << 20) -> Iterator[tuple[np.ndarray, ...]]:
        """(op codes, worker, start_ns, latency_ns, intended_ns or None) arrays of at most
        `chunk` ops, start_ns shifted by -offset_ns (negative starts become 0): what
        results/opsfile.ops_batches makes record batches of."""
        import numpy as np

        codes, worker, start, latency = self.arrays()
        start = np.maximum(start - offset_ns, 0)
        intended = self.intended()
        if intended is not None:
            intended = np.where(intended >= 0, np.maximum(intended - offset_ns, 0), -1)
        for i in range(0, len(start), chunk):
            yield (codes[i:i + chunk], worker[i:i + chunk], start[i:i + chunk],
                   latency[i:i + chunk], None if intended is None else intended[i:i + chunk])

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

    def progress(self, since: int) -> dict[str, tuple[int, int]]:
        """{op: (total count, max latency among the ops added since `since`)} for the live
        display."""
        import numpy as np

        counts = self.counts()
        codes = np.frombuffer(self.op_codes, dtype=np.int32)[since:]
        latency = np.frombuffer(self.latency_ns, dtype=np.int64)[since:]
        result = {}
        for code, name in enumerate(self.op_names):
            recent = latency[codes == code]
            result[name] = (counts.get(name, 0), int(recent.max()) if len(recent) else 0)
        return result
