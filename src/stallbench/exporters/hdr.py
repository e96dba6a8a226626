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

from ..analysis.hdr import HdrLayout
from ..errors import UsageError
from ..store import Run

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
    text = run.meta.get("start_utc")
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def write(runs: list[Run], out: TextIO, interval_s: float = 1.0,
          ops: list[str] | None = None) -> dict[str, int]:
    """One log for one run: every op's histogram per interval (Tag=op). Returns ops per op."""
    if len(runs) != 1:
        raise UsageError(f"--format hdr exports one run; this holds {len(runs)}: give a run "
                         f"directory such as {runs[0].path}")
    if interval_s <= 0:
        raise UsageError("--interval must be positive")
    run = runs[0]
    arrays = run.op_arrays()
    chosen = [op for op in arrays if ops is None or op in ops]
    highest = max([DEFAULT_HIGHEST_NS] + [int(arrays[op].latency_ns.max()) for op in chosen
                                          if arrays[op].latency_ns.size])
    layout = HdrLayout(1, highest, DIGITS)
    start = _epoch(run)
    out.write(f"#[Histogram log format version {LOG_VERSION}]\n")
    out.write(f"#[StartTime: {start:.3f} (seconds since epoch), {run.meta.get('start_utc')}]\n")
    out.write(f"#[stallbench: {run.variant}/{run.workload}/{run.meta.get('iteration')}, "
              "values in ns, Interval_Max in ms]\n")
    out.write('"StartTimestamp","Interval_Length","Interval_Max",'
              '"Interval_Compressed_Histogram"\n')
    step = int(interval_s * 1e9)
    written: dict[str, int] = {}
    lines: list[tuple[int, str, str]] = []
    for op in chosen:
        a = arrays[op]
        if not a.latency_ns.size:
            continue
        end = a.start_ns + a.latency_ns
        slot = end // step
        order = np.argsort(slot, kind="stable")
        slots, first = np.unique(slot[order], return_index=True)
        bounds = list(first) + [len(order)]
        for k, s in enumerate(slots):
            values = a.latency_ns[order[bounds[k]:bounds[k + 1]]]
            encoded = encode_counts(layout.counts(values), layout)
            text = (f"Tag={_tag(op)},{s * interval_s:.3f},{interval_s:.3f},"
                    f"{values.max() / 1e6:.3f},{encoded}\n")
            lines.append((int(s), op, text))
        written[op] = int(a.latency_ns.size)
    for _slot, _op, text in sorted(lines):
        out.write(text)
    return written


def _tag(op: str) -> str:
    return "".join("_" if c in ", \t\r\n" else c for c in op)
