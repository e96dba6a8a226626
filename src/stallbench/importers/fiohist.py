"""fio latency histograms -> samples: `--output-format=json+` bins and `write_hist_log` logs.

fio keeps completion latencies in a log-linear histogram (stat.h: FIO_IO_U_PLAT_BITS = 6, 29
groups of 64 buckets, 1856 in all). Below 128 ns a bucket is 1 ns wide; above, the buckets of a
group [2^(e+6), 2^(e+7)) are 2^e wide, so a bucket spans at most 1/64 of its lower edge. fio
names each bucket by its midpoint (plat_idx_to_val) and reports percentiles as the midpoint of
the bucket where the cumulative count first reaches the rank: exactly what numpy's
"inverted_cdf" gives on samples rebuilt as "count times the midpoint". Every rebuilt sample is
within half a bucket of the true latency: at most 1/128 relative (BIN_ERROR).

json+ (`jobs[].read|write|trim|sync.lat_ns|clat_ns.bins`: {midpoint_ns: count}) has no times:
the rebuilt samples are spread evenly over the job's runtime in a fixed pseudo-random order, so
counts and rates are right but stalls over time mean nothing (said in the run's notes).
Histogram logs (`write_hist_log=PREFIX`, `log_hist_msec=N`, PREFIX_clat_hist.J.log) have one
line per interval, `time_ms, ddir, bs, count_0, ..., count_1855`, the counts of that interval
only (fio subtracts the previous line); `log_hist_coarseness=C` merges 2^C buckets per column.
Their samples are spread evenly over each interval. fio (3.33) writes no line for the last,
partial interval: the IOs that completed after the last line's time are not in the log (the
import says so, with their number when fio's JSON output lies beside the logs).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..logformats.fio import DDIR_OPS
from ..logformats.loglines import MAX_LATENCY_NS, LogError, line_error, parse_int, read_lines
from ..logformats.samples import Samples

PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_NR = 29 * PLAT_VAL
BIN_ERROR = 1 / (2 * PLAT_VAL)           # half a bucket, relative to its lower edge (>= 128 ns)
JSON_DDIRS = ("read", "write", "trim", "sync")
HIST_LOG_RE = re.compile(r"^(?P<prefix>.*)_clat_hist\.(?P<job>\d+)\.log$")
_MS = 1_000_000
_SEED = 20240601


def bucket_lower(index: np.ndarray | int) -> np.ndarray:
    """Lower edge in ns of fio's plat bucket(s)."""
    idx = np.asarray(index, dtype=np.int64)
    error_bits = np.maximum((idx >> PLAT_BITS) - 1, 0)
    base = np.where(idx < 2 * PLAT_VAL, 0, np.int64(1) << (error_bits + PLAT_BITS))
    k = idx % PLAT_VAL
    return np.where(idx < 2 * PLAT_VAL, idx, base + k * (np.int64(1) << error_bits))


def bucket_width(index: np.ndarray | int) -> np.ndarray:
    idx = np.asarray(index, dtype=np.int64)
    return np.where(idx < 2 * PLAT_VAL, 1, np.int64(1) << np.maximum((idx >> PLAT_BITS) - 1, 0))


