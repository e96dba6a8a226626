"""pgbench per-transaction logs (`pgbench --log`): one op `txn` per transaction.

Line format (PostgreSQL 15): `client_id transaction_no time script_no time_epoch time_us
[schedule_lag] [retries]`, where `time` is the latency in µs (or `skipped` / `failed`) and
time_epoch.time_us is when the transaction finished; its start is that minus the latency.
Aggregated logs (`--aggregate-interval`) hold no single transactions and are refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .common import (
    MAX_LATENCY_NS,
    Imported,
    LogError,
    Samples,
    line_error,
    parse_int,
    read_lines,
)

_LOG_NAME_RE = re.compile(r"^(?!\.).*_log\.\d+(?:\.\d+)?$")
_US = 1_000


class PgbenchLogStats:
    def __init__(self) -> None:
        self.skipped = 0
        self.failed = 0
        self.retries = 0
        self.lag_sum_us = 0


def parse_pgbench_log(path: Path, samples: Samples, stats: PgbenchLogStats) -> None:
    """Add one pgbench log's transactions to `samples` (start times: epoch ns)."""
    path = Path(path)
    for lineno, line in read_lines(path):
        parse_pgbench_line(path, lineno, line, samples, stats)


def parse_pgbench_line(path: Path | str, lineno: int, line: str, samples: Samples,
                       stats: PgbenchLogStats) -> None:
    fields = line.split()
    if not fields:
        return
    if len(fields) < 6 or len(fields) > 8:
        raise line_error(path, lineno, "expected 'client_id transaction_no latency_us "
                         "script_no time_epoch time_us [lag] [retries]' (pgbench --log)", line)
    if len(fields[0]) >= 9 and fields[0].isdigit() and int(fields[0]) > 100_000_000:
        raise line_error(path, lineno, "this is an aggregated pgbench log "
                         "(--aggregate-interval): per-transaction logs are needed", line)
    client = parse_int(fields[0], path, lineno, line, "client_id")
    parse_int(fields[1], path, lineno, line, "transaction_no")
    parse_int(fields[3], path, lineno, line, "script_no")
    epoch = parse_int(fields[4], path, lineno, line, "time_epoch")
    micros = parse_int(fields[5], path, lineno, line, "time_us")
    if micros >= 1_000_000 or epoch > 1 << 40:
        raise line_error(path, lineno, "timestamp out of range", line)
    if len(fields) >= 7:
        stats.lag_sum_us += parse_int(fields[6], path, lineno, line, "schedule_lag")
    if len(fields) == 8:
        stats.retries += parse_int(fields[7], path, lineno, line, "retries")
    if fields[2] == "skipped":
        stats.skipped += 1
        return
    if fields[2] == "failed":
        stats.failed += 1
        return
    latency = parse_int(fields[2], path, lineno, line, "latency") * _US
    if latency > MAX_LATENCY_NS:
        raise line_error(path, lineno, "latency out of range", line)
    end = (epoch * 1_000_000 + micros) * _US
    samples.add("txn", min(client, 1 << 30), end - latency, latency)


def find_logs(directory: Path) -> list[Path]:
    return [p for p in sorted(Path(directory).iterdir())
            if p.is_file() and _LOG_NAME_RE.match(p.name)]


def parse_logs(paths: list[Path]) -> tuple[Samples, PgbenchLogStats]:
    samples = Samples("epoch")
    stats = PgbenchLogStats()
    for path in paths:
        parse_pgbench_log(path, samples, stats)
    return samples, stats


def stats_summary(stats: PgbenchLogStats, samples: Samples) -> dict[str, Any]:
    return {"logged_transactions": len(samples), "skipped": stats.skipped,
            "failed": stats.failed, "retries": stats.retries}


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
