"""fio per-IO latency logs (`write_lat_log` with `log_avg_msec=0`) and fio's JSON output.

A log line is `time_ms, value_ns, ddir, bs[, offset[, prio]]`: the completion time in ms (since
the job started, or the Unix epoch with `log_unix_epoch=1`), the latency in ns (fio >= 3.0),
the direction (0 read, 1 write, 2 trim). fio writes PREFIX_lat.N.log (submission + completion:
what the application waits for), PREFIX_clat.N.log and PREFIX_slat.N.log per job N. We use the
`lat` logs when present (else `clat`): start = completion time - latency, so start times have ms
resolution. fio never logs sync (fsync/fdatasync) per IO: their latencies exist only as totals
and percentiles in the JSON output, which is read into workload_summary when present.

Offset and block size of each IO (log_offset=1) go to a table of their own,
monitors/fio_io.parquet (t_ns = the op's start, op, worker, latency_ns, offset, bs), because
ops.parquet has a fixed schema (store.OPS_SCHEMA) that every reader relies on.

Without per-IO logs: fio's `--output-format=json+` output (a .json file, or one in the
directory) or histogram logs (`write_hist_log`, *_clat_hist.N.log) are rebuilt into samples
from their latency bins (importers/fiohist.py); run.json then says `histogram_derived` with the
bin error. fio (3.33 here) logs no scheduled start for `rate=`/`rate_iops=` jobs, so their ops
are service times only: the import says so (response time would need it, fio#1394).
"""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa
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


def _rate_limited(json_data: dict[str, Any] | None) -> bool:
    for job in (json_data or {}).get("jobs", []):
        options = job.get("job options") if isinstance(job, dict) else None
        if isinstance(options, dict) and any(options.get(k) for k in RATE_KEYS):
            return True
    return False


def _json_beside(directory: Path) -> dict[str, Any] | None:
    for candidate in sorted(directory.glob("*.json")):
        try:
            return load_json(candidate)
        except UsageError:
            continue
    return None


def parse_fio(path: Path) -> Imported:
    """A lat log file, a directory with lat logs (and fio's JSON output if present), a json+
    file, or histogram logs (file or directory)."""
    from . import fiohist  # numpy: only when an import runs (the CLI starts fast)

    path = Path(path)
    json_data = None
    if path.is_dir():
        logs = find_lat_logs(path)
        json_data = _json_beside(path)
        if not logs:
            hist = fiohist.find_hist_logs(path)
            if hist:
                return _from_histograms(path, *fiohist.samples_from_hist_logs(hist),
                                        json_data, [p.name for p, _ in hist])
            if json_data is not None and fiohist.has_json_bins(json_data):
                return _from_histograms(path, *fiohist.samples_from_json_plus(json_data),
                                        json_data, [])
            raise UsageError(f"{path}: no fio latency logs (*_lat.N.log or *_clat.N.log), "
                             "histogram logs (*_clat_hist.N.log) or json+ output here; run fio "
                             "with write_lat_log=NAME and log_avg_msec=0, or "
                             "--output-format=json+")
    elif fiohist.HIST_LOG_RE.match(path.name):
        match = fiohist.HIST_LOG_RE.match(path.name)
        return _from_histograms(path, *fiohist.samples_from_hist_logs(
            [(path, int(match["job"]))]), None, [path.name])
    elif path.suffix == ".json":
        json_data = load_json(path)
        if not fiohist.has_json_bins(json_data):
            raise UsageError(f"{path}: fio JSON without latency bins: run fio with "
                             "--output-format=json+ (or import its per-IO lat logs)")
        return _from_histograms(path, *fiohist.samples_from_json_plus(json_data), json_data, [])
    else:
        match = _LOG_NAME_RE.match(path.name)
        logs = [(path, int(match["job"]) if match else 0)]
    samples = Samples("relative")
    io = IoColumns()
    for log, job in logs:
        parse_lat_log(log, job, samples, io)
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
    if _rate_limited(json_data):
        notes.append(RATE_NOTE)
    kind = "clat" if "_clat." in logs[0][0].name else "lat"
    if kind == "clat":
        notes.append("imported clat logs (completion latency, without submission latency)")
    notes.append(IO_TABLE_NOTE)
    return Imported(
        workload="fio",
        samples=samples,
        params={"source": "fio", "path": str(path.resolve()), "log_kind": kind},
        summary=summary,
        notes=notes,
        monitor_tables={IO_TABLE: io.table(first)},
        offset_ns=first,
    )


IO_TABLE = "fio_io"
IO_TABLE_NOTE = ("offset and block size of every IO are in monitors/fio_io.parquet (t_ns = the "
                 "op's start), not in ops.parquet")


def _from_histograms(path: Path, samples: Samples, info: dict[str, Any],
                     json_data: dict[str, Any] | None, logs: list[str]) -> Imported:
    if not len(samples):
        raise LogError(f"{path}: the fio histograms hold no IOs")
    summary: dict[str, Any] = {"logs": logs} if logs else {}
    if json_data is not None:
        summary.update(json_summary(json_data))
    notes = [f"histogram-derived: rebuilt from {info['source']}; each latency is its bin's "
             f"midpoint, within ±{info['bin_error']:.2%} of the real one (below 128 ns: "
             f"±0.5 ns); {info['times']}, so stalls over time are not meaningful", SYNC_NOTE
             if "sync" not in info.get("samples", {}) else
             "sync (fsync/fdatasync) latencies rebuilt from fio's sync bins as op `sync`"]
    if "last_ms" in info:
        missing = ""
        if json_data is not None:
            logged = sum(samples.counts().values())
            total = sum(int((job.get(d) or {}).get("total_ios") or 0)
                        for job in json_data.get("jobs", []) if isinstance(job, dict)
                        for d in ("read", "write", "trim"))
            missing = f" ({max(0, total - logged)} of {total} IOs per fio's JSON)"
        notes.append("fio writes no histogram line for the last, partial interval: IOs "
                     "completed after each log's last line are missing" + missing)
    if _rate_limited(json_data):
        notes.append(RATE_NOTE)
    ops = sorted({*samples.op_names})
    return Imported(
        workload="fio",
        samples=samples,
        params={"source": "fio", "path": str(path.resolve()),
                "log_kind": "+".join(info["latency"]) + " histogram"},
        ops_declared=ops,
        summary=summary,
        notes=notes,
        duration_s=info.get("duration_s"),
        offset_ns=0,
        meta={"histogram_derived": info},
    )
