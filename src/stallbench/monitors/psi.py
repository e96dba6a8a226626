"""psi: pressure stall information, system-wide and for the workload's cgroup where it has it.

Table `psi`: t_ns, scope ("system" or "cgroup"), resource (cpu, memory, io), kind (some, full),
total_ns (cumulative stall time), avg10 (percent); run.json's `stall_ns` (stall time during
the run per series) is analysis/montables.py's. Cgroup v1 has no pressure files; the summary
says so.
"""

from __future__ import annotations

import os
from typing import Any

from ..analysis import monitornames, montables
from ..core.context import RunContext
from ._sampling import RowStore, SamplerThread, read_text, spill_dir
from .base import COUNTER, GAUGE, KEY, RUN_TIME, Column, Monitor, MonitorResult, TableSchema

RESOURCES = ("cpu", "memory", "io")


def parse_pressure(text: str) -> dict[str, tuple[float, int]]:
    """'some avg10=1.00 avg60=.. avg300=.. total=123' lines -> {kind: (avg10, total_ns)}."""
    result = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if "total" in fields:
            result[parts[0]] = (float(fields.get("avg10", 0.0)), int(fields["total"]) * 1000)
    return result


def pressure_sources(cgroup: dict[str, Any] | None) -> tuple[dict[str, str], str | None]:
    """{"system/cpu": path, ...} and a note about the cgroup's pressure files (or None)."""
    sources = {f"system/{r}": f"/proc/pressure/{r}" for r in RESOURCES
               if os.path.exists(f"/proc/pressure/{r}")}
    note = None
    if cgroup:
        if cgroup.get("version") == 2:
            found = {f"cgroup/{r}": os.path.join(cgroup["path"], f"{r}.pressure")
                     for r in RESOURCES}
            found = {k: v for k, v in found.items() if os.path.exists(v)}
            sources.update(found)
            if not found:
                note = "the workload's cgroup has no pressure files (PSI disabled for cgroups?)"
        else:
            note = "cgroup v1 has no per-cgroup pressure files; only system-wide PSI recorded"
    return sources, note


PSI = TableSchema(
    "psi",
    (RUN_TIME, Column("scope", KEY, "text", "string"),
     Column("resource", KEY, "text", "string"), Column("kind", KEY, "text", "string"),
     Column("total_ns", COUNTER, "ns"), Column("avg10", GAUGE, "percent", "float64")),
    totals=montables.psi_totals)
PSI_SCHEMA = PSI.arrow()


class PsiMonitor(Monitor):
    name = monitornames.PSI

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self._rows = RowStore(schema=PSI_SCHEMA)
        self._sources: dict[str, str] = {}
        self._note: str | None = None
        self._sampler: SamplerThread | None = None

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        if not os.path.exists("/proc/pressure/memory"):
            return "no /proc/pressure (kernel without CONFIG_PSI or booted with psi=0)"
        if read_text("/proc/pressure/memory") is None:
            return "/proc/pressure/memory is not readable (PSI disabled: boot with psi=1)"
        return None

    def start(self, ctx: RunContext) -> None:
        self._sources, self._note = pressure_sources(ctx.env.cgroup)
        self._rows = RowStore(schema=PSI_SCHEMA, spill_dir=spill_dir(ctx), name=self.name)
        self._sampler = SamplerThread(ctx, self.interval_s, self._sample, self.name)
        self._sampler.start()

    def _sample(self, t_ns: int) -> None:
        for key, path in self._sources.items():
            text = read_text(path)
            if text is None:
                continue
            scope, resource = key.split("/")
            for kind, (avg10, total_ns) in parse_pressure(text).items():
                self._rows.append((t_ns, scope, resource, kind, total_ns, avg10))

    def stop(self) -> MonitorResult:
        assert self._sampler is not None, "stop() before start()"
        self._sampler.stop()
        table = self._rows.table()
        status: dict[str, Any] = {"samples": self._sampler.samples}
        if self._note:
            status["note"] = self._note
        if self._sampler.errors:
            status["errors"] = self._sampler.errors
        return MonitorResult(tables={"psi": table}, status=status, schemas={"psi": PSI})


MONITORS = {PsiMonitor.name: PsiMonitor}
