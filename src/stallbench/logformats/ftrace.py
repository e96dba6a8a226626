"""ftrace's text format (trace_pipe of a tracefs instance) -> interval rows of the trace
monitor's tables: reclaim, throttle and D-state intervals (sched_switch with its stack trace to
the wake-up), raw syscalls, and block requests (issue to completion). The events and the
table's columns are monitors/trace.py's.
"""

from __future__ import annotations

import re
from typing import Any

# frames of the tracing machinery itself at the top of a sched_switch stack trace
_TRACE_FRAMES = {"trace_event_raw_event_sched_switch", "__traceiter_sched_switch",
                 "__schedule", "schedule", "__probestub_sched_switch"}

_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<tid>\d+)\s+(?:\(\s*(?P<tgid>[-\d]+)\)\s+)?"
                   r"\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<sec>\d+)\.(?P<usec>\d+):\s+(?P<event>[^:]+?)(?::\s?(?P<body>.*))?$")
_FIELD = re.compile(r"(\w+)=(\S*)")


def _ts(match: re.Match[str]) -> int:
    usec = match["usec"]
    return int(match["sec"]) * 1_000_000_000 + int(usec) * 10 ** (9 - len(usec))


def parse_trace(text: str, t0_ns: int, workload: set[int] | None = None,
                syscall_names: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """trace_pipe text of the main instance -> interval rows (monitors/trace.py has the
    events and the table's columns).

    With `workload` (its pids and tids), only rows of those tasks are kept: set_event_pid
    records a sched_switch when either side is traced, so the task switched *away from* may be
    anyone's (a kworker, stallbench itself); its D-state sleep is not the workload's.
    `syscall_names` ({number: name}, see syscalls.py) names the syscall rows; a number not in
    it stays `syscall N`."""
    rows: list[dict[str, Any]] = []
    reclaim_open: dict[tuple[int, str], int] = {}
    sys_open: dict[int, tuple[int, int]] = {}
    d_open: dict[int, dict[str, Any]] = {}
    awaiting_stack: dict[int, dict[str, Any]] = {}
    stack_for: dict[str, Any] | None = None
    frames: list[str] = []
    tgids: dict[int, int] = {}

    def close_stack() -> None:
        nonlocal stack_for, frames
        if stack_for is not None:
            kept = [f for f in frames if f not in _TRACE_FRAMES]
            stack_for["stack"] = ";".join(reversed(kept))
        stack_for, frames = None, []

    for line in text.splitlines():
        if line.startswith(" =>"):
            if stack_for is not None:
                frames.append(line[3:].strip().split("+", 1)[0])
            continue
        match = _LINE.match(line)
        if not match:
            continue
        close_stack()
        tid, event, body = int(match["tid"]), match["event"].strip(), match["body"] or ""
        if match["tgid"] and match["tgid"].isdigit() and tid:
            tgids[tid] = int(match["tgid"])
        ts = _ts(match) - t0_ns
        comm = match["comm"].strip()
        if event == "<stack trace>":
            stack_for = awaiting_stack.pop(tid, None)
            continue
        if event == "sched_switch":
            fields = dict(_FIELD.findall(body.split(" ==> ")[0]))
            after = dict(_FIELD.findall(body.split(" ==> ")[-1]))
            prev, nxt = int(fields.get("prev_pid", -1)), int(after.get("next_pid", -1))
            if fields.get("prev_state", "").startswith("D"):
                row = {"t_ns": ts, "duration_ns": -1, "tid": prev, "comm": fields.get("prev_comm",
                       comm), "category": "dstate", "kind": "D", "stack": "", "device": "",
                       "detail": ""}
                rows.append(row)
                d_open[prev] = row
                awaiting_stack[prev] = row
            if nxt in d_open:  # switched back in without a recorded wake-up
                row = d_open.pop(nxt)
                row["duration_ns"] = ts - row["t_ns"]
            continue
        if event == "sched_wakeup":
            woken = int(dict(_FIELD.findall(body)).get("pid", -1))
            if woken in d_open:
                row = d_open.pop(woken)
                row["duration_ns"] = ts - row["t_ns"]
            continue
        if event.startswith("mm_vmscan_") and event.endswith(("_begin", "_end")):
            kind = "memcg reclaim" if "memcg" in event else "direct reclaim"
            if event.endswith("_begin"):
                reclaim_open[(tid, kind)] = ts
            elif (tid, kind) in reclaim_open:
                begin = reclaim_open.pop((tid, kind))
                rows.append({"t_ns": begin, "duration_ns": ts - begin, "tid": tid, "comm": comm,
                             "category": "reclaim", "kind": kind, "stack": "", "device": "",
                             "detail": body.strip()})
            continue
        if event == "mm_vmscan_throttled":
            fields = dict(_FIELD.findall(body))
            delayed = int(fields.get("usect_delayed", fields.get("usec_delayed", "0"))) * 1000
            reason = fields.get("reason", "").replace("VMSCAN_THROTTLE_", "").lower()
            rows.append({"t_ns": ts - delayed, "duration_ns": delayed, "tid": tid, "comm": comm,
                         "category": "throttle", "kind": f"vmscan throttled ({reason})",
                         "stack": "", "device": "", "detail": body.strip()})
            continue
        if event == "balance_dirty_pages":
            fields = dict(_FIELD.findall(body))
            pause = max(0, int(fields.get("pause", "0"))) * 1_000_000
            rows.append({"t_ns": ts, "duration_ns": pause, "tid": tid, "comm": comm,
                         "category": "throttle", "kind": "balance_dirty_pages", "stack": "",
                         "device": "", "detail": f"bdi={fields.get('bdi', '')}"})
            continue
        if event == "sys_enter":
            parts = body.split()
            if len(parts) >= 2 and parts[0] == "NR":
                sys_open[tid] = (ts, int(parts[1]))
            continue
        if event == "sys_exit" and tid in sys_open:
            begin, nr = sys_open.pop(tid)
            rows.append({"t_ns": begin, "duration_ns": ts - begin, "tid": tid, "comm": comm,
                         "category": "syscall",
                         "kind": f"syscall {(syscall_names or {}).get(nr, nr)}", "stack": "",
                         "device": "", "detail": str(nr)})
    close_stack()
    for row in rows:
        row["pid"] = tgids.get(row["tid"], row["tid"])
    if workload is not None:
        rows = [row for row in rows if row["tid"] in workload or row["pid"] in workload]
    return rows


_BLOCK = re.compile(r"^(?P<major>\d+),(?P<minor>\d+)\s+(?P<rwbs>\S+)\s+(?:\d+\s+)?\(.*?\)\s+"
                    r"(?P<sector>\d+)\s+\+\s+(?P<n>\d+)")


def parse_block_trace(text: str, t0_ns: int, names: dict[int, str]) -> list[dict[str, Any]]:
    """block_rq_issue/complete pairs (matched by device and sector) -> 'block' interval rows."""
    rows = []
    issued: dict[tuple[int, int], tuple[int, int, str, str, int]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        event = match["event"].strip()
        block = _BLOCK.match(match["body"] or "")
        if block is None or event not in ("block_rq_issue", "block_rq_complete"):
            continue
        dev = (int(block["major"]) << 20) | int(block["minor"])
        key = (dev, int(block["sector"]))
        ts = _ts(match) - t0_ns
        if event == "block_rq_issue":
            issued[key] = (ts, int(match["tid"]), match["comm"].strip(), block["rwbs"],
                           int(block["n"]))
        elif key in issued:
            begin, tid, comm, rwbs, n = issued.pop(key)
            rows.append({"t_ns": begin, "duration_ns": ts - begin, "tid": tid, "comm": comm,
                         "category": "block", "kind": f"block {rwbs}", "stack": "",
                         "device": names.get(dev, f"{block['major']}:{block['minor']}"),
                         "detail": f"sectors={n}"})
    return rows


# -- raw trace_pipe bytes, before they are parsed ---------------------------------------------

_FRAME = b" =>"          # a stack trace's frame: a line of the event above it


def cut_at_event(data: bytes, limit: int) -> int:
    """The length of `data`'s longest prefix of at most `limit` bytes that ends where an event
    begins (whole lines; a stack trace's frames stay with their event)."""
    cut = data.rfind(b"\n", 0, max(0, limit)) + 1
    while cut and data.startswith(_FRAME, cut):
        cut = data.rfind(b"\n", 0, cut - 1) + 1
    return cut


def event_count(data: bytes) -> int:
    """The events in whole lines of trace_pipe text (each line that is not a frame)."""
    return data.count(b"\n") - data.count(b"\n" + _FRAME) - data.startswith(_FRAME)


def first_event_ns(data: bytes) -> int | None:
    """The trace clock's time of the first event in `data`, if a line of it says."""
    for line in data.split(b"\n", 16)[:16]:
        match = _LINE.match(line.decode(errors="replace"))
        if match:
            return _ts(match)
    return None
