"""How busy the machine was with work that is not the run's: read at the start and the end of a
run, stored in run.json as `machine_load`, so a comparison can tell when one variant's runs
shared the CPUs with more outside work than the other's (analysis/interference.py).

Kernel facts: /proc/stat's first line is the time all CPUs spent per state since boot, in
USER_HZ ticks (proc(5)); user includes guest time. Busy is user + nice + system + irq + softirq;
steal is time the hypervisor ran something else on this VM's CPUs. The run's own CPU time is
this process (its threads: workers, recorder, monitors), its reaped children (RUSAGE_CHILDREN)
and every live descendant's utime + stime + cutime + cstime from /proc/PID/stat (a PostgreSQL
server and its backends, a fio still running); what is left of busy is everyone else's. Of
that, the kernel's own threads (kthreadd, pid 2, and its children: kworkers, jbd2, flush, kswapd)
are counted apart as `kernel_cpus`: they often work for the run itself (writeback of its dirty
pages, its journal commits), so they are not another process competing for the CPUs.

Another program that drops the page cache during a run (`echo 3 > /proc/sys/vm/drop_caches`, as
other benchmarks do before each of their runs) turns the run's cached reads into reads from the
device and empties its memory cgroup, which then stops reclaiming: /proc/vmstat's
drop_pagecache counts such drops since boot (fs/drop_caches.c, count_vm_event(DROP_PAGECACHE)).
The run's own drop comes before its start snapshot, so every drop between the two is another's:
`page_cache_drops`, with a note in run.json (others_dropped_note).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Snapshot:
    monotonic: float
    busy_s: float
    steal_s: float
    own_s: float
    cpus: int
    kernel_s: float = 0.0
    page_cache_drops: int | None = None


KTHREADD = 2


def _proc_stat_cpu() -> tuple[float, float] | None:
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    ticks = [int(x) for x in fields[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = ticks[:7]
    steal = ticks[7] if len(ticks) > 7 else 0
    return (user + nice + system + irq + softirq) / _TICK, steal / _TICK


def _page_cache_drops() -> int | None:
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("drop_pagecache "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None                        # a kernel without the counter


def _descendants_cpu_s(root: int) -> tuple[float, float]:
    """utime + stime + cutime + cstime of every live descendant of `root`, and utime + stime
    of the kernel's threads (KTHREADD's children)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()   # after "pid (comm) "
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / _TICK
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    kernel = sum(cpu.get(pid, 0.0) for pid in [KTHREADD, *children.get(KTHREADD, [])])
    return total, kernel


def _reaped_children_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def snapshot() -> Snapshot | None:
    """None where /proc/stat cannot be read."""
    machine = _proc_stat_cpu()
    if machine is None:
        return None
    # a child reaped while /proc is walked (a duet's other side ending at the same moment)
    # would be in neither the children's rusage read before nor the walk: read again
    for _ in range(5):
        reaped = _reaped_children_s()
        descendants, kernel = _descendants_cpu_s(os.getpid())
        if _reaped_children_s() == reaped:
            break
    usage = resource.getrusage(resource.RUSAGE_SELF)
    own = usage.ru_utime + usage.ru_stime + reaped
    return Snapshot(time.monotonic(), machine[0], machine[1], own + descendants,
                    os.sysconf("SC_NPROCESSORS_ONLN"), kernel, _page_cache_drops())


def between(start: Snapshot | None, end: Snapshot | None) -> dict[str, Any] | None:
    """run.json's machine_load: CPUs' worth (CPU-seconds per second) of busy time, the run's own,
    everyone else's and steal, over the interval between two snapshots."""
    if start is None or end is None or end.monotonic - start.monotonic <= 0:
        return None
    seconds = end.monotonic - start.monotonic
    busy = (end.busy_s - start.busy_s) / seconds
    own = (end.own_s - start.own_s) / seconds
    others = max(0.0, busy - own)
    kernel = min(others, max(0.0, (end.kernel_s - start.kernel_s) / seconds))
    return {"interval_s": round(seconds, 3), "cpus": end.cpus,
            "busy_cpus": round(busy, 3), "own_cpus": round(own, 3),
            "others_cpus": round(others, 3), "kernel_cpus": round(kernel, 3),
            "steal_cpus": round(max(0.0, (end.steal_s - start.steal_s) / seconds), 3),
            "page_cache_drops": (None if start.page_cache_drops is None
                                 or end.page_cache_drops is None
                                 else end.page_cache_drops - start.page_cache_drops)}


def others_dropped_note(load: dict[str, Any] | None) -> str | None:
    """The run note when another program dropped the page cache during the run."""
    drops = (load or {}).get("page_cache_drops")
    if not drops:
        return None
    times = "once" if drops == 1 else f"{drops} times"
    return (f"another program dropped the page cache {times} during the run (vmstat "
            "drop_pagecache): cached reads became reads from the device and memory cgroups "
            "emptied, so this run's latencies are not its configuration's alone")
