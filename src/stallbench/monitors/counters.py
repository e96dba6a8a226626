"""counters: /proc/vmstat, /proc/meminfo and the memory cgroup's statistics as a time series.

One wide table `counters`: `t_ns` plus one int64 column per value, named with its source as
prefix: `vmstat.pgscan_direct`, `meminfo.Dirty` (bytes), `memcg.pgmajfault`, `memcg.failcnt`,
`memcg.events.max` (cgroup v2). `COUNTERS` declares which are cumulative counters and their
units; run.json's `deltas` (start-to-end change of every counter that moved; gauges such as
nr_dirty or meminfo are left to the table) is analysis/montables.py's.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from ..analysis import monitornames, montables
from ..core.context import RunContext
from ._sampling import RowStore, SamplerThread, read_text, spill_dir
from .base import COUNTER, GAUGE, RUN_TIME, Column, Monitor, MonitorResult, TableSchema

# memory.stat keys of cgroup v1/v2 that are cumulative event counts (the others are sizes)
_MEMCG_COUNTER_PREFIXES = ("pg", "workingset_", "thp_", "zswpin", "zswpout", "total_pg",
                           "total_workingset_")
# units of the event counters (Documentation/admin-guide/mm, mm/vmstat.c): vmstat's
# pgpgin/pgpgout count KiB; page scans, steals, frees, allocations and (de)activations count
# pages; memcg's pgpgin/pgpgout count charge events of one page; the rest count events
_KIB_COUNTERS = ("vmstat.pgpgin", "vmstat.pgpgout")
# vmstat's nr_* are levels except these, which count since boot (include/linux/mmzone.h
# node_stat_item: "page dirtyings/writings since bootup", pages written by reclaim or while it
# was throttled, FOLL_PIN pins taken and released); workingset_nodes is a level (shadow nodes)
_VMSTAT_NR_COUNTERS = frozenset({"nr_dirtied", "nr_written", "nr_vmscan_write",
                                 "nr_throttled_written", "nr_foll_pin_acquired",
                                 "nr_foll_pin_released"})
_VMSTAT_GAUGES = frozenset({"workingset_nodes"})
_PAGE_COUNTER_PREFIXES = ("pgscan", "pgsteal", "pgfree", "pgalloc", "pgactivate",
                          "pgdeactivate", "pgrefill", "pglazyfree", "pgpromote", "pgdemote",
                          "pgmigrate", "pgrotated", "pswp", "pgpg", "total_pgpg",
                          "nr_dirtied", "nr_written", "nr_vmscan_write", "nr_throttled_written")


def _column(name: str) -> Column:
    """What a `source.key` column of the counters table is: event counters (deltas make
    sense) or gauges (sizes, nr_* levels, limits)."""
    source, _, key = name.partition(".")
    if source == "vmstat":
        counter = (not key.startswith("nr_") or key in _VMSTAT_NR_COUNTERS) \
            and key not in _VMSTAT_GAUGES
    elif source == "memcg":
        counter = (key.startswith(_MEMCG_COUNTER_PREFIXES) or key.endswith("failcnt")
                   or key.startswith("events."))
    else:
        counter = False
    if counter:
        unit = ("KiB" if name in _KIB_COUNTERS else
                "pages" if key.startswith(_PAGE_COUNTER_PREFIXES) else "events")
        return Column(name, COUNTER, unit)
    if source == "meminfo":
        return Column(name, GAUGE, "pages" if key.startswith("HugePages_") else "bytes")
    return Column(name, GAUGE, "pages" if source == "vmstat" else "bytes")


COUNTERS = TableSchema("counters", (RUN_TIME,), rule=_column,
                       totals=montables.counters_totals)


def is_cumulative(column: str) -> bool:
    """True for event counters (deltas make sense), False for gauges (sizes, nr_* levels)."""
    return COUNTERS.is_counter(column)


def parse_vmstat(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values


def parse_meminfo(text: str) -> dict[str, int]:
    """Values in bytes (meminfo says kB) except the page counts (HugePages_*)."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        values[key.replace("(", "_").replace(")", "")] = (
            int(parts[0]) * 1024 if len(parts) > 1 and parts[1] == "kB" else int(parts[0]))
    return values


def read_memcg(cgroup: dict[str, Any]) -> dict[str, int]:
    path = cgroup["path"]
    values: dict[str, int] = {}
    stat = read_text(os.path.join(path, "memory.stat"))
    if stat:
        values.update(parse_vmstat(stat))
    if cgroup.get("version") == 2:
        for name in ("memory.events", "memory.events.local"):
            events = read_text(os.path.join(path, name))
            if events and name == "memory.events":
                values.update({f"events.{k}": v for k, v in parse_vmstat(events).items()})
        for name, key in (("memory.current", "usage_bytes"), ("memory.max", "limit_bytes")):
            text = (read_text(os.path.join(path, name)) or "").strip()
            if text.isdigit():
                values[key] = int(text)
    else:
        for name, key in (("memory.failcnt", "failcnt"), ("memory.memsw.failcnt", "memsw.failcnt"),
                          ("memory.usage_in_bytes", "usage_bytes"),
                          ("memory.max_usage_in_bytes", "max_usage_bytes"),
                          ("memory.limit_in_bytes", "limit_bytes")):
            text = (read_text(os.path.join(path, name)) or "").strip()
            if text.isdigit():
                values[key] = int(text)
    return values


class CountersMonitor(Monitor):
    name = monitornames.COUNTERS

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self._rows = RowStore(value_type=pa.int64())
        self._sampler: SamplerThread | None = None
        self._cgroup: dict[str, Any] | None = None

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        if read_text("/proc/vmstat") is None:
            return "/proc/vmstat is not readable"
        return None

    def start(self, ctx: RunContext) -> None:
        self._cgroup = ctx.env.cgroup
        self._rows = RowStore(spill_dir=spill_dir(ctx), name=self.name, value_type=pa.int64())
        self._sampler = SamplerThread(ctx, self.interval_s, self._sample, self.name)
        self._sampler.start()

    def _sample(self, t_ns: int) -> None:
        row: dict[str, int] = {"t_ns": t_ns}
        vmstat = parse_vmstat(read_text("/proc/vmstat") or "")
        row.update({f"vmstat.{k}": v for k, v in vmstat.items()})
        row.update({f"meminfo.{k}": v
                    for k, v in parse_meminfo(read_text("/proc/meminfo") or "").items()})
        if self._cgroup and os.path.isdir(self._cgroup.get("path", "")):
            row.update({f"memcg.{k}": v for k, v in read_memcg(self._cgroup).items()})
        self._rows.append(row)

    def stop(self) -> MonitorResult:
        assert self._sampler is not None, "stop() before start()"
        self._sampler.stop()
        table = self._rows.table()
        self._rows.discard()
        status: dict[str, Any] = {"samples": len(self._rows), "interval_s": self.interval_s,
                                  "memcg": bool(self._cgroup)}
        if self._sampler.errors:
            status["errors"] = self._sampler.errors
        return MonitorResult(tables={"counters": table}, status=status,
                             schemas={"counters": COUNTERS})


MONITORS = {CountersMonitor.name: CountersMonitor}
