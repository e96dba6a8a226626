"""Shared pieces of the importers: what an importer read (`Imported`) and writing it as a normal
run directory. The parsers themselves are in stallbench.logformats (the live workloads use the
same ones): they produce `Samples`, start times on the log's own clock, which the importer
shifts so the run starts at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import UsageError
from ..logformats.samples import Samples

if TYPE_CHECKING:   # pyarrow and store load on first use
    import pyarrow as pa


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
    from ..results.runmeta import Status
    from ..results.store import RunWriter

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
        from ..results.opsfile import ops_batches  # pyarrow: when the ops are written

        counts = writer.write_ops(ops_batches(samples.op_names, samples.chunks(offset)))
        for name, table in imported.monitor_tables.items():
            writer.write_monitor(name, table)
    except BaseException as exc:
        writer.finalize(Status.FAILED, f"import failed: {exc}")
        raise
    meta.samples = counts
    meta.counted = samples.counts()
    writer.finalize(Status.COMPLETE)
    return writer.path
