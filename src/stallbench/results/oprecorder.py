"""The hot path: record every operation of a worker process with no allocation per operation.

Each worker owns a `WorkerRecorder` with preallocated `array('q')` buffers that the worker's loop
fills in place. Workers with one unpaced op (readers) use two arrays, `starts[j] = t0;
ends[j] = t1` (the fewest Python operations per op; latencies are computed by numpy at flush);
others use one flat array of (op code, start, latency, intended start) records. When the buffer
is full, or at each progress tick, the worker flushes: the filled part is appended to the worker's
spool file and live counters go to a shared-memory `ProgressBoard`.

The spool is not written by the worker: a worker may run inside the memory cgroup being tested,
and the page cache of a file it writes is charged to that cgroup (measured: in a 16M cgroup,
96% of the blocked time in the stacks was the recorder's own write reclaiming between ops). A
`SpoolChannel` (shared memory the parent faults in before the fork, so its pages are charged to
the parent's cgroup) carries each flushed buffer to a writer thread of the parent, which appends
it to the spool; the worker writes the spool itself only when the parent is gone (kill -9).
After the run `read_spools` streams all spool files as Arrow record batches, in bounded memory,
into ops.parquet.

Record layouts: "sl" = (start, latency) for workers with one unpaced op; "osli" = (op code,
start, latency, intended start) for workers with several or paced ops. Starts are absolute
CLOCK_MONOTONIC ns; they are made relative to the run start when read back.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import threading
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..core.jsonfile import write_json_atomic
from .opsfile import ops_batch

LAYOUTS = {"sl": 2, "osli": 4}
DEFAULT_CAPACITY = 1 << 15          # records per buffer: 1 MiB for "osli"
READ_CHUNK_RECORDS = 1 << 18        # records per Arrow batch when merging: bounds the parent


class ProgressBoard:
    """Shared memory, one row per worker: [heartbeat_ns, count_op0, recent_max_op0, ...].

    Created in the parent before the workers fork; workers write their own row at each tick, the
    parent reads all rows for the live display. Values are advisory (display only)."""

    def __init__(self, workers: int, ops: list[str]):
        self.ops = list(ops)
        self.width = 1 + 2 * len(self.ops)
        self._map = mmap.mmap(-1, max(8, workers * self.width * 8))
        self.table = np.frombuffer(self._map, dtype=np.int64, count=workers * self.width)
        self.table = self.table.reshape(workers, self.width)

    def publish(self, worker: int, heartbeat_ns: int, counts: list[int], recent_max: list[int]):
        row = self.table[worker]
        for k in range(len(counts)):
            row[1 + 2 * k] = counts[k]
            if recent_max[k] > row[2 + 2 * k]:
                row[2 + 2 * k] = recent_max[k]
        row[0] = heartbeat_ns

    def take(self) -> tuple[dict[str, tuple[int, int]], np.ndarray]:
        """{op: (total count, max latency since the last take)} and each worker's heartbeat."""
        snapshot = self.table.copy()
        self.table[:, 2::2] = 0
        result = {}
        for k, op in enumerate(self.ops):
            result[op] = (int(snapshot[:, 1 + 2 * k].sum()), int(snapshot[:, 2 + 2 * k].max()))
        return result, snapshot[:, 0]


def spool_path(spool_dir: Path, worker: int, layout: str) -> Path:
    return Path(spool_dir) / f"w{worker:04d}.{layout}.spool"


def write_spool_meta(spool_dir: Path, worker: int, ops: list[str], layout: str) -> None:
    (Path(spool_dir) / f"w{worker:04d}.ops.json").write_text(
        json.dumps({"ops": list(ops), "layout": layout}))


