"""diskstats: /proc/diskstats for the block devices under the workload's files.

Table `diskstats`: t_ns, device, and the cumulative kernel counters (see
Documentation/admin-guide/iostats.rst): reads, read_merges, read_sectors, read_ms, writes,
write_merges, write_sectors, write_ms, in_flight (gauge), io_ms, weighted_ms, discards...,
flushes, flush_ms (`DISKSTATS` declares them). analysis/montables.py derives run.json's
`totals` (change per device during the run) and analysis/where/disk.py IOPS, bytes, time per
request, queue depth and utilisation from it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..analysis import monitornames, montables
from ..core.context import RunContext
from ._sampling import SamplerThread, read_text
from .base import COUNTER, GAUGE, KEY, RUN_TIME, Column, Monitor, MonitorResult, TableSchema

FIELDS = ("reads", "read_merges", "read_sectors", "read_ms", "writes", "write_merges",
          "write_sectors", "write_ms", "in_flight", "io_ms", "weighted_ms", "discards",
          "discard_merges", "discard_sectors", "discard_ms", "flushes", "flush_ms")


def _unit(field: str) -> str:
    return ("ms" if field.endswith("_ms") else "512-byte sectors" if field.endswith("_sectors")
            else "requests")


DISKSTATS = TableSchema(
    "diskstats",
    (RUN_TIME, Column("device", KEY, "text", "string"),
     *(Column(f, GAUGE if f == "in_flight" else COUNTER, _unit(f)) for f in FIELDS)),
    totals=montables.diskstats_totals)


def parse_diskstats(text: str) -> dict[str, list[int]]:
    """device -> its counters in FIELDS order (missing trailing fields of old kernels = 0)."""
    result = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        values = [int(x) for x in parts[3:3 + len(FIELDS)]]
        result[parts[2]] = values + [0] * (len(FIELDS) - len(values))
    return result


def device_of_path(path: str | os.PathLike) -> str | None:
    """The block device name holding `path` ("vda", "loop3"), or None (tmpfs, overlay...)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    if major == 0:
        return _device_from_mountinfo(path)
    link = Path(f"/sys/dev/block/{major}:{minor}")
    try:
        return link.resolve().name
    except OSError:
        return None


def _device_from_mountinfo(path: str | os.PathLike) -> str | None:
    """btrfs reports an anonymous st_dev: find the mount source in mountinfo instead."""
    real = os.path.realpath(path)
    best: tuple[int, str] | None = None
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 2:
            continue
        mount_point = fields[4]
        if real == mount_point or real.startswith(mount_point.rstrip("/") + "/"):
            if best is None or len(mount_point) > best[0]:
                best = (len(mount_point), rfields[1])
    if best and best[1].startswith("/dev/"):
        return os.path.basename(os.path.realpath(best[1]))
    return None


class DiskstatsMonitor(Monitor):
    name = monitornames.DISKSTATS

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self._devices: list[str] = []
        self._rows: list[tuple[int, str, list[int]]] = []
        self._sampler: SamplerThread | None = None

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        if read_text("/proc/diskstats") is None:
            return "/proc/diskstats is not readable"
        if not cls._find_devices(ctx):
            return f"no block device found under {ctx.workdir} (tmpfs or network filesystem?)"
        return None

    @staticmethod
    def _find_devices(ctx: RunContext) -> list[str]:
        present = parse_diskstats(read_text("/proc/diskstats") or "")
        devices = [d for d in ctx.env.devices if d in present]
        if not devices:
            found = device_of_path(ctx.workdir)
            devices = [found] if found in present else []
        return devices

    def start(self, ctx: RunContext) -> None:
        self._devices = self._find_devices(ctx)
        self._sampler = SamplerThread(ctx, self.interval_s, self._sample, self.name)
        self._sampler.start()

    def _sample(self, t_ns: int) -> None:
        stats = parse_diskstats(read_text("/proc/diskstats") or "")
        for device in self._devices:
            if device in stats:
                self._rows.append((t_ns, device, stats[device]))

    def stop(self) -> MonitorResult:
        assert self._sampler is not None, "stop() before start()"
        self._sampler.stop()
        columns = list(zip(*[(t, device, *values) for t, device, values in self._rows],
                           strict=True)) if self._rows else [[]] * len(DISKSTATS.columns)
        table = pa.table({c.name: pa.array(values, c.arrow_type())
                          for c, values in zip(DISKSTATS.columns, columns, strict=True)})
        status: dict[str, Any] = {"devices": self._devices}
        if self._sampler.errors:
            status["errors"] = self._sampler.errors
        return MonitorResult(tables={"diskstats": table}, status=status,
                             schemas={"diskstats": DISKSTATS})


MONITORS = {DiskstatsMonitor.name: DiskstatsMonitor}
