"""stacks: sample the kernel stack and wchan of the workload's threads that are in D state.

Every interval (default 20 ms) each workload thread's state is read from
/proc/<pid>/task/<tid>/stat; for a thread in uninterruptible sleep its /proc/.../stack and
wchan are read. Table `stacks`: t_ns, pid, tid, comm, wchan, stack (folded: outermost frame
first, leaf last, offsets stripped). `folded_stacks` is the flame-graph input: "comm;a;b;leaf N".
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from ..analysis import monitornames
from ..core.context import RunContext
from ._sampling import RowStore, SamplerThread, read_text, spill_dir
from .base import KEY, RUN_TIME, Column, Monitor, MonitorResult, TableSchema


def parse_proc_stack(text: str) -> list[str]:
    """'[<0>] folio_wait_bit_common+0x13c/0x350' lines (leaf first) -> names, outermost first."""
    frames = []
    for line in text.splitlines():
        name = line.split("]", 1)[-1].strip().split("+", 1)[0]
        if name and not name.startswith("0x"):
            frames.append(name)
    frames.reverse()
    return frames


def thread_state(pid: int, tid: int) -> tuple[str, str] | None:
    """(state letter, comm) of a thread, or None when it is gone."""
    text = read_text(f"/proc/{pid}/task/{tid}/stat")
    if not text:
        return None
    head, _, tail = text.rpartition(")")
    return tail.split(None, 1)[0], head.partition("(")[2]


STACKS = TableSchema(
    "stacks",
    (RUN_TIME, Column("pid", KEY, "id", "int32"),
     Column("tid", KEY, "id", "int32"), Column("comm", KEY, "text", "string"),
     Column("wchan", KEY, "text", "string"), Column("stack", KEY, "text", "string")))
STACKS_SCHEMA = STACKS.arrow()


class StacksMonitor(Monitor):
    name = monitornames.STACKS

    def __init__(self, interval_s: float = 0.02):
        self.interval_s = interval_s
        self._ctx: RunContext | None = None
        self._rows = RowStore(schema=STACKS_SCHEMA)
        self._sampler: SamplerThread | None = None
        self.threads_seen = 0
        self._stacks: dict[str, str] = {}

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        if read_text(f"/proc/{os.getpid()}/stack") is None:
            return "/proc/PID/stack is not readable (needs root; CONFIG_STACKTRACE)"
        return None

    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._rows = RowStore(schema=STACKS_SCHEMA, spill_dir=spill_dir(ctx), name=self.name)
        self._sampler = SamplerThread(ctx, self.interval_s, self._sample, self.name)
        self._sampler.start()

    def _sample(self, t_ns: int) -> None:
        assert self._ctx is not None
        tids = self._ctx.processes.tids()
        self.threads_seen = max(self.threads_seen, len(tids))
        for pid, tid in tids:
            state = thread_state(pid, tid)
            if state is None or state[0] != "D":
                continue
            stack = read_text(f"/proc/{pid}/task/{tid}/stack")
            wchan = (read_text(f"/proc/{pid}/task/{tid}/wchan") or "").strip()
            if stack is None:
                continue
            frames = parse_proc_stack(stack)
            if not frames:  # it woke up between the two reads
                continue
            stack = ";".join(frames)
            stack = self._stacks.setdefault(stack, stack)   # one copy of each distinct stack
            self._rows.append((t_ns, pid, tid, state[1], wchan or frames[-1], stack))

    def stop(self) -> MonitorResult:
        assert self._sampler is not None, "stop() before start()"
        self._sampler.stop()
        table = self._rows.table()
        folded = Counter(f"{_clean(comm)};{stack}" for _t, _p, _tid, comm, _w, stack in self._rows)
        text = "".join(f"{stack} {n}\n" for stack, n in folded.most_common())
        roots = self._ctx.processes.roots() if self._ctx else []
        status: dict[str, Any] = {"workload_pids": roots,
                                  "interval_s": self.interval_s,
                                  "samples": self._sampler.samples,
                                  "d_state_samples": len(self._rows),
                                  "threads": self.threads_seen}
        if self._sampler.errors:
            status["errors"] = self._sampler.errors
        return MonitorResult(tables={"stacks": table}, status=status, folded_stacks=text,
                             schemas={"stacks": STACKS})


def _clean(comm: str) -> str:
    return comm.replace(";", "_").replace(" ", "_") or "?"


MONITORS = {StacksMonitor.name: StacksMonitor}
