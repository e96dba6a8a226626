"""`stallbench import fio PATH`: fio per-IO latency logs, with fio's JSON output beside them
(the formats, shared with the fio workload, are read by logformats/fio.py).

Without per-IO logs: fio's `--output-format=json+` output (a .json file, or one in the
directory) or histogram logs (`write_hist_log`, *_clat_hist.N.log) are rebuilt into samples
from their latency bins (importers/fiohist.py); run.json then says `histogram_derived` with the
bin error. A rate-limited job's ops are service times only: the import says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..logformats.fio import (
    IO_TABLE,
    IO_TABLE_NOTE,
    RATE_NOTE,
    SYNC_NOTE,
    TIME_NOTE,
    IoColumns,
    find_lat_logs,
    json_summary,
    load_json,
    log_name_job,
    parse_lat_log,
    rate_limited,
)
from ..logformats.loglines import LogError
from ..logformats.samples import Samples
from .imported import Imported


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
        logs = [(path, log_name_job(path.name))]
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
    if rate_limited(json_data):
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
    if rate_limited(json_data):
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
