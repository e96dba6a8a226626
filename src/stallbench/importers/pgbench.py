"""pgbench per-transaction logs (`pgbench --log`): one op `txn` per transaction.

Line format (PostgreSQL 15): `client_id transaction_no time script_no time_epoch time_us
[schedule_lag] [retries]`, where `time` is the latency in µs (or `skipped` / `failed`) and
time_epoch.time_us is when the transaction finished.

Without a rate (-R) the transaction started at end - time. With a rate, pgbench schedules each
transaction and `time` counts from the *scheduled* start: it includes `schedule_lag`, the wait
between the scheduled and the actual start. Then the op's intended_ns is end - time (the
scheduled start), start_ns is that plus the lag and latency_ns is time - lag (service time), so
that response time (end - intended_ns) is pgbench's `time` and service time is what the server
took. A 7-field line is read as carrying the lag (a --rate log); a log with retries but no rate
(--max-tries without -R) cannot be told apart from the file alone, except where the 7th field
exceeds the time (then it is the retry count).
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
        self.lagged = 0           # completed transactions with a schedule_lag (a --rate run)
        self.scripts: set[int] = set()


def parse_pgbench_log(path: Path, samples: Samples, stats: PgbenchLogStats) -> None:
    """Add one pgbench log's transactions to `samples` (start times: epoch ns)."""
    path = Path(path)
    for lineno, line in read_lines(path):
        parse_pgbench_line(path, lineno, line, samples, stats)


def parse_pgbench_line(path: Path | str, lineno: int, line: str, samples: Samples,
                       stats: PgbenchLogStats, paced: bool | None = None,
                       op_names: list[str] | None = None) -> None:
    """One log line -> one `txn` op (or, with op_names, the op named for its script_no).
    paced: True when the run had a rate (the 7th field is the lag), False when not (it is the
    retry count), None: infer from the line (see the module docstring)."""
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
    script = parse_int(fields[3], path, lineno, line, "script_no")
    epoch = parse_int(fields[4], path, lineno, line, "time_epoch")
    micros = parse_int(fields[5], path, lineno, line, "time_us")
    if micros >= 1_000_000 or epoch > 1 << 40:
        raise line_error(path, lineno, "timestamp out of range", line)
    lag_us = None
    if len(fields) >= 7:
        seventh = parse_int(fields[6], path, lineno, line, "schedule_lag")
        has_lag = paced if paced is not None else (
            len(fields) == 8 or not fields[2].isdigit() or seventh <= int(fields[2]))
        if has_lag:
            lag_us = seventh
            if fields[2].isdigit():     # as pgbench's own average: completed transactions only
                stats.lag_sum_us += seventh
                stats.lagged += 1
        else:
            stats.retries += seventh
    if len(fields) == 8:
        stats.retries += parse_int(fields[7], path, lineno, line, "retries")
    stats.scripts.add(script)
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
    op = op_names[script] if op_names and script < len(op_names) else "txn"
    if lag_us is None:
        samples.add(op, min(client, 1 << 30), end - latency, latency)
        return
    lag = lag_us * _US
    if lag > latency:
        raise line_error(path, lineno, "schedule_lag larger than the transaction's time", line)
    scheduled = end - latency
    samples.add(op, min(client, 1 << 30), scheduled + lag, latency - lag, scheduled)


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
    summary: dict[str, Any] = {"logged_transactions": len(samples), "skipped": stats.skipped,
                               "failed": stats.failed, "retries": stats.retries}
    if stats.lagged:
        summary["schedule_lag_mean_ms"] = stats.lag_sum_us / stats.lagged / 1000
    return summary


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