class SpoolChannel:
    """Two slots of shared memory between one worker and the parent's writer thread.

    Made in the parent before the fork; the worker fills a free slot (`acquire`, `commit`:
    the slot's header becomes its length), the parent's writer thread, polling the headers,
    appends it to the spool and zeroes the header. No system call on the worker's side (it
    sleeps only while both slots wait for the writer). Every page is touched here, so it is
    charged to the parent's memory cgroup, not to the one the worker joins (cgroup v1 does not
    move charges with a task; v2 never does). The header is stored after the data; the
    ordering this needs holds on x86 (TSO)."""

    SLOTS = 2
    _HEADER = 8

    def __init__(self, spool_dir: Path, worker: int, layout: str,
                 capacity: int = DEFAULT_CAPACITY):
        self.slot_bytes = 8 * LAYOUTS[layout] * capacity
        self._stride = self._HEADER + self.slot_bytes
        self._map = mmap.mmap(-1, self.SLOTS * self._stride)
        for offset in range(0, len(self._map), mmap.PAGESIZE):
            self._map[offset] = 0
        self._parent = os.getpid()
        self._put = self._take = 0
        self.path = spool_path(spool_dir, worker, layout)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                           0o644)
        self._thread: threading.Thread | None = None
        self._ended = threading.Event()

    # -- worker side ----------------------------------------------------------------------
    def prefault(self) -> None:
        """Map every slot page into the worker before its ops start (the pages exist, charged
        to the parent; a fork does not copy a shared mapping's page tables)."""
        for offset in range(0, len(self._map), mmap.PAGESIZE):
            self._map[offset] = self._map[offset]

    def acquire(self) -> memoryview | None:
        """The next free slot (waiting for the writer), or None when the parent is gone."""
        header = (self._put % self.SLOTS) * self._stride
        waited = 0
        while struct.unpack_from("q", self._map, header)[0]:
            time.sleep(0.001)
            waited += 1
            if waited % 1000 == 0 and os.getppid() != self._parent:
                return None
        at = (self._put % self.SLOTS) * self._stride + self._HEADER
        return memoryview(self._map)[at:at + self.slot_bytes]

    def commit(self, nbytes: int) -> None:
        struct.pack_into("q", self._map, (self._put % self.SLOTS) * self._stride, nbytes)
        self._put += 1

    def parent_gone(self) -> bool:
        return os.getppid() != self._parent

    def settle(self, timeout_s: float = 5.0) -> None:
        """The worker's last step: wait until the writer wrote every committed slot, or is
        gone (then the caller takes `orphaned`)."""
        deadline = time.monotonic() + timeout_s
        while not self.parent_gone() and time.monotonic() < deadline and any(
                struct.unpack_from("q", self._map, slot * self._stride)[0]
                for slot in range(self.SLOTS)):
            time.sleep(0.001)

    def orphaned(self) -> list[bytes]:
        """With the parent gone (kill -9): the committed slots it never wrote, oldest first,
        now taken by the caller (who writes them to the spool itself)."""
        out = []
        for put in range(max(0, self._put - self.SLOTS), self._put):
            at = (put % self.SLOTS) * self._stride
            (nbytes,) = struct.unpack_from("q", self._map, at)
            if nbytes:
                out.append(bytes(self._map[at + self._HEADER:at + self._HEADER + nbytes]))
                struct.pack_into("q", self._map, at, 0)
        return out

    # -- parent side ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer thread (after the fork: a thread must not be copied into it)."""
        self._thread = threading.Thread(target=self._drain, daemon=True,
                                        name=f"stallbench-spool-{self.path.name}")
        self._thread.start()

    def _drain(self) -> None:
        while True:
            at = (self._take % self.SLOTS) * self._stride
            (nbytes,) = struct.unpack_from("q", self._map, at)
            if not nbytes:
                if self._ended.is_set():
                    return
                time.sleep(0.01)
                continue
            _write_all(self._fd, memoryview(self._map)[at + self._HEADER:
                                                       at + self._HEADER + nbytes])
            self._take += 1
            struct.pack_into("q", self._map, at, 0)

    def close(self) -> None:
        """After the worker ended: write what it committed last, release everything."""
        self._ended.set()
        if self._thread is not None:
            self._thread.join()
        os.close(self._fd)
        self._map.close()


