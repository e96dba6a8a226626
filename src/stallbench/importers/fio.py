"""fio per-IO latency logs (`write_lat_log` with `log_avg_msec=0`) and fio's JSON output.

A log line is `time_ms, value_ns, ddir, bs[, offset[, prio]]`: the completion time in ms (since
the job started, or the Unix epoch with `log_unix_epoch=1`), the latency in ns (fio >= 3.0),
the direction (0 read, 1 write, 2 trim). fio writes PREFIX_lat.N.log (submission + completion:
what the application waits for), PREFIX_clat.N.log and PREFIX_slat.N.log per job N. We use the
`lat` logs when present (else `clat`): start = completion time - latency, so start times have ms
resolution. fio never logs sync (fsync/fdatasync) per IO: their latencies exist only as totals
and percentiles in the JSON output, which is read into workload_summary when present.
"""

from __future__ import annotations

import json
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

DDIR_OPS = {0: "read", 1: "write", 2: "trim"}
_LOG_NAME_RE = re.compile(r"^(?P<prefix>.*)_(?P<kind>lat|clat|slat)\.(?P<job>\d+)\.log$")
_MS = 1_000_000
# fio's latency percentiles come from a log-linear histogram with at most this relative error
FIO_HISTOGRAM_ERROR = 1 / 64

SYNC_NOTE = ("fio does not log sync (fsync/fdatasync) latencies per IO: they are given as "
             "totals and percentiles from fio's JSON (workload_summary.sync), not as ops")
TIME_NOTE = ("fio's per-IO logs have ms timestamps: start times (completion - latency) have ms "
             "resolution; latencies are exact (ns)")


def parse_lat_log(path: Path, worker: int = 0, samples: Samples | None = None) -> Samples:
    """Read one fio latency log into `samples` (times in ns on the log's clock)."""
    path = Path(path)
    if samples is None:
        samples = Samples("relative")
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or len(fields) > 7:
            raise line_error(path, lineno, "expected 'time, latency_ns, ddir, bs[, offset[, "
                             "prio]]' (a fio per-IO latency log)", line)
        t_ms = parse_int(fields[0], path, lineno, line, "time")
        latency = parse_int(fields[1], path, lineno, line, "latency")
        ddir = parse_int(fields[2], path, lineno, line, "data direction")
        parse_int(fields[3], path, lineno, line, "block size")
        if latency > MAX_LATENCY_NS or t_ms > 1 << 50:
            raise line_error(path, lineno, "value out of range", line)
        op = DDIR_OPS.get(ddir)
        if op is None:
            raise line_error(path, lineno, f"unknown data direction {ddir}", line)
        samples.add(op, worker, t_ms * _MS - latency, latency)
    return samples


def find_lat_logs(directory: Path, prefix: str | None = None) -> list[tuple[Path, int]]:
    """The lat logs (else clat logs) in a directory, with their job numbers."""
    by_kind: dict[str, list[tuple[Path, int]]] = {"lat": [], "clat": []}
    for path in sorted(Path(directory).iterdir()):
        match = _LOG_NAME_RE.match(path.name)
        if match and match["kind"] in by_kind and (prefix is None or match["prefix"] == prefix):
            by_kind[match["kind"]].append((path, int(match["job"])))
    return by_kind["lat"] or by_kind["clat"]


def load_json(path: Path) -> dict[str, Any]:
    """fio's JSON output; fio may print notes before the JSON object."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from exc
    start = text.find("{")
    if start < 0:
        raise UsageError(f"{path}: no JSON object in this file (fio --output-format=json)")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        line = text.count("\n", 0, start + exc.pos) + 1
        raise UsageError(f"{path}:{line}: malformed fio JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise UsageError(f"{path}: not fio JSON output (no 'jobs' list)")
    return data


def json_summary(data: dict[str, Any]) -> dict[str, Any]:
    """fio's own numbers per job: io counts, lat/clat percentiles, sync totals (ns)."""
    jobs = []
    for job in data.get("jobs", []):
        if not isinstance(job, dict):
            continue
        entry: dict[str, Any] = {"jobname": job.get("jobname"), "error": job.get("error")}
        for ddir in ("read", "write", "trim"):
            stats = job.get(ddir)
            if not isinstance(stats, dict) or not stats.get("total_ios"):
                continue
            entry[ddir] = {
                "total_ios": stats.get("total_ios"),
                "iops": stats.get("iops"),
                "bw_bytes": stats.get("bw_bytes"),
                "lat_ns": _lat_stats(stats.get("lat_ns")),
                "clat_ns": _lat_stats(stats.get("clat_ns")),
            }
        sync = job.get("sync")
        if isinstance(sync, dict):
            lat = sync.get("lat_ns") if isinstance(sync.get("lat_ns"), dict) else {}
            # fio counts fdatasync in lat_ns.N but not in total_ios (which is fsync only)
            count = max(int(sync.get("total_ios") or 0), int(lat.get("N") or 0))
            if count:
                entry["sync"] = {"count": count, "total_ios": sync.get("total_ios"),
                                 "lat_ns": _lat_stats(lat)}
        jobs.append(entry)
    return {"fio_version": data.get("fio version"), "jobs": jobs}


def _lat_stats(stats: Any) -> dict[str, Any] | None:
    if not isinstance(stats, dict):
        return None
    out = {k: stats.get(k) for k in ("min", "max", "mean", "stddev", "N")}
    if isinstance(stats.get("percentile"), dict):
        out["percentile"] = stats["percentile"]
    return out


def parse_fio(path: Path) -> Imported:
    """A lat log file, or a directory with lat logs (and fio's JSON output if present)."""
    path = Path(path)
    json_data = None
    if path.is_dir():
        logs = find_lat_logs(path)
        if not logs:
            raise UsageError(f"{path}: no fio latency logs (*_lat.N.log or *_clat.N.log) here; "
                             "run fio with write_lat_log=NAME and log_avg_msec=0")
        json_files = sorted(path.glob("*.json"))
        for candidate in json_files:
            try:
                json_data = load_json(candidate)
                break
            except UsageError:
                continue
    else:
        match = _LOG_NAME_RE.match(path.name)
        logs = [(path, int(match["job"]) if match else 0)]
    samples = Samples("relative")
    for log, job in logs:
        parse_lat_log(log, job, samples)
    if not len(samples):
        raise LogError(f"{logs[0][0]}:1: the fio latency log is empty")
    first, _ = samples.span_ns()
    clock = "epoch" if first > 1_000_000_000 * 1_000_000_000 else "relative"
    samples.clock = clock
    summary: dict[str, Any] = {"logs": [str(p.name) for p, _ in logs]}
    notes = [TIME_NOTE, SYNC_NOTE]
    if json_data is not None:
        summary.update(json_summary(json_data))
    else:
        notes.append("no fio JSON output found beside the logs: sync latencies unknown")
    kind = "clat" if "_clat." in logs[0][0].name else "lat"
    if kind == "clat":
        notes.append("imported clat logs (completion latency, without submission latency)")
    return Imported(
        workload="fio",
        samples=samples,
        params={"source": "fio", "path": str(path.resolve()), "log_kind": kind},
        summary=summary,
        notes=notes,
    )
