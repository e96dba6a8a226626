"""profile: the workload's on-CPU call stacks, sampled by `perf record`.

perf samples the workload's processes (and only theirs: every process of the run's ProcessSet,
and the threads and children they make; monitors/perfrun.py attaches it at the start gate) at
FREQUENCY_HZ per CPU they run on, with kernel and user frames (frame pointers: the kernel's
own unwinder for its frames; user frames end where a program has no frame pointers, Python's
interpreter among them): the hardware `cycles` event where the machine has a PMU, else the
software `cpu-clock` event (a VM without a virtual PMU, a TCG guest); the status says which.
Samples are stamped on CLOCK_MONOTONIC, the run's clock. At the end `perf script` reads the data
with the symbols of the kernel that ran: its /proc/kallsyms (a kernel variant's monitor runs in
the guest, with the guest's), and the user programs' own symbol tables.

Table `profile`: one row per sample: t_ns, pid, tid, comm, stack (folded: outermost frame
first, leaf last; the user frames perf could not name are one `[unknown]`). The comparison reads
it per worker role (compare/where/profiles.py); `stallbench export --format folded --stacks on-cpu`
writes it as folded stacks. The perf data file is temporary (the monitor's scratch folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..analysis import monitornames
from ..core.context import RunContext
from . import perfrun
from .base import KEY, RUN_TIME, Column, MonitorResult, TableSchema

FREQUENCY_HZ = 499            # per CPU; odd, so that it does not beat with a 100 Hz or 1 kHz tick
HARDWARE_EVENT = "cycles"
SOFTWARE_EVENT = "cpu-clock"
UNKNOWN = "[unknown]"
KALLSYMS = "/proc/kallsyms"
DATA_FILE = "perf.data"       # perf record's output, in the scratch folder

PROFILE = TableSchema(
    "profile",
    (RUN_TIME, Column("pid", KEY, "id", "int32"), Column("tid", KEY, "id", "int32"),
     Column("comm", KEY, "text", "string"), Column("stack", KEY, "text", "string")))
_SCHEMA = PROFILE.arrow()

# perf script's sample line: "COMM  PID/TID  SECONDS.NANOS:" (COMM may hold spaces)
_HEAD_RE = re.compile(r"^(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+"
                      r"(?P<s>\d+)\.(?P<ns>\d{9}):")
# a frame: "\t  ffffffff81bb61a2 chacha_permute" (the symbol may be "[unknown]")
_FRAME_RE = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.+?)\s*$")


def record_args(event: str, data: Path) -> list[str]:
    """perf record's arguments (before -p PIDS): the event at FREQUENCY_HZ, call graphs,
    monotonic time stamps, no build-id cache written anywhere."""
    return ["record", "-q", "-e", event, "-F", str(FREQUENCY_HZ), "-g",
            "-k", "CLOCK_MONOTONIC", "--no-buildid", "--no-buildid-cache", "-o", str(data)]


def script_args(data: Path) -> list[str]:
    return ["script", "-i", str(data), "-F", "comm,pid,tid,time,ip,sym", "--ns",
            "--kallsyms", KALLSYMS]


def parse_script(lines: Iterable[str], t0_ns: int
                 ) -> Iterator[tuple[int, int, int, str, str]]:
    """perf script's text (script_args) -> (t_ns since t0, pid, tid, comm, folded stack) per
    sample; the stack outermost first, leaf last, runs of unnamed frames as one UNKNOWN."""
    head: re.Match[str] | None = None
    frames: list[str] = []

    def sample() -> tuple[int, int, int, str, str] | None:
        if head is None:
            return None
        names: list[str] = []
        for name in reversed(frames):
            name = name.replace(";", ":")
            if name == UNKNOWN and names and names[-1] == UNKNOWN:
                continue
            names.append(name)
        t_ns = int(head["s"]) * 1_000_000_000 + int(head["ns"]) - t0_ns
        return (t_ns, int(head["pid"]), int(head["tid"]), head["comm"].strip(),
                ";".join(names) or UNKNOWN)

    for line in lines:
        match = _HEAD_RE.match(line)
        if match is not None:
            done = sample()
            if done is not None:
                yield done
            head, frames = match, []
            continue
        frame = _FRAME_RE.match(line)
        if frame is not None and head is not None:
            frames.append(frame["sym"])
    done = sample()
    if done is not None:
        yield done


def kernel_symbols() -> str | None:
    """Why perf cannot name the kernel's frames here (None: /proc/kallsyms has addresses)."""
    try:
        with open(KALLSYMS) as f:
            # the first function's address (a kernel with absolute per-CPU symbols lists
            # those first, at 0, whoever reads)
            address = next((fields[0] for line in f
                            if len(fields := line.split()) >= 3 and fields[1] in "Tt"), None)
    except OSError as exc:
        return f"{KALLSYMS}: {exc.strerror} (CONFIG_KALLSYMS)"
    if address is None:
        return f"{KALLSYMS} lists no functions (CONFIG_KALLSYMS)"
    if not address.strip("0"):
        return (f"{KALLSYMS} shows no addresses (kernel.kptr_restrict, not root): the kernel's "
                "frames are unnamed")
    return None


