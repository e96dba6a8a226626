"""taskstats over generic netlink, pure Python: the TASKSTATS family's socket (a thread's record
on request, the exit records of registered CPUs) and struct taskstats decoded field by field
(the delay kinds' offsets: analysis/delaykinds.py; the per-kind maxima from version 16; the
I/O accounting; the time on a CPU). The delay monitor (delay.py) samples through it and
refuses version 15's layout (BROKEN_LAYOUT_VERSION).
"""

from __future__ import annotations

import os
import select
import socket
import struct
from typing import Any

from ..analysis.delaykinds import DELAY_KIND_NAMES, DELAY_KINDS

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_PID = 1
TASKSTATS_CMD_ATTR_REGISTER_CPUMASK = 3
TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK = 4
TASKSTATS_TYPE_PID = 1
TASKSTATS_TYPE_STATS = 3
TASKSTATS_TYPE_AGGR_PID = 4

# the delay kinds' byte offsets in struct taskstats: analysis/delaykinds.py; v16+:
# {kind}_delay_max, {kind}_delay_min pairs at the end, in DELAY_KINDS order
MAX_SINCE_VERSION = 16
_MAX_AT = 432
BROKEN_LAYOUT_VERSION = 15
# per-task I/O accounting (CONFIG_TASK_XACCT): bytes passed to read/write calls, the calls,
# and bytes the task had read from / caused to be written to the block layer
IO_FIELDS = {"read_char": 216, "write_char": 224, "read_syscalls": 232, "write_syscalls": 240,
             "read_bytes": 248, "write_bytes": 256}
# cpu_run_virtual_total, filled whether or not delay accounting is on (cpu_run_real_total at
# 64 is utime + stime, tick-sampled)
ONCPU_AT = 72
# ac_utime and ac_stime (µs): the task's time on a CPU in user space and in the kernel, from the
# scheduler tick (task_cputime: sampled, so only their ratio is exact over a short run)
CPU_SPLIT_AT = {"utime": 152, "stime": 160}
_COMM = (80, 32)
_AC_PID = 128
_AC_TGID = 368


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def _attrs(data: bytes) -> dict[int, bytes]:
    result = {}
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, offset)
        if length < 4:
            break
        result[kind & 0x3FFF] = data[offset + 4:offset + length]
        offset += (length + 3) & ~3
    return result


class TaskstatsError(OSError):
    pass


class TaskstatsSocket:
    """One generic-netlink socket speaking the TASKSTATS family."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.sock.bind((0, 0))
        self._seq = 0
        self.family = self._resolve_family("TASKSTATS")

    def close(self) -> None:
        self.sock.close()

    def _send(self, family: int, cmd: int, attrs: bytes) -> int:
        self._seq += 1
        payload = struct.pack("BBH", cmd, 1, 0) + attrs
        self.sock.send(struct.pack("IHHII", 16 + len(payload), family, NLM_F_REQUEST,
                                   self._seq, 0) + payload)
        return self._seq

    def _receive(self, seq: int) -> bytes:
        """The genl payload (after the genl header) of the reply to `seq`."""
        while True:
            data = self.sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, kind, _flags, msg_seq, _pid = struct.unpack_from("IHHII", data, offset)
                body = data[offset + 16:offset + length]
                offset += (length + 3) & ~3
                if msg_seq != seq:
                    continue
                if kind == NLMSG_ERROR:
                    (error,) = struct.unpack_from("i", body)
                    if error:
                        raise TaskstatsError(-error, os.strerror(-error))
                    continue
                return body[4:]

    def _resolve_family(self, name: str) -> int:
        seq = self._send(GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
                         _attr(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"))
        attrs = _attrs(self._receive(seq))
        return struct.unpack_from("H", attrs[CTRL_ATTR_FAMILY_ID])[0]

    def get(self, tid: int) -> bytes | None:
        """The raw struct taskstats of one thread, or None when it is gone."""
        seq = self._send(self.family, TASKSTATS_CMD_GET,
                         _attr(TASKSTATS_CMD_ATTR_PID, struct.pack("I", tid)))
        try:
            return stats_from_reply(self._receive(seq))
        except TaskstatsError:
            return None

    def register_exits(self, cpumask: str) -> None:
        self._send(self.family, TASKSTATS_CMD_GET,
                   _attr(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpumask.encode() + b"\0"))

    def read_exit_records(self) -> list[bytes]:
        """Exit records already queued on this (registered) socket; never blocks."""
        records = []
        while select.select([self.sock], [], [], 0)[0]:
            try:
                data = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: the kernel dropped records, keep going
                continue
            offset = 0
            while offset + 16 <= len(data):
                length, kind, _flags, _seq, _pid = struct.unpack_from("IHHII", data, offset)
                body = data[offset + 16:offset + length]
                offset += (length + 3) & ~3
                if kind == self.family:
                    stats = stats_from_reply(body[4:])
                    if stats is not None:
                        records.append(stats)
        return records


def stats_from_reply(payload: bytes) -> bytes | None:
    for kind, value in _attrs(payload).items():
        if kind == TASKSTATS_TYPE_AGGR_PID:
            nested = _attrs(value)
            if TASKSTATS_TYPE_STATS in nested:
                return nested[TASKSTATS_TYPE_STATS]
    return None


def decode_stats(raw: bytes) -> dict[str, Any]:
    """struct taskstats -> {version, tid, tgid, comm, <kind>_count, <kind>_ns ...}."""
    version = struct.unpack_from("H", raw, 0)[0]
    result: dict[str, Any] = {
        "version": version,
        "tid": struct.unpack_from("I", raw, _AC_PID)[0],
        "tgid": struct.unpack_from("I", raw, _AC_TGID)[0] if len(raw) >= _AC_TGID + 4
        and version >= 12 else None,
        "comm": raw[_COMM[0]:_COMM[0] + _COMM[1]].split(b"\0", 1)[0].decode(errors="replace"),
    }
    for kind in DELAY_KINDS:
        if version >= kind.since and len(raw) >= kind.total_at + 8:
            result[f"{kind.name}_count"] = struct.unpack_from("Q", raw, kind.count_at)[0]
            result[f"{kind.name}_ns"] = struct.unpack_from("Q", raw, kind.total_at)[0]
        else:
            result[f"{kind.name}_count"] = result[f"{kind.name}_ns"] = None
    result["oncpu_ns"] = struct.unpack_from("Q", raw, ONCPU_AT)[0]
    for name, at in CPU_SPLIT_AT.items():
        result[f"{name}_ns"] = struct.unpack_from("Q", raw, at)[0] * 1000
    for name, at in IO_FIELDS.items():
        result[f"io_{name}"] = struct.unpack_from("Q", raw, at)[0] if len(raw) >= at + 8 \
            else None
    for index, kind in enumerate(DELAY_KIND_NAMES):
        at = _MAX_AT + 16 * index
        result[f"{kind}_max_ns"] = struct.unpack_from("Q", raw, at)[0] \
            if version >= MAX_SINCE_VERSION and len(raw) >= at + 8 else None
    return result


def max_unavailable(version: int | None) -> str | None:
    """Why this kernel's taskstats has no per-kind maximum, or None when it has one."""
    if version is None:
        return "no taskstats record was read"
    if version < MAX_SINCE_VERSION:
        return (f"taskstats version {version} has no per-kind maximum delay (version "
                f"{MAX_SINCE_VERSION}+, Linux 6.16 and later)")
    return None
