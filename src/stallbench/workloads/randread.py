"""randread: iozone-style random reads of one file (seed 000's reproducer).

`--threads` processes read `--record-size` blocks at random block-aligned offsets of a
`--file-size` file, optionally with O_DIRECT; op `read`. Each worker draws its offsets in bulk
from its own seeded generator (`--seed` makes runs repeatable).
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..options import SWITCH, option
from ..units import parse_size, size_text
from .base import ProgressFn, Workload, WorkloadResult, whole
from .files import check_space, ensure_file, too_slow

if TYPE_CHECKING:
    from ..context import RunContext
    from .workers import WorkerContext


# -- options: the one declaration of randread's flags, plan keys, defaults and checks ----------
@dataclass
class RandReadOptions:
    threads: int = option(1, parse=whole(1, 1024), help="reader processes", show=str)
    file_size: int | None = option(None, parse=parse_size, help="size of the file read (default: "
                                   "2x memory available to the workload)")
    record_size: int = option(4096, parse=parse_size, help="bytes per read",
                              show=size_text)
    direct: bool = option(False, kind=SWITCH, help="O_DIRECT reads")
    seed: int = option(1, parse=whole(0, 2**63 - 1), help="random seed", show=str)
# ------------------------------------------------------------------------------------------------


DATA_FILE = "randread.data"


def read_loop(wctx: WorkerContext, path: str, record_size: int, file_size: int, direct: bool,
              seed: int) -> dict[str, Any]:
    """The hot loop. Per op: one preadv into a reused buffer, two clock reads, two stores into
    preallocated arrays, one comparison. Offsets come in batches of the buffer's capacity, so
    the buffer cannot overflow within a batch and needs no per-op check."""
    import numpy as np

    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    buffers = [mmap.mmap(-1, record_size)]          # page aligned, as O_DIRECT needs
    rng = np.random.default_rng([seed, wctx.index])
    blocks = file_size // record_size
    batch = wctx.recorder.capacity
    preadv = os.preadv
    now = time.monotonic_ns
    starts, ends = wctx.recorder.starts, wctx.recorder.ends
    count = 0
    j = 0
    next_tick = now()
    finished = False
    try:
        while not finished:
            offsets = (rng.integers(0, blocks, batch) * record_size).tolist()
            for offset in offsets:
                t0 = now()
                preadv(fd, buffers, offset)
                t1 = now()
                starts[j] = t0
                ends[j] = t1
                j += 1
                if t1 >= next_tick:
                    count += j
                    finished, next_tick = wctx.tick(j, now())
                    j = 0
                    if finished:
                        break
            count += j
            wctx.recorder.flush(j)
            j = 0
    except OSError as exc:
        count += j
        wctx.recorder.flush(j)
        exc.counted = {"read": count}
        raise
    finally:
        os.close(fd)
    return {"counted": {"read": count}}


class RandRead(Workload):
    Options = RandReadOptions
    name = "randread"
    ops = ("read",)
    help = "iozone-style random reads of one file"

    def __init__(self, options: RandReadOptions):
        self.options = options      # params() is these, file_size resolved
        self.sized_by_default = options.file_size is None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RandRead:
        opts = cls.parse_options(options)
        if opts.record_size % 512:
            raise UsageError("--record-size must be a multiple of 512 bytes")
        if opts.file_size is not None and opts.file_size < opts.record_size:
            raise UsageError("--file-size must be at least one --record-size")
        opts.direct = bool(opts.direct)
        return cls(opts)

    def resolve(self, memory_available: int) -> None:
        opts = self.options
        if opts.file_size is None:
            opts.file_size = 2 * memory_available
        opts.file_size -= opts.file_size % opts.record_size

    def space_needed(self, memory_available: int) -> int:
        self.resolve(memory_available)
        return self.options.file_size

    def default_size_flag(self) -> str | None:
        return "--file-size" if self.sized_by_default else None

    def prepare(self, ctx: RunContext) -> None:
        path = ctx.workdir / DATA_FILE
        check_space(ctx.workdir, self.options.file_size, [path])
        ensure_file(path, self.options.file_size, ctx.log, *too_slow(self, ctx.duration_s))

    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        from .workers import WorkerSpec, run_workers

        opts = self.options
        args = {"path": str(ctx.workdir / DATA_FILE), "record_size": opts.record_size,
                "file_size": opts.file_size, "direct": opts.direct, "seed": opts.seed}
        specs = [WorkerSpec("reader", ["read"], "sl", read_loop, args)
                 for _ in range(opts.threads)]
        return run_workers(ctx, specs, progress, list(self.ops))


WORKLOAD = RandRead
