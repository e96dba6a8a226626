"""fio's output formats: per-IO latency logs (`write_lat_log` with `log_avg_msec=0`) and its JSON.

A log line is `time_ms, value_ns, ddir, bs[, offset[, prio]]`: the completion time in ms (since
the job started, or the Unix epoch with `log_unix_epoch=1`), the latency in ns (fio >= 3.0),
the direction (0 read, 1 write, 2 trim). fio writes PREFIX_lat.N.log (submission + completion:
what the application waits for), PREFIX_clat.N.log and PREFIX_slat.N.log per job N. We use the
`lat` logs when present (else `clat`): start = completion time - latency, so start times have ms
resolution. fio never logs sync (fsync/fdatasync) per IO: their latencies exist only as totals
and percentiles in the JSON output, which is read into workload_summary when present.

Offset and block size of each IO (log_offset=1) go to a table of their own,
monitors/fio_io.parquet (t_ns = the op's start, op, worker, latency_ns, offset, bs), because
ops.parquet has a fixed schema (opsfile.OPS_SCHEMA) that every reader relies on.

fio's JSON output: a file (load_json; fio may print notes before the object) or, from a running
fio with --status-interval, a stream of objects whose last one is the result (JsonObjects).
fio (3.33 here) logs no scheduled start for `rate=`/`rate_iops=` jobs, so their ops are service
times only (response time would need it, fio#1394).
"""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import UsageError
from .loglines import MAX_LATENCY_NS, line_error, parse_int, read_lines
from .samples import Samples

if TYPE_CHECKING:
    import pyarrow as pa


DDIR_OPS = {0: "read", 1: "write", 2: "trim"}
_LOG_NAME_RE = re.compile(r"^(?P<prefix>.*)_(?P<kind>lat|clat|slat)\.(?P<job>\d+)\.log$")
_MS = 1_000_000

SYNC_NOTE = ("fio does not log sync (fsync/fdatasync) latencies per IO: they are given as "
             "totals and percentiles from fio's JSON (workload_summary.sync), not as ops")
TIME_NOTE = ("fio's per-IO logs have ms timestamps: start times (completion - latency) have ms "
             "resolution; latencies are exact (ns)")


class IoColumns:
    """Offset and block size of every logged IO, beside the ops (see the module docstring)."""

    def __init__(self) -> None:
        self.start_ns = array("q")
        self.latency_ns = array("q")
        self.worker = array("i")
        self.ddir = array("b")
        self.offset = array("q")
        self.bs = array("q")

    def __len__(self) -> int:
        return len(self.start_ns)

    def table(self, offset_ns: int) -> pa.Table:
        import numpy as np
        import pyarrow as pa

        start = np.frombuffer(self.start_ns, dtype=np.int64)
        order = np.argsort(start, kind="stable")
        ops = np.array([DDIR_OPS[d] for d in range(3)])
        offsets = np.frombuffer(self.offset, dtype=np.int64)[order]
        return pa.table({
            "t_ns": pa.array(np.maximum(start[order] - offset_ns, 0)),
            "op": pa.array(ops[np.frombuffer(self.ddir, dtype=np.int8)[order]]
                           ).dictionary_encode(),
            "worker": pa.array(np.frombuffer(self.worker, dtype=np.int32)[order]),
            "latency_ns": pa.array(np.frombuffer(self.latency_ns, dtype=np.int64)[order]),
            "offset": pa.array(offsets, mask=offsets < 0),
            "bs": pa.array(np.frombuffer(self.bs, dtype=np.int64)[order]),
        })


def parse_lat_log(path: Path, worker: int = 0, samples: Samples | None = None,
                  io: IoColumns | None = None) -> Samples:
    """Read one fio latency log into `samples` (times in ns on the log's clock); with `io`,
    also each IO's offset (-1 when the log has none) and block size."""
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
        bs = parse_int(fields[3], path, lineno, line, "block size")
        if latency > MAX_LATENCY_NS or t_ms > 1 << 50:
            raise line_error(path, lineno, "value out of range", line)
        op = DDIR_OPS.get(ddir)
        if op is None:
            raise line_error(path, lineno, f"unknown data direction {ddir}", line)
        samples.add(op, worker, t_ms * _MS - latency, latency)
        if io is not None:
            io.start_ns.append(t_ms * _MS - latency)
            io.latency_ns.append(latency)
            io.worker.append(worker if -(1 << 31) <= worker < 1 << 31 else -1)
            io.ddir.append(ddir)
            io.offset.append(parse_int(fields[4], path, lineno, line, "offset")
                             if len(fields) >= 5 else -1)
            io.bs.append(bs)
    return samples


def log_name_job(name: str) -> int:
    """The job number in a latency log's name (PREFIX_lat.N.log), 0 for another name."""
    match = _LOG_NAME_RE.match(name)
    return int(match["job"]) if match else 0


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


RATE_NOTE = ("a rate-limited fio job (rate/rate_iops): fio logs no scheduled start per IO, so "
             "the ops are service times; response time from the schedule is not available")
RATE_KEYS = ("rate", "rate_iops", "rate_min", "rate_iops_min")


def rate_limited(json_data: dict[str, Any] | None) -> bool:
    for job in (json_data or {}).get("jobs", []):
        options = job.get("job options") if isinstance(job, dict) else None
        if isinstance(options, dict) and any(options.get(k) for k in RATE_KEYS):
            return True
    return False


IO_TABLE = "fio_io"
IO_TABLE_NOTE = ("offset and block size of every IO are in monitors/fio_io.parquet (t_ns = the "
                 "op's start), not in ops.parquet")


class JsonObjects:
    """Splits a stream of fio JSON objects (--status-interval) as its bytes arrive."""

    def __init__(self) -> None:
        self._decoder = json.JSONDecoder()
        self._buffer = ""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The complete fio JSON objects (those with a 'jobs' list) the chunk finished."""
        self._buffer += chunk.decode("utf-8", "replace")
        found = []
        while True:
            start = self._buffer.find("{")
            if start < 0:
                self._buffer = ""
                break
            try:
                obj, end = self._decoder.raw_decode(self._buffer, start)
            except json.JSONDecodeError:
                self._buffer = self._buffer[start:]
                break
            self._buffer = self._buffer[end:]
            if isinstance(obj, dict) and isinstance(obj.get("jobs"), list):
                found.append(obj)
        return found
