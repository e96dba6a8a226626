"""What the devices did (diskstats): IOPS, bytes per second, time per request, queue depth,
utilisation, per device as the mean over a variant's runs. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .section import DiskSummary

SECTOR_BYTES = 512


def diskstats_summary(t_ns: np.ndarray, counters: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """One device's time series -> IOPS, bytes/s, time per request, queue depth, utilisation.

    Uses first and last rows (cumulative counters); times in the kernel are ms."""
    t_ns = np.asarray(t_ns, dtype=np.int64)
    if len(t_ns) < 2 or t_ns[-1] <= t_ns[0]:
        return {}
    elapsed_s = (t_ns[-1] - t_ns[0]) / 1e9

    def delta(field: str) -> float:
        values = np.asarray(counters[field], dtype=np.float64)
        return float(values[-1] - values[0])

    reads, writes = delta("reads"), delta("writes")
    read_ms, write_ms = delta("read_ms"), delta("write_ms")
    return {
        "seconds": elapsed_s,
        "reads": int(reads), "writes": int(writes),
        "read_iops": reads / elapsed_s, "write_iops": writes / elapsed_s,
        "iops": (reads + writes) / elapsed_s,
        "read_bytes_per_s": delta("read_sectors") * SECTOR_BYTES / elapsed_s,
        "write_bytes_per_s": delta("write_sectors") * SECTOR_BYTES / elapsed_s,
        "read_ns_per_request": read_ms * 1e6 / reads if reads else None,
        "write_ns_per_request": write_ms * 1e6 / writes if writes else None,
        "ns_per_request": (read_ms + write_ms) * 1e6 / (reads + writes) if reads + writes else None,
        "queue_depth": delta("weighted_ms") / 1e3 / elapsed_s,
        "utilisation": min(1.0, delta("io_ms") / 1e3 / elapsed_s),
    }



def disk_summaries(per_run: Sequence[tuple[np.ndarray, np.ndarray, Mapping[str, np.ndarray]]]
                   ) -> dict[str, DiskSummary]:
    """(device, t_ns, counters) of each run's diskstats table -> per device the mean summary."""
    per_device: dict[str, list[dict[str, Any]]] = {}
    for device, t_ns, counters in per_run:
        device = np.asarray(device).astype(str)
        for name in np.unique(device).tolist():
            rows = device == name
            summary = diskstats_summary(np.asarray(t_ns)[rows],
                                           {c: np.asarray(v)[rows] for c, v in counters.items()})
            if summary:
                per_device.setdefault(name, []).append(summary)
    out = {}
    for name, items in per_device.items():
        mean = {}
        for key in items[0]:
            values = [i[key] for i in items if i.get(key) is not None]
            mean[key] = float(np.mean(values)) if values else None
        out[name] = DiskSummary(**mean)
    return out