class ProfileMonitor(perfrun.PerfMonitor):
    name = monitornames.PROFILE

    def __init__(self) -> None:
        super().__init__()
        self._event = SOFTWARE_EVENT

    def start(self, ctx: RunContext) -> None:
        self._event = HARDWARE_EVENT if perfrun.has_pmu() else SOFTWARE_EVENT
        self.attach_perf(ctx, lambda scratch: record_args(self._event, scratch / DATA_FILE),
                         "record")

    def stop(self) -> MonitorResult:
        assert self._ctx is not None and self._scratch is not None and self._perf is not None
        perf, scratch = self._perf, self._scratch
        status: dict[str, Any] = {"event": self._event, "frequency_hz": FREQUENCY_HZ,
                                  "pmu": self._event == HARDWARE_EVENT, **self.base_status()}
        rows: list[tuple[int, int, int, str, str]] = []
        try:
            perf.stop()
            if perf.counted:
                status["from_s"] = round((perf.attached_ns or 0) / 1e9, 3)
                status["to_s"] = round((perf.stopped_ns or 0) / 1e9, 3)
                rows = self._read(scratch.path / DATA_FILE, status)
            elif not perf.errors:
                perf.errors.append("the workload never reached its start: nothing sampled")
        finally:
            scratch.remove()
        symbols = kernel_symbols()
        status["kernel_symbols"] = symbols or f"{KALLSYMS} of the kernel that ran"
        status["samples"] = len(rows)
        status["threads"] = len({tid for _t, _p, tid, _c, _s in rows})
        if perf.errors:
            status["errors"] = perf.errors
        return MonitorResult(tables={"profile": rows_to_table(rows)}, status=status,
                             schemas={"profile": PROFILE})

    def _read(self, data: Path, status: dict[str, Any]) -> list[tuple[int, int, int, str, str]]:
        assert self._ctx is not None and self._scratch is not None and self._perf is not None
        if not data.exists():
            self._perf.errors.append(
                f"perf wrote no data: {perfrun.log_tail(self._scratch, 'record')}")
            return []
        stacks: dict[str, str] = {}
        rows = []
        lines = perfrun.run_lines(self._ctx, self._scratch, script_args(data), "script")
        for t_ns, pid, tid, comm, stack in parse_script(lines, self._ctx.t0_ns):
            rows.append((t_ns, pid, tid, comm, stacks.setdefault(stack, stack)))
        lost = [line for line in perfrun.log_tail(self._scratch, "record").split("; ")
                if "lost" in line.lower()]
        if lost:
            status["lost"] = lost
        return rows


def rows_to_table(rows: list[tuple[int, int, int, str, str]]) -> pa.Table:
    return perfrun.rows_table(rows, _SCHEMA)


MONITORS = {ProfileMonitor.name: ProfileMonitor}
