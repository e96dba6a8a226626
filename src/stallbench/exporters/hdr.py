"""HdrHistogram interval logs (log format 1.3, as written by the Java HistogramLogWriter):
per op and interval a V2 compressed histogram, base64, tagged with the op's name.

Values are latencies in ns; Interval_Max is in ms (the writer's default unit ratio of 1e6).
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Iterable
from datetime import datetime
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.hdr import HdrLayout
from ..core.errors import RunDataError, UsageError
from ..results.rundirs import OPS_FILE
from ..results.store import Run

ENCODING_COOKIE = 0x1C849303 | 0x10
COMPRESSION_COOKIE = 0x1C849304 | 0x10
LOG_VERSION = "1.3"
DEFAULT_HIGHEST_NS = 3600 * 10**9
DIGITS = 3


def _zigzag_leb128(values: Iterable[int]) -> bytes:
    out = bytearray()
    for value in values:
        n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
        for _ in range(8):
            if n < 0x80:
                break
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        else:
            out.append(n & 0xFF)   # the 9th byte carries 8 bits
            continue
        out.append(n)
    return bytes(out)


def encode_counts(counts: np.ndarray, layout: HdrLayout) -> str:
    """A counts array -> the base64 of its V2 compressed encoding ("HISTF...")."""
    nonzero = np.flatnonzero(counts)
    limit = int(nonzero[-1]) + 1 if nonzero.size else 0
    tokens: list[int] = []
    i = 0
    while i < limit:
        count = int(counts[i])
        if count:
            tokens.append(count)
            i += 1
            continue
        j = i
        while j < limit and counts[j] == 0:
            j += 1
        zeros = j - i
        tokens.append(-zeros if zeros > 1 else 0)
        i = j
    payload = _zigzag_leb128(tokens)
    header = struct.pack(">iiiiqqd", ENCODING_COOKIE, len(payload), 0, layout.digits,
                         layout.lowest, layout.highest, 1.0)
    compressed = zlib.compress(header + payload)
    return base64.b64encode(struct.pack(">ii", COMPRESSION_COOKIE, len(compressed))
                            + compressed).decode("ascii")


def _epoch(run: Run) -> float:
    text = run.meta.start_utc
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def write(runs: list[Run], out: TextIO, interval_s: float = 1.0) -> dict[str, int]:
    """One log for one run: every op's histogram per interval (Tag=op), read from ops.parquet
    batch by batch (memory: one counts array per op and interval). Returns ops per op."""
    if len(runs) != 1:
        raise UsageError(f"--format hdr exports one run; this holds {len(runs)}: give a run "
                         f"directory such as {runs[0].path}")
    if interval_s <= 0:
        raise UsageError("--interval must be positive")
    run = runs[0]
    path = run.path / OPS_FILE
    try:
        source = pq.ParquetFile(path)
        column = source.schema_arrow.names.index("latency_ns")
        stats = [source.metadata.row_group(g).column(column).statistics
                 for g in range(source.num_row_groups)]
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RunDataError(f"{path}: damaged ({exc})") from exc
    top = max([DEFAULT_HIGHEST_NS] + [int(st.max) for st in stats if st is not None
                                      and st.has_min_max])
    layout = HdrLayout(1, top, DIGITS)
    step = int(interval_s * 1e9)
    counts: dict[tuple[int, str], np.ndarray] = {}
    peaks: dict[tuple[int, str], int] = {}
    written: dict[str, int] = {}
    try:
        for batch in source.iter_batches(columns=["op", "start_ns", "latency_ns"]):
            names = np.array(batch.column("op").cast(pa.string()).to_pylist(), dtype=object)
            latency = batch.column("latency_ns").to_numpy()
            slot = (batch.column("start_ns").to_numpy() + latency) // step
            for op in set(names.tolist()):
                mine = names == op
                values, slots = latency[mine], slot[mine]
                written[op] = written.get(op, 0) + int(values.size)
                for s_ in np.unique(slots).tolist():
                    part = values[slots == s_]
                    key = (s_, op)
                    counts[key] = counts.get(key, 0) + layout.counts(part)
                    peaks[key] = max(peaks.get(key, 0), int(part.max()))
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{path}: damaged ({exc})") from exc
    start = _epoch(run)
    out.write(f"#[Histogram log format version {LOG_VERSION}]\n")
    out.write(f"#[StartTime: {start:.3f} (seconds since epoch), {run.meta.start_utc}]\n")
    out.write(f"#[stallbench: {run.variant}/{run.workload}/{run.meta.iteration}, "
              "values in ns, Interval_Max in ms]\n")
    out.write('"StartTimestamp","Interval_Length","Interval_Max",'
              '"Interval_Compressed_Histogram"\n')
    for key in sorted(counts):
        s_, op = key
        out.write(f"Tag={_tag(op)},{s_ * interval_s:.3f},{interval_s:.3f},"
                  f"{peaks[key] / 1e6:.3f},{encode_counts(counts[key], layout)}\n")
    return written


def _tag(op: str) -> str:
    return "".join("_" if c in ", \t\r\n" else c for c in op)
