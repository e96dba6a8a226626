"""MMTests pgioperf logs: `op[pid]: avg: X msec; max: Y msec` with an optional ` time: T`.

pgioperf prints one such line per worker each time a batch of operations completes; X and Y are
the average and the maximum latency over that interval, not single operations. The run is
therefore marked `interval_sampled`: ops.parquet holds one row per interval (latency = the
interval's maximum, which is what MMTests reports), and monitors/mmtests_intervals.parquet keeps
both avg and max. Lines of other shapes (MMTests headers, blank lines) are skipped only when they
do not look like a broken sample line.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..logformats.loglines import line_error, parse_number, read_lines
from ..logformats.samples import Samples
from .imported import Imported

_LINE_RE = re.compile(
    r"^\s*(?P<op>[A-Za-z][\w-]*)\[(?P<pid>\d+)\]:\s*avg:\s*(?P<avg>\S+)\s*msec;\s*"
    r"max:\s*(?P<max>\S+)\s*msec(?:\s*;?\s*time:\s*(?P<time>\S+))?\s*$"
)
# something that starts like a sample line but does not parse: an error, not a header
_LOOKS_LIKE_SAMPLE = re.compile(r"^\s*[A-Za-z][\w-]*\[\d*\]?:?\s*avg")
_MS = 1_000_000


def parse_pgioperf(path: Path) -> Imported:
    path = Path(path)
    samples_rows: list[tuple[str, int, float | None, float, float]] = []
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        match = _LINE_RE.match(line)
        if match is None:
            if _LOOKS_LIKE_SAMPLE.match(line) or "msec" in line:
                raise line_error(path, lineno, "not a pgioperf sample line "
                                 "(expected 'op[pid]: avg: X msec; max: Y msec [time: T]')", line)
            continue
        avg = parse_number(match["avg"], path, lineno, line, "avg")
        peak = parse_number(match["max"], path, lineno, line, "max")
        if peak * _MS > 1e18 or avg * _MS > 1e18:
            raise line_error(path, lineno, "latency out of range", line)
        when = None
        if match["time"] is not None:
            when = parse_number(match["time"], path, lineno, line, "time")
            if when > 1e11:
                raise line_error(path, lineno, "time out of range", line)
        pid = int(match["pid"]) if len(match["pid"]) < 10 else -1
        samples_rows.append((match["op"], pid, when, avg, peak))
    if not samples_rows:
        raise line_error(path, 1, "no pgioperf sample lines "
                         "('op[pid]: avg: X msec; max: Y msec') in this file")
    timed = [r for r in samples_rows if r[2] is not None]
    has_time = len(timed) == len(samples_rows)
    samples = Samples("relative" if has_time else "ordinal")
    t_ns = np.empty(len(samples_rows), dtype=np.int64)
    notes = [
        "interval-sampled: imported from an MMTests pgioperf log, where each line is one worker's "
        "interval (average and maximum over a batch of operations), not a single operation; "
        "latency_ns holds the interval maximum (as MMTests reports it), the averages are in "
        "monitors/mmtests_intervals.parquet; sample counts are interval counts, not op counts",
    ]
    first_time = min(r[2] for r in timed) if has_time else 0.0
    if not has_time:
        notes.append("the log has no 'time:' field (or not on every line): start times are the "
                     "line order, not a clock; rates and stalls over time are not meaningful")
    for index, (op, pid, when, _avg, peak) in enumerate(samples_rows):
        latency = int(round(peak * _MS))
        if has_time:
            # the time is printed when the interval ends
            end = int(round((when - first_time) * 1e9))
            start = end - latency
        else:
            start = index
        t_ns[index] = start
        samples.add(op, pid, start, latency)
    offset = min(0, int(t_ns.min())) if has_time else 0
    intervals = pa.table({
        "t_ns": pa.array(t_ns - offset, pa.int64()),
        "op": pa.array([r[0] for r in samples_rows], pa.string()),
        "pid": pa.array([r[1] for r in samples_rows], pa.int64()),
        "avg_ns": pa.array([int(round(r[3] * _MS)) for r in samples_rows], pa.int64()),
        "max_ns": pa.array([int(round(r[4] * _MS)) for r in samples_rows], pa.int64()),
    })
    duration = None
    if has_time:
        duration = max(r[2] for r in timed) - first_time - offset / 1e9
    return Imported(
        workload="mmtests-pgioperf",
        samples=samples,
        params={"source": "mmtests-pgioperf", "path": str(path.resolve()),
                "time_field": has_time},
        ops_declared=sorted({r[0] for r in samples_rows}),
        summary={"intervals": len(samples_rows), "has_time": has_time},
        notes=notes,
        duration_s=duration,
        interval_sampled=True,
        monitor_tables={"mmtests_intervals": intervals},
        offset_ns=offset,
    )
