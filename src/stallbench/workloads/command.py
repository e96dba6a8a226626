"""Workload `command`: any program, its system calls timed (one op per system call name).

`stallbench run command [--syscalls read,pread64] [--tracer auto|tracefs|strace] -- CMD ARGS`

The tracers (tracefs as root, else strace) are in syscalltrace.py. With tracefs the program is
started before the tracer is switched on and held at a gate (a pipe read in the child before
exec) so that nothing it does after exec is missed. The program runs under the supervisor
(supervisor.py) until it exits or ctx.duration_s passes (then it is sent SIGTERM, and SIGKILL
10 s later): that is a complete run; a stop of the run is interrupted; another exit status
than 0 fails the run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from typing import Any

from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.options import REMAINDER, option
from ..core.tracefs import find_tracefs
from ..logformats.loglines import LineTail
from ..logformats.samples import Samples, clock_offset_ns
from ..logformats.strace import StraceParser
from . import supervisor
from .base import ProgressFn, Workload, WorkloadResult, logged_ops
from .syscalltrace import (
    STRACE_NOTE,
    TRACEFS_NOTE,
    TracefsSyscalls,
    gated_argv,
    strace_argv,
    tracefs_unavailable,
    wait_at_gate,
)

ROLE = "command"        # the worker role of every thread of the command

# -- options: the one declaration of command's flags, plan keys, defaults and checks -----------
@dataclass
class CommandOptions:
    syscalls: Any = option(None, metavar="LIST",
                           help="comma-separated system calls to time (default: all)")
    tracer: str = option("auto", choices=("auto", "tracefs", "strace"),
                         help="tracefs (root, low overhead) or strace; auto picks tracefs when "
                              "it can")
    argv: Any = option(None, kind=REMAINDER, metavar="-- CMD ARGS", help="the command to run")
# ------------------------------------------------------------------------------------------------


class CommandWorkload(Workload):
    Options = CommandOptions
    name = "command"
    ops = ()
    help = "run any command and time its system calls (tracefs as root, else strace)"

    def __init__(self, argv: list[str], syscalls: list[str] | None, tracer: str):
        self.argv = argv
        self.syscalls = syscalls
        self.tracer = tracer
        if syscalls:
            # the asked-for calls are this run's ops: one that never completes still shows
            self.ops = tuple(syscalls)
        self.exit_code: int | None = None
        self._clock_offset = 0

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> CommandWorkload:
        opts = cls.parse_options(options)
        argv = opts.argv or []
        if isinstance(argv, str):
            argv = shlex.split(argv)
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise UsageError("command: argv must be a list of strings or a command line")
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            raise UsageError("command: give the command to run after '--', e.g. "
                             "stallbench run command -- dd if=FILE of=/dev/null")
        if shutil.which(argv[0]) is None:
            raise UsageError(f"command: {argv[0]!r} not found (not executable or not on PATH)")
        syscalls = opts.syscalls
        if isinstance(syscalls, str):
            syscalls = [s.strip() for s in syscalls.split(",") if s.strip()]
        if syscalls is not None:
            if not isinstance(syscalls, list) or not syscalls:
                raise UsageError("command: --syscalls takes a comma-separated list, "
                                 "e.g. read,pread64")
            for name in syscalls:
                if not isinstance(name, str) or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                    raise UsageError(f"command: {name!r} is not a system call name")
        tracer = opts.tracer or "auto"
        if tracer not in ("auto", "tracefs", "strace"):
            raise UsageError("command: --tracer must be auto, tracefs or strace")
        if tracer == "tracefs":
            reason = tracefs_unavailable()
            if reason:
                raise UsageError(f"command: --tracer tracefs is not possible ({reason}); "
                                 "use --tracer strace")
        if tracer == "auto":
            tracer = "strace" if tracefs_unavailable() else "tracefs"
        if tracer == "strace" and shutil.which("strace") is None:
            raise UsageError("command: strace is not installed (apt install strace), and "
                             "tracefs needs root")
        root = find_tracefs()
        if tracer == "tracefs" and syscalls and root is not None:
            for name in syscalls:
                if not os.path.isdir(f"{root}/events/syscalls/sys_enter_{name}"):
                    raise UsageError(f"command: no system call {name!r} in "
                                     f"{root}/events/syscalls")
        return cls(list(argv), syscalls, tracer)

    def params(self) -> dict[str, Any]:
        return {"argv": self.argv, "syscalls": self.syscalls, "tracer": self.tracer}

    def prepare(self, ctx: RunContext) -> None:
        pass

    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        if self.tracer == "tracefs":
            samples, notes, outcome = self._run_tracefs(ctx, progress)
            shift_ns = 0        # already on the run clock
        else:
            samples, notes, outcome = self._run_strace(ctx, progress)
            # strace -ttt prints wall-clock time: put it on the run's monotonic clock
            shift_ns = self._clock_offset + ctx.t0_ns
        self.exit_code = outcome.exit_code
        ctx.notes.extend(notes)
        if outcome.ending is supervisor.Ending.TIME_UP:
            ctx.notes.append(f"the command was still running after {ctx.duration_s:g} s and "
                             "was stopped (SIGTERM)")
        status, reason = outcome.run_status("the command")
        # each thread that made a timed call is a worker (its thread id): one role, so that
        # the where section compares the command's threads across runs and variants
        extra = {"exit_code": self.exit_code, "tracer": self.tracer,
                 "stopped": outcome.stopped, "counts": samples.counts(),
                 "worker_roles": {int(t): ROLE for t in sorted(set(samples.worker))}}
        return WorkloadResult(batches=logged_ops(samples, shift_ns), counted=samples.counts(),
                              rusage=outcome.rusage, extra=extra, status=status, reason=reason)

    def _end_ns(self, ctx: RunContext) -> int:
        return ctx.t0_ns + int(ctx.duration_s * 1e9)

    def _run_tracefs(self, ctx: RunContext, progress: ProgressFn):
        gate_r, gate_w = os.pipe()
        gate_fd = gate_r
        tracer = TracefsSyscalls(ctx, self.syscalls)
        notes = [TRACEFS_NOTE]
        try:
            with supervisor.start(ctx, gated_argv(self.argv, gate_r), cwd=ctx.workdir,
                                  pass_fds=(gate_r,)) as program:
                os.close(gate_r)
                gate_r = -1
                wait_at_gate(program.pid, gate_fd)
                tracer.setup(program.pid)
                ctx.workload_starting()
                os.write(gate_w, b"g")
                since = 0

                def tick() -> None:
                    nonlocal since
                    progress(tracer.progress(since))
                    since = len(tracer.samples)

                outcome = program.wait(ctx.stop, end_ns=self._end_ns(ctx), tick=tick)
        finally:
            if gate_r >= 0:
                os.close(gate_r)
            os.close(gate_w)
            notes.extend(tracer.finish())
        return tracer.samples, notes, outcome

    def _run_strace(self, ctx: RunContext, progress: ProgressFn):
        log = ctx.run_dir / "strace.log"
        offset = clock_offset_ns()
        parser = StraceParser(log, set(self.syscalls) if self.syscalls else None)
        tail = LineTail(log)

        def feed(final: bool = False) -> None:
            for lineno, line in tail.lines(final):
                parser.feed(lineno, line)

        since = 0

        def tick() -> None:
            nonlocal since
            feed()
            if parser.samples is not None:
                progress(parser.samples.progress(since))
                since = len(parser.samples)

        with supervisor.start(ctx, [*strace_argv(log, self.syscalls), "--", *self.argv],
                              cwd=ctx.workdir) as program:
            ctx.workload_starting()   # strace has no start gate: the monitors attach as it starts
            outcome = program.wait(ctx.stop, end_ns=self._end_ns(ctx), tick=tick)
        feed(final=True)
        samples = parser.samples or Samples("epoch")
        self._clock_offset = offset
        log.unlink(missing_ok=True)
        return samples, [STRACE_NOTE, *parser.notes()], outcome


WORKLOAD = CommandWorkload