def column_bounds(columns: int) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) ns of each column of a histogram log with `columns` columns (1856 >> C)."""
    if columns <= 0 or PLAT_NR % columns or (PLAT_NR // columns) & (PLAT_NR // columns - 1):
        raise ValueError(f"{columns} histogram columns: expected {PLAT_NR} >> C")
    stride = PLAT_NR // columns
    first = np.arange(columns, dtype=np.int64) * stride
    last = first + stride - 1
    return bucket_lower(first), bucket_lower(last) + bucket_width(last)


def _spread(samples: Samples, op: str, worker: int, values: np.ndarray, begin_ns: int,
            end_ns: int, rng: np.random.Generator) -> None:
    """Add `values` as ops completing evenly over [begin, end] in a shuffled order."""
    n = len(values)
    if not n:
        return
    values = rng.permutation(values)
    ends = begin_ns + ((np.arange(1, n + 1, dtype=np.float64) / n) * (end_ns - begin_ns)
                       ).astype(np.int64)
    for latency, end in zip(values.tolist(), ends.tolist(), strict=True):
        samples.add(op, worker, end - latency, latency)


def json_bins(stats: Any) -> tuple[str, dict[int, int]] | None:
    """('lat'|'clat', {midpoint_ns: count}) of one direction of a json+ job, or None."""
    if not isinstance(stats, dict):
        return None
    for kind in ("lat_ns", "clat_ns"):        # total latency when fio has its bins
        entry = stats.get(kind)
        if isinstance(entry, dict) and isinstance(entry.get("bins"), dict) and entry["bins"]:
            bins = {}
            for key, count in entry["bins"].items():
                if not str(key).isdigit() or not isinstance(count, int) or count < 0 \
                        or int(key) > MAX_LATENCY_NS:
                    raise LogError(f"fio json+: bin {key!r}: {count!r} is not a count")
                bins[int(key)] = count
            return kind[:-3], bins
    return None


def has_json_bins(data: dict[str, Any]) -> bool:
    return any(json_bins(job.get(d)) for job in data.get("jobs", []) if isinstance(job, dict)
               for d in JSON_DDIRS)


def samples_from_json_plus(data: dict[str, Any]) -> tuple[Samples, dict[str, Any]]:
    """Rebuild every IO of a json+ output from its bins; worker = job index (1-based)."""
    samples = Samples("relative")
    rng = np.random.default_rng(_SEED)
    kinds: set[str] = set()
    longest_ms = 0
    counts: dict[str, int] = {}
    for number, job in enumerate(data.get("jobs", []), start=1):
        if not isinstance(job, dict):
            continue
        runtime_ms = int(job.get("job_runtime") or job.get("elapsed", 0) * 1000 or 1000)
        longest_ms = max(longest_ms, runtime_ms)
        for ddir in JSON_DDIRS:
            found = json_bins(job.get(ddir))
            if found is None:
                continue
            kind, bins = found
            kinds.add(kind)
            values = np.repeat(np.fromiter(bins, dtype=np.int64, count=len(bins)),
                               np.fromiter(bins.values(), dtype=np.int64, count=len(bins)))
            counts[ddir] = counts.get(ddir, 0) + len(values)
            _spread(samples, ddir, number, values, 0, runtime_ms * _MS, rng)
    info = {"source": "fio json+ latency bins", "latency": sorted(kinds),
            "bin_error": BIN_ERROR, "samples": counts, "times": "spread evenly over each "
            "job's runtime in a shuffled order (json+ has no times)",
            "duration_s": longest_ms / 1000}
    return samples, info


def parse_hist_log(path: Path, worker: int, samples: Samples,
                   rng: np.random.Generator) -> dict[str, Any]:
    """Add one histogram log's IOs to `samples` (times: the log's, ms since the job start)."""
    path = Path(path)
    previous_ms: dict[int, int] = {}
    bounds: tuple[np.ndarray, np.ndarray] | None = None
    mids: np.ndarray | None = None
    columns = 0
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:
            raise line_error(path, lineno, "expected 'time_ms, ddir, bs, counts...' "
                             "(a fio write_hist_log file)", line)
        if bounds is None:
            columns = len(fields) - 3
            try:
                bounds = column_bounds(columns)
            except ValueError as exc:
                raise line_error(path, lineno, str(exc), line) from None
            mids = bounds[0] + (bounds[1] - bounds[0]) // 2     # fio's plat_idx_to_val
        elif len(fields) - 3 != columns:
            raise line_error(path, lineno, f"{len(fields) - 3} histogram columns, the first "
                             f"line had {columns}", line)
        t_ms = parse_int(fields[0], path, lineno, line, "time")
        ddir = parse_int(fields[1], path, lineno, line, "data direction")
        parse_int(fields[2], path, lineno, line, "block size")
        if ddir not in DDIR_OPS:
            raise line_error(path, lineno, f"unknown data direction {ddir}", line)
        counts = np.array([parse_int(f, path, lineno, line, "count") for f in fields[3:]],
                          dtype=np.int64)
        begin = previous_ms.get(ddir, 0)
        previous_ms[ddir] = t_ms
        assert mids is not None
        _spread(samples, DDIR_OPS[ddir], worker, np.repeat(mids, counts), begin * _MS,
                t_ms * _MS, rng)
    if bounds is None:
        raise line_error(path, 1, "the fio histogram log is empty")
    stride = PLAT_NR // columns
    wide = bounds[0] >= 2 * PLAT_VAL        # below 128 ns the error is absolute (½ bucket)
    return {"columns": columns, "coarseness": stride.bit_length() - 1,
            "last_ms": max(previous_ms.values()),
            "bin_error": float(np.max((bounds[1][wide] - bounds[0][wide]) / 2
                                      / bounds[0][wide]))}


def find_hist_logs(directory: Path) -> list[tuple[Path, int]]:
    found = []
    for path in sorted(Path(directory).iterdir()):
        match = HIST_LOG_RE.match(path.name)
        if match and path.is_file():
            found.append((path, int(match["job"])))
    return found


def samples_from_hist_logs(logs: list[tuple[Path, int]]) -> tuple[Samples, dict[str, Any]]:
    samples = Samples("relative")
    rng = np.random.default_rng(_SEED)
    per_log = [parse_hist_log(path, job, samples, rng) for path, job in logs]
    info = {"source": "fio histogram logs (write_hist_log)", "latency": ["clat"],
            "bin_error": max(p["bin_error"] for p in per_log),
            "coarseness": sorted({p["coarseness"] for p in per_log}),
            "last_ms": {str(job): p["last_ms"] for (_, job), p in zip(logs, per_log,
                                                                       strict=True)},
            "times": "spread evenly over each logged interval"}
    return samples, info
