"""pgioperf: a PostgreSQL-like I/O mix, after Andres Freund's pgioperf (as run by MMTests).

One process per worker:
- a WAL writer: 8 KiB sequential writes into a wrapping WAL file, fdatasync after every 5th
  write; op `wal` is each write, op `commit` is write+fdatasync timed together. Paced: the k-th
  write is planned at t0 + k * wal_interval and its planned start is recorded (`intended_ns`),
  so response time without coordinated omission is available; writes that start more than one
  interval late are counted.
- a checkpointer: paced random 8 KiB writes into the data file, fsync after every
  `checkpoint_fsync_every` writes; ops `checkpoint` and `checkpoint-fsync`.
- `readers` random readers of 8 KiB blocks of the data file; op `read`.

Fixes over the original, each deliberate: every worker has its own seed (`--seed` makes runs
repeatable); offsets are block aligned; the run is time based (`--duration`); every operation is
recorded (the original printed one maximum per 10,000 reads, so starved readers left no trace);
the checkpointer's fsync is timed; paced writers record their planned start.
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import UsageError
from ..core.options import option
from ..core.units import duration_text, parse_duration, parse_size
from .base import ProgressFn, Workload, WorkloadResult, whole
from .files import check_space, ensure_file, too_slow
from .randread import c_read_loop_ready, read_loop

if TYPE_CHECKING:
    from ..core.context import RunContext
    from .workers import WorkerContext


# -- options: the one declaration of pgioperf's flags, plan keys, defaults and checks ----------
@dataclass
class PgIoPerfOptions:
    readers: int = option(16, parse=whole(0, 1024), help="random readers", show=str)
    data_size: int | None = option(None, parse=parse_size, help="data file size (default: 2x "
                                   "the memory available to the workload)")
    wal_size: int | None = option(None, parse=parse_size,
                                  help="WAL file size (default: data/48, >= 16M)")
    wal_interval: float = option(parse_duration("1ms"), parse=parse_duration,
                                 help="WAL write pacing", show=duration_text)
    checkpoint_interval: float = option(parse_duration("200us"), parse=parse_duration,
                                        help="checkpointer write pacing", show=duration_text)
    checkpoint_fsync_every: int = option(100000, parse=whole(1, 1 << 40),
                                         help="checkpointer fsync after this many writes",
                                         show=str)
    seed: int = option(1, parse=whole(0, 2**63 - 1), help="random seed", show=str)
# ------------------------------------------------------------------------------------------------

BLOCK = 8192
COMMIT_EVERY = 5
DATA_FILE = "pgioperf.data"
WAL_FILE = "pgioperf.wal"
MIN_WAL = 16 << 20
OFFSET_BATCH = 1 << 14


def _block_buffer(seed: int) -> list[mmap.mmap]:
    import numpy as np

    buffer = mmap.mmap(-1, BLOCK)
    buffer.write(np.random.default_rng(seed).bytes(BLOCK))
    return [buffer]


def paced_write_loop(wctx: WorkerContext, path: str, file_size: int, interval_ns: int,
                     sync_every: int, fsync_data: bool, sequential: bool, sync_with_write: bool,
                     seed: int) -> dict[str, Any]:
    """Paced 8 KiB writes (op code 0), the k-th planned at base + k * interval_ns, each recorded
    with its planned start; after every `sync_every` writes an fdatasync (or fsync), op code 1,
    timed either together with the write before it (a WAL commit) or alone (a checkpoint's
    fsync). Offsets are sequential and wrapping (WAL) or random (data file), drawn in bulk."""
    import numpy as np

    fd = os.open(path, os.O_WRONLY)
    buffers = _block_buffer(seed + (0 if sequential else 1))
    rng = np.random.default_rng([seed, wctx.index])
    blocks = file_size // BLOCK
    pwritev, now, sleep = os.pwritev, time.monotonic_ns, time.sleep
    sync = os.fsync if fsync_data else os.fdatasync
    data = wctx.recorder.data
    room = wctx.recorder.capacity_values - 8   # two records may be added per step
    writes = syncs = late = 0
    j = k = 0
    base = now()
    next_tick = base
    finished = False
    try:
        while not finished:
            if sequential:
                offsets = ((np.arange(k, k + OFFSET_BATCH) % blocks) * BLOCK).tolist()
            else:
                offsets = (rng.integers(0, blocks, OFFSET_BATCH) * BLOCK).tolist()
            for offset in offsets:
                planned = base + k * interval_ns
                t = now()
                if t < planned:
                    sleep((planned - t) / 1e9)
                t0 = now()
                pwritev(fd, buffers, offset)
                t1 = now()
                data[j] = 0
                data[j + 1] = t0
                data[j + 2] = t1 - t0
                data[j + 3] = planned
                j += 4
                writes += 1
                if t0 - planned > interval_ns:
                    late += 1
                k += 1
                if k % sync_every == 0:
                    if not sync_with_write:
                        t0 = now()
                    sync(fd)
                    t1 = now()
                    data[j] = 1
                    data[j + 1] = t0
                    data[j + 2] = t1 - t0
                    data[j + 3] = planned if sync_with_write else -1
                    j += 4
                    syncs += 1
                if t1 >= next_tick or j >= room:
                    finished, next_tick = wctx.tick(j, now())
                    j = 0
                    if finished:
                        break
    except OSError as exc:
        wctx.recorder.flush(j)
        exc.counted = dict(zip(wctx.spec.ops, (writes, syncs), strict=True))
        raise
    finally:
        os.close(fd)
    return {"counted": dict(zip(wctx.spec.ops, (writes, syncs), strict=True)), "late": late}


class PgIoPerf(Workload):
    Options = PgIoPerfOptions
    name = "pgioperf"
    ops = ("wal", "commit", "checkpoint", "checkpoint-fsync", "read")
    help = "PostgreSQL-like mix: paced WAL commits, a checkpointer, random readers"
    default_warmup_s = 1.0      # the writers' first fsyncs and the readers' first misses

    def __init__(self, readers: int, data_size: int | None, wal_size: int | None,
                 wal_interval_ns: int, checkpoint_interval_ns: int, checkpoint_fsync_every: int,
                 seed: int):
        self.readers = readers
        self.data_size = data_size
        self.wal_size = wal_size
        self.wal_interval_ns = wal_interval_ns
        self.checkpoint_interval_ns = checkpoint_interval_ns
        self.checkpoint_fsync_every = checkpoint_fsync_every
        self.seed = seed
        self.sized_by_default = data_size is None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> PgIoPerf:
        opts = cls.parse_options(options)
        if opts.data_size is not None and opts.data_size < 16 * BLOCK:
            raise UsageError("--data-size must be at least 128K")
        if opts.wal_size is not None and opts.wal_size < BLOCK * COMMIT_EVERY:
            raise UsageError("--wal-size must be at least 40K")
        return cls(opts.readers, opts.data_size, opts.wal_size, int(opts.wal_interval * 1e9),
                   int(opts.checkpoint_interval * 1e9), opts.checkpoint_fsync_every, opts.seed)

    def resolve(self, memory_available: int) -> None:
        if self.data_size is None:
            self.data_size = 2 * memory_available
        self.data_size -= self.data_size % BLOCK
        if self.wal_size is None:
            self.wal_size = max(MIN_WAL, self.data_size // 48)
        self.wal_size -= self.wal_size % BLOCK

    def space_needed(self, memory_available: int) -> int:
        self.resolve(memory_available)
        return self.data_size + self.wal_size

    def default_size_flag(self) -> str | None:
        return "--data-size" if self.sized_by_default else None

    def params(self) -> dict[str, Any]:
        return {"readers": self.readers, "data_size": self.data_size, "wal_size": self.wal_size,
                "block_size": BLOCK, "commit_every": COMMIT_EVERY,
                "wal_interval_ns": self.wal_interval_ns,
                "checkpoint_interval_ns": self.checkpoint_interval_ns,
                "checkpoint_fsync_every": self.checkpoint_fsync_every, "seed": self.seed}

    def prepare(self, ctx: RunContext) -> None:
        data, wal = ctx.workdir / DATA_FILE, ctx.workdir / WAL_FILE
        check_space(ctx.workdir, self.data_size + self.wal_size, [data, wal])
        ensure_file(data, self.data_size, ctx.log, *too_slow(self, ctx.duration_s))
        ensure_file(wal, self.wal_size, ctx.log, *too_slow(self, ctx.duration_s))

    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        from .workers import WorkerSpec, run_workers

        data, wal = str(ctx.workdir / DATA_FILE), str(ctx.workdir / WAL_FILE)
        specs = [
            WorkerSpec("wal", ["wal", "commit"], "osli", paced_write_loop,
                       {"path": wal, "file_size": self.wal_size,
                        "interval_ns": self.wal_interval_ns, "sync_every": COMMIT_EVERY,
                        "fsync_data": False, "sequential": True, "sync_with_write": True,
                        "seed": self.seed}),
            WorkerSpec("checkpointer", ["checkpoint", "checkpoint-fsync"], "osli",
                       paced_write_loop,
                       {"path": data, "file_size": self.data_size,
                        "interval_ns": self.checkpoint_interval_ns,
                        "sync_every": self.checkpoint_fsync_every, "fsync_data": True,
                        "sequential": False, "sync_with_write": False, "seed": self.seed}),
        ]
        reader_args = {"path": data, "record_size": BLOCK, "file_size": self.data_size,
                       "direct": False, "seed": self.seed,
                       "native": bool(self.readers) and c_read_loop_ready(ctx)}
        specs += [WorkerSpec("reader", ["read"], "sl", read_loop, reader_args)
                  for _ in range(self.readers)]
        return run_workers(ctx, specs, progress, list(self.ops))


WORKLOAD = PgIoPerf