class WorkerRecorder:
    """One worker's record buffer and spool file (used inside the worker process)."""

    def __init__(self, spool_dir: Path, worker: int, ops: list[str], layout: str,
                 board: ProgressBoard | None = None, capacity: int = DEFAULT_CAPACITY,
                 channel: SpoolChannel | None = None):
        if layout not in LAYOUTS:
            raise ValueError(f"unknown record layout {layout!r}")
        if channel is not None and channel.slot_bytes < 8 * LAYOUTS[layout] * capacity:
            raise ValueError("spool channel slots smaller than the record buffer")
        self.channel = channel
        if channel is not None:
            channel.prefault()
        self.worker = worker
        self.ops = list(ops)
        self.layout = layout
        self.fields = LAYOUTS[layout]
        self.capacity = capacity
        if layout == "sl":
            self.starts = array("q", bytes(8 * capacity))
            self.ends = array("q", bytes(8 * capacity))
            self.data = array("q")
        else:
            self.data = array("q", bytes(8 * self.fields * capacity))
        self.capacity_values = len(self.data)
        self.board = board
        self.path = spool_path(spool_dir, worker, layout)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.recorded = 0
        self.counts = [0] * len(self.ops)
        self._recent_max = [0] * len(self.ops)
        if channel is None:
            write_spool_meta(spool_dir, worker, self.ops, layout)

    def flush(self, filled: int) -> None:
        """Append the first `filled` values (layout "osli") or records (layout "sl": starts and
        ends) to the spool, through the channel when there is one; update the live counters."""
        if not filled:
            return
        slot = self.channel.acquire() if self.channel is not None else None
        nbytes = 8 * (2 * filled if self.fields == 2 else filled)
        if self.fields == 2:
            if slot is not None:
                records = np.frombuffer(slot, dtype=np.int64, count=2 * filled)
                records = records.reshape(filled, 2)
            else:
                records = np.empty((filled, 2), dtype=np.int64)
            records[:, 0] = np.frombuffer(self.starts, dtype=np.int64, count=filled)
            records[:, 1] = np.frombuffer(self.ends, dtype=np.int64, count=filled)
            records[:, 1] -= records[:, 0]
        else:
            records = np.frombuffer(self.data, dtype=np.int64, count=filled)
            records = records.reshape(-1, self.fields)
            if slot is not None:
                slot[:nbytes] = memoryview(self.data).cast("B")[:nbytes]
        self._count(records)
        if slot is not None:
            del records, slot       # no view may outlive the commit
            self.channel.commit(nbytes)
            if self.channel.parent_gone():
                self._write_orphans()
            return
        if self.channel is not None:
            self._write_orphans()
        if self.fields == 2:
            _write_all(self._fd, records.tobytes())
        else:
            _write_all(self._fd, memoryview(self.data)[:filled])

    def _write_orphans(self) -> None:
        assert self.channel is not None
        for data in self.channel.orphaned():
            _write_all(self._fd, data)

    def _count(self, records: np.ndarray) -> None:
        self.recorded += len(records)
        if self.fields == 2:
            self.counts[0] += len(records)
            self._recent_max[0] = max(self._recent_max[0], int(records[:, 1].max()))
        else:
            # bincount, not np.unique: numpy 2 imports numpy.ma on np.unique's first call, in
            # the worker at its first tick, inside the run (7-10 ms here, 0.8 s under QEMU TCG)
            codes = records[:, 0]
            counted = np.bincount(codes, minlength=len(self.counts))
            for k in np.flatnonzero(counted):
                self.counts[k] += int(counted[k])
                self._recent_max[k] = max(self._recent_max[k],
                                          int(records[codes == k, 2].max()))

    def publish(self, now_ns: int) -> None:
        if self.board is not None:
            self.board.publish(self.worker, now_ns, self.counts, self._recent_max)
        self._recent_max = [0] * len(self.ops)

    def close(self) -> None:
        if self.channel is not None and self._fd >= 0:
            self.channel.settle()
            if self.channel.parent_gone():
                self._write_orphans()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


@dataclass
class WorkerSummary:
    """What a worker says about itself when it ends (its own counters, CPU, status)."""

    worker: int
    role: str
    counted: dict[str, int]
    late: int = 0
    status: str = "ok"          # "ok", or the run Status it forces: failed | interrupted
    reason: str | None = None
    user_s: float = 0.0
    system_s: float = 0.0

    def save(self, spool_dir: Path) -> None:
        write_json_atomic(Path(spool_dir) / f"w{self.worker:04d}.summary.json", self.__dict__)

    @classmethod
    def load(cls, spool_dir: Path, worker: int) -> WorkerSummary | None:
        path = Path(spool_dir) / f"w{worker:04d}.summary.json"
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def read_spools(spool_dir: Path, t0_ns: int,
                chunk_records: int = READ_CHUNK_RECORDS) -> Iterator[pa.RecordBatch]:
    """Stream every worker's spool as ops record batches (times relative to t0_ns)."""
    spool_dir = Path(spool_dir)
    for spool in sorted(spool_dir.glob("w*.spool")):
        worker_text, layout, _ = spool.name.split(".")
        worker = int(worker_text[1:])
        fields = LAYOUTS[layout]
        ops = json.loads((spool_dir / f"{worker_text}.ops.json").read_text())["ops"]
        record_bytes = 8 * fields
        total = spool.stat().st_size // record_bytes   # a torn last record is dropped
        with open(spool, "rb") as f:
            done = 0
            while done < total:
                n = min(chunk_records, total - done)
                records = np.fromfile(f, dtype=np.int64, count=n * fields).reshape(-1, fields)
                done += n
                if fields == 2:
                    codes = np.zeros(len(records), dtype=np.int32)
                    start, latency, intended = records[:, 0], records[:, 1], None
                else:
                    codes = records[:, 0].astype(np.int32)
                    start, latency = records[:, 1], records[:, 2]
                    intended = np.where(records[:, 3] > 0, records[:, 3] - t0_ns, -1)
                yield ops_batch(ops, codes, worker, start - t0_ns, latency, intended)
