"""`stallbench import pgbench LOG|DIR`: pgbench per-transaction logs (the format, shared with the
pgbench workload, is read by logformats/pgbench.py; see there for the line format and the
response/service times of a --rate log)."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UsageError
from ..logformats.loglines import LogError
from ..logformats.pgbench import find_logs, parse_logs, stats_summary
from .imported import Imported


def parse_pgbench(path: Path) -> Imported:
    path = Path(path)
    if path.is_dir():
        paths = find_logs(path)
        if not paths:
            raise UsageError(f"{path}: no pgbench logs (NAME_log.PID[.N]) in this directory")
    else:
        paths = [path]
    samples, stats = parse_logs(paths)
    if not len(samples):
        raise LogError(f"{paths[0]}:1: no completed transactions in the pgbench log")
    notes = ["imported from pgbench per-transaction logs: µs resolution"]
    if stats.lagged:
        notes.append("rate-limited pgbench log: txn is service time (from the actual start), "
                     "txn (response) counts from the scheduled start (pgbench's own time)")
    if stats.failed or stats.skipped:
        notes.append(f"{stats.failed} failed and {stats.skipped} skipped transactions are not "
                     "ops (counted in workload_summary)")
    return Imported(
        workload="pgbench",
        samples=samples,
        params={"source": "pgbench", "path": str(path.resolve()),
                "logs": [p.name for p in paths]},
        ops_declared=["txn"],
        summary=stats_summary(stats, samples),
        notes=notes,
    )
