"""A run summary of in-memory arrays, built as a run's is (SummaryBuilder), for the tests that
make their ops by hand."""

from __future__ import annotations

import numpy as np

from stallbench.analysis.summary import RunSummary
from stallbench.analysis.summarybuilder import SummaryBuilder


def summarize_arrays(ops: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]],
                     block_ns: int, warmup_ns: int = 0,
                     worker: dict[str, np.ndarray] | None = None, find_warmup: bool = False,
                     planned_ns: int | None = None) -> RunSummary:
    """A RunSummary of in-memory arrays: {op: (start_ns, latency_ns, intended_ns or None)}."""
    builder = SummaryBuilder(block_ns, warmup_ns, find_warmup, planned_ns)
    for name, (start, latency, intended) in ops.items():
        w = (worker or {}).get(name, np.zeros(len(start), dtype=np.int64))
        builder.add([name], np.zeros(len(start), dtype=np.int64), w, start, latency, intended)
    return builder.finish()
