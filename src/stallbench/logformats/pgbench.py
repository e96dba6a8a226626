"""pgbench's per-transaction logs (`pgbench --log`: one op `txn` per transaction) and its summary
output (tps, averages, per-script and per-statement latencies).

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

from .loglines import MAX_LATENCY_NS, line_error, parse_int, read_lines
from .samples import Samples

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


_RESULT_PATTERNS = {
    "transactions": (r"number of transactions actually processed:\s*(\d+)", int),
    "failed": (r"number of failed transactions:\s*(\d+)", int),
    "latency_average_ms": (r"latency average\s*=\s*([\d.]+)\s*ms", float),
    "latency_stddev_ms": (r"latency stddev\s*=\s*([\d.]+)\s*ms", float),
    "initial_connection_time_ms": (r"initial connection time\s*=\s*([\d.]+)\s*ms", float),
    "tps": (r"tps\s*=\s*([\d.]+)\s*\(without initial connection time\)", float),
    "scaling_factor": (r"scaling factor:\s*(\d+)", int),
    "skipped": (r"^number of transactions skipped:\s*(\d+)", int),
    "above_latency_limit": (r"^number of transactions above the [\d.]+ ms latency limit:\s*(\d+)",
                            int),
    "schedule_lag_average_ms": (r"schedule lag: avg\s*([\d.]+)", float),
    "schedule_lag_max_ms": (r"schedule lag: avg\s*[\d.]+\s*\(max\s*([\d.]+)\)", float),
}
_SCRIPT_PATTERNS = {
    "weight": (r"^ - weight:\s*(\d+)", int),
    "transactions": (r"^ - (\d+) transactions", int),
    "skipped": (r"^ - number of transactions skipped:\s*(\d+)", int),
    "latency_average_ms": (r"^ - latency average\s*=\s*([\d.]+)\s*ms", float),
}


def parse_pgbench_output(text: str) -> dict[str, Any]:
    """pgbench's own summary (its tps, transaction count and average latency)."""
    summary: dict[str, Any] = {}
    head, *blocks = re.split(r"^SQL script \d+: ", text, flags=re.MULTILINE)
    for key, (pattern, kind) in _RESULT_PATTERNS.items():
        match = re.search(pattern, head, re.MULTILINE)
        if match:
            summary[key] = kind(match.group(1))
    statements = _parse_statement_latencies(head)
    if statements:
        summary["statements"] = statements
    scripts = []
    for block in blocks:                  # several scripts: pgbench reports each on its own
        name, _, body = block.partition("\n")
        script: dict[str, Any] = {"name": name.strip()}
        for key, (pattern, kind) in _SCRIPT_PATTERNS.items():
            match = re.search(pattern, body, re.MULTILINE)
            if match:
                script[key] = kind(match.group(1))
        statements = _parse_statement_latencies(body)
        if statements:
            script["statements"] = statements
        scripts.append(script)
    if scripts:
        summary["scripts"] = scripts
    return summary


def _parse_statement_latencies(text: str) -> list[dict[str, Any]]:
    """The -r block: '  0.123  0  UPDATE pgbench_accounts ...' per statement (ms, failures)."""
    lines = text.splitlines()
    result = []
    inside = False
    for line in lines:
        if line.removeprefix(" - ").startswith("statement latencies in milliseconds"):
            inside = True
            continue
        if inside:
            match = re.match(r"^\s+([\d.]+)\s+(?:(\d+)\s+)?(?:(\d+)\s+)?(\S.*)$", line)
            if not match:
                if line.strip() and not line.startswith(" "):
                    inside = False
                continue
            result.append({"latency_ms": float(match.group(1)),
                           "failures": int(match.group(2) or 0),
                           "statement": match.group(4).strip()})
    return result
