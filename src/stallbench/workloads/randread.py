"""randread: iozone-style random reads of one file (seed 000's reproducer).

`--threads` processes read `--record-size` blocks at random block-aligned offsets of a
`--file-size` file, optionally with O_DIRECT, or with `--mmap` by copying them out of a shared
mapping of the file (as mmap-based stores such as LMDB read: the copy runs in user space, and a
page not yet mapped faults in the kernel); op `read`. Each worker draws its offsets in bulk from
its own seeded generator (`--seed` makes runs repeatable).
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import UsageError
from ..core.options import SWITCH, option
from ..core.units import parse_size, size_text
from .base import ProgressFn, Workload, WorkloadResult, whole
from .files import check_space, ensure_file, too_slow

if TYPE_CHECKING:
    from ..core.context import RunContext
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
    mmap: bool = option(False, kind=SWITCH, help="read by copying from a shared mapping of "
                        "the file (the copy is user-space CPU, a page not yet mapped a fault)")
    seed: int = option(1, parse=whole(0, 2**63 - 1), help="random seed", show=str)
# ------------------------------------------------------------------------------------------------


DATA_FILE = "randread.data"


def read_loop(wctx: WorkerContext, path: str, record_size: int, file_size: int, direct: bool,
              seed: int, native: bool = True, mapped: bool = False) -> dict[str, Any]:
    """The hot loop. Per op: one read into a reused buffer (`mapped`: a copy from the file's
    shared mapping), two clock reads, two stores into preallocated arrays, one comparison; in C
    (native/readloop.c) where it could be built, else in Python. Offsets come in batches of the
    buffer's capacity, so the buffer cannot overflow within a batch and needs no per-op
    check."""
    import numpy as np

    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    buffer = mmap.mmap(-1, record_size)             # page aligned, as O_DIRECT needs
    source = None
    rng = np.random.default_rng([seed, wctx.index])
    blocks = file_size // record_size
    loop = _c_loop if native and c_read_loop_ready() else _python_loop
    done = [0]
    try:
        if mapped:
            source = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ)
            source.madvise(mmap.MADV_RANDOM)
        loop(wctx, fd, source, buffer, record_size,
             lambda: rng.integers(0, blocks, wctx.recorder.capacity) * record_size, done)
    except OSError as exc:
        exc.counted = {"read": done[0]}
        raise
    finally:
        if source is not None:
            source.close()
        os.close(fd)
    return {"counted": {"read": done[0]}}


def c_read_loop_ready(ctx: RunContext | None = None) -> bool:
    """Whether read_loop runs in C here (workloads/native); with `ctx`, a run that gets the
    Python loop says so in its notes."""
    from .native import PYTHON_LOOP_NOTE, read_ops

    native, why = read_ops()
    if native is None and ctx is not None:
        ctx.notes.append(PYTHON_LOOP_NOTE.format(why=why))
    return native is not None


def _python_loop(wctx: WorkerContext, fd: int, source: mmap.mmap | None, buffer: mmap.mmap,
                 record_size: int, draw_offsets, done: list[int]) -> None:
    buffers = [buffer]
    now = time.monotonic_ns
    if source is None:
        preadv = os.preadv
    else:
        view, mapped = memoryview(buffer), memoryview(source)

        def preadv(_fd: int, _buffers: list, offset: int) -> None:
            view[:] = mapped[offset:offset + record_size]
    starts, ends = wctx.recorder.starts, wctx.recorder.ends
    j = 0
    next_tick = now()
    finished = False
    try:
        while not finished:
            for offset in draw_offsets().tolist():
                t0 = now()
                preadv(fd, buffers, offset)
                t1 = now()
                starts[j] = t0
                ends[j] = t1
                j += 1
                if t1 >= next_tick:
                    done[0] += j
                    finished, next_tick = wctx.tick(j, now())
                    j = 0
                    if finished:
                        break
            done[0] += j
            wctx.recorder.flush(j)
            j = 0
    except OSError:
        done[0] += j
        wctx.recorder.flush(j)
        raise


def _c_loop(wctx: WorkerContext, fd: int, source: mmap.mmap | None, buffer: mmap.mmap,
            record_size: int, draw_offsets, done: list[int]) -> None:
    """The same loop with the ops in C: it returns at each tick and at the batch's end."""
    import ctypes

    import numpy as np

    from .native import read_ops

    read, _ = read_ops()
    starts, ends = wctx.recorder.starts, wctx.recorder.ends
    starts_at, ends_at = starts.buffer_info()[0], ends.buffer_info()[0]
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    # the mapping is read-only, which ctypes' from_buffer refuses; numpy gives its address
    mapped = None if source is None else np.frombuffer(source, dtype=np.uint8).ctypes.data
    error = ctypes.c_int(0)
    next_tick = time.monotonic_ns()
    finished = False
    j = 0
    try:
        while not finished:
            offsets = draw_offsets()
            at, j = offsets.ctypes.data, 0
            while j < offsets.size and not finished:
                n = read(fd, mapped, address, record_size, at + 8 * j, offsets.size - j,
                         starts_at + 8 * j, ends_at + 8 * j, next_tick, ctypes.byref(error))
                j += n
                if error.value:
                    raise OSError(error.value, os.strerror(error.value))
                if j and ends[j - 1] >= next_tick:
                    done[0] += j
                    finished, next_tick = wctx.tick(j, time.monotonic_ns())
                    offsets = offsets[j:]
                    at, j = offsets.ctypes.data, 0
            done[0] += j
            wctx.recorder.flush(j)
    except OSError:
        done[0] += j
        wctx.recorder.flush(j)
        raise


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
        if opts.direct and opts.mmap:
            raise UsageError("--mmap reads through the page cache: drop --direct or --mmap")
        opts.direct = bool(opts.direct)
        opts.mmap = bool(opts.mmap)
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
                "file_size": opts.file_size, "direct": opts.direct, "seed": opts.seed,
                "native": c_read_loop_ready(ctx), "mapped": opts.mmap}
        specs = [WorkerSpec("reader", ["read"], "sl", read_loop, args)
                 for _ in range(opts.threads)]
        return run_workers(ctx, specs, progress, list(self.ops))


WORKLOAD = RandRead
