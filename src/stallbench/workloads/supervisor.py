"""The life cycle of an external program a workload runs (fio, pgbench, PostgreSQL, a command,
strace), in one place.

start(): the program runs in a session (and so a process group) of its own, joins the variant's
cgroup (ctx.env.child_setup) and optionally drops to a user; it is added to ctx.processes (the
monitors watch it) and written to the cleanup journal at once, as kind `kill` (journal.py, so
`stallbench cleanup` stops it after `kill -9` of stallbench without importing this module) or a
kind of the caller's (`pg_stop`). The journal entry is dropped once the program is reaped.

Program.wait(): wait4 (for the program's rusage, which includes the children it reaped), a
tick about once a second for the live display. On ctx.stop, at the planned end (`end_ns`: the
run's time is up) or at a watchdog deadline (`deadline_ns`: it ran far too long) the stop
ladder runs: each step a signal to the group (or to the leader only, for a server that shuts its
children down itself) and a grace period, then SIGKILL of the whole group. Program.close()
(also the context manager's exit, so every exit path, a signal's included, goes through it)
SIGKILLs whatever is left of the group, reaps the leader, waits until no live process of the
group is left and drops the journal entry.

Outcome.run_status(): how the program ended -> the run's status and reason, declared once in
RUN_STATUS.
"""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..core import journal as journal_mod
from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.journal import Entry
from ..core.signals import held_while_starting
from ..results.runmeta import Status

POLL_S = 0.05
GROUP_GONE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class StopStep:
    """One rung of a stop ladder: send `signal` (to the whole group, or to the leader only) and
    give the program `grace_s` to exit before the next rung (the last is always SIGKILL)."""

    signal: int
    grace_s: float
    group: bool = True


TERMINATE = (StopStep(signal.SIGTERM, 10.0),)


class Ending(enum.Enum):
    EXITED = "exited"          # exit status 0
    FAILED = "failed"          # another exit status, or killed by a signal we did not send
    STOPPED = "stop"           # ctx.stop: Ctrl-C / SIGTERM to stallbench, a failed worker
    TIME_UP = "time up"        # still running at the planned end (end_ns): stopped, complete
    OVERRAN = "deadline"       # still running at the watchdog deadline (deadline_ns)


# how the program ended -> (run status, reason); {what} names the program, {code} is its exit
# status and {detail} the last line of what it printed (": ..." or "")
RUN_STATUS: dict[Ending, tuple[str, str | None]] = {
    Ending.EXITED: (Status.COMPLETE, None),
    Ending.TIME_UP: (Status.COMPLETE, None),
    Ending.STOPPED: (Status.INTERRUPTED, "stopped before {what} finished"),
    Ending.OVERRAN: (Status.FAILED, "{what} ran far past its {planned} and was stopped"),
    Ending.FAILED: (Status.FAILED, "{what} exited with status {code}{detail}"),
}


@dataclass
class Outcome:
    ending: Ending
    exit_code: int | None           # os.waitstatus_to_exitcode: -N when killed by signal N
    rusage: dict[str, float]        # user_s, system_s (with its reaped children), elapsed_s

    @property
    def stopped(self) -> str | None:
        """None, "stop" or "deadline" (run.json workload_summary.stopped)."""
        if self.ending in (Ending.STOPPED, Ending.OVERRAN):
            return self.ending.value
        return "deadline" if self.ending is Ending.TIME_UP else None

    def run_status(self, what: str, detail: str | None = None,
                   planned: str = "runtime") -> tuple[str, str | None]:
        status, reason = RUN_STATUS[self.ending]
        if reason is not None:
            reason = reason.format(what=what, code=self.exit_code, planned=planned,
                                   detail=f": {detail}" if detail else "")
        return status, reason


def last_line(text: str) -> str | None:
    lines = text.strip().splitlines()
    return lines[-1] if lines else None


def child_preexec(ctx: RunContext, user: tuple[int, int] | None = None) -> Callable[[], None]:
    """preexec_fn: join the variant's cgroup, optionally drop to (uid, gid)."""
    setup = ctx.env.child_setup

    def preexec() -> None:
        setup()
        if user is not None:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])

    return preexec


class Program:
    """A started program: its Popen, process group, journal entry and start time."""

    def __init__(self, ctx: RunContext, proc: subprocess.Popen, entry: Entry | None,
                 started: float):
        self.ctx = ctx
        self.proc = proc
        self.pid = proc.pid              # also its process group id (its own session)
        self.entry = entry
        self.started = started
        self.outcome: Outcome | None = None

    @property
    def stdout(self) -> IO[bytes] | None:
        return self.proc.stdout

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def signal(self, sig: int, group: bool = True) -> None:
        try:
            if group:
                os.killpg(self.pid, sig)
            elif self.proc.returncode is None:
                os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def poll(self) -> Outcome | None:
        """Reap the program if it has exited (wait4, WNOHANG)."""
        if self.outcome is not None:
            return self.outcome
        try:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:      # reaped elsewhere (Popen.wait): no rusage
            pid, status, usage = self.pid, 0, None
        if pid != self.pid:
            return None
        code = os.waitstatus_to_exitcode(status) if usage is not None else self.proc.returncode
        self.proc.returncode = code
        self.outcome = Outcome(
            Ending.EXITED if code == 0 else Ending.FAILED, code,
            {"user_s": usage.ru_utime if usage else 0.0,
             "system_s": usage.ru_stime if usage else 0.0,
             "elapsed_s": time.monotonic() - self.started})
        return self.outcome

    def wait(self, stop: threading.Event | None = None, *, end_ns: int | None = None,
             deadline_ns: int | None = None, ladder: Sequence[StopStep] = TERMINATE,
             tick: Callable[[], None] | None = None) -> Outcome:
        """Wait for the program to exit, calling tick() about once a second; on `stop`, at
        `end_ns` or at `deadline_ns` (CLOCK_MONOTONIC ns) run the stop ladder."""
        why: Ending | None = None
        steps: list[StopStep] = []
        next_step_at = 0.0
        next_tick = time.monotonic() + 1.0
        while True:
            outcome = self.poll()
            if outcome is not None:
                if why is not None:
                    outcome.ending = why
                return outcome
            now = time.monotonic()
            if why is None:
                now_ns = time.monotonic_ns()
                if stop is not None and stop.is_set():
                    why = Ending.STOPPED
                elif end_ns is not None and now_ns >= end_ns:
                    why = Ending.TIME_UP
                elif deadline_ns is not None and now_ns >= deadline_ns:
                    why = Ending.OVERRAN
                if why is not None:
                    steps = [*ladder, StopStep(signal.SIGKILL, float("inf"))]
                    next_step_at = now
            if steps and now >= next_step_at:
                step = steps.pop(0)
                self.signal(step.signal, step.group)
                next_step_at = now + step.grace_s
            if tick is not None and now >= next_tick:
                tick()
                next_tick = now + 1.0
            time.sleep(POLL_S)

    def stop(self, ladder: Sequence[StopStep] = TERMINATE, kill_wait_s: float = 5.0) -> Outcome:
        """Stop the program now through the ladder, SIGKILL last; its outcome (ending STOPPED).
        A program still not reaped kill_wait_s after SIGKILL is left to close()."""
        for step in [*ladder, StopStep(signal.SIGKILL, kill_wait_s)]:
            if self.poll() is not None:
                break
            self.signal(step.signal, step.group)
            deadline = time.monotonic() + step.grace_s
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
        outcome = self.poll() or Outcome(Ending.STOPPED, None, {})
        outcome.ending = Ending.STOPPED
        return outcome

    def close(self) -> None:
        """SIGKILL what is left of the group, reap the leader, wait until the group is gone,
        drop the journal entry. Safe to call twice."""
        self.signal(signal.SIGKILL)
        if self.poll() is None:
            try:
                self.proc.wait()
            except ChildProcessError:
                pass
            self.poll()
        # a pid is not reused while its process group exists: the group is still ours
        deadline = time.monotonic() + GROUP_GONE_TIMEOUT_S
        while group_members(self.pid) and time.monotonic() < deadline:
            self.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        for stream in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            if stream is not None:
                stream.close()
        if self.entry is not None and self.ctx.journal is not None:
            self.ctx.journal.forget(self.entry)
            self.entry = None

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(ctx: RunContext, argv: list[str], *, cwd: Path | str | None = None,
          stdout: Any = subprocess.DEVNULL, stderr: Any = subprocess.DEVNULL,
          user: tuple[int, int] | None = None, pass_fds: Sequence[int] = (),
          env: dict[str, str] | None = None, journal_kind: str = "kill",
          **journal_fields: Any) -> Program:
    """Start a program in its own session, in the variant's cgroup, registered with the
    ProcessSet and the journal (kind `journal_kind`, with pid, start_time and journal_fields)."""
    started = time.monotonic()
    proc = None
    entry = None
    if journal_kind == "kill":
        journal_fields = {"group": True, **journal_fields}
    try:
        with held_while_starting():     # a Ctrl-C inside Popen() would orphan the program
            try:
                proc = subprocess.Popen(
                    argv, cwd=cwd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                    start_new_session=True, preexec_fn=child_preexec(ctx, user),
                    pass_fds=tuple(pass_fds), env=env)
            except FileNotFoundError as exc:
                raise UsageError(f"cannot run {argv[0]!r}: not found; install it or fix "
                                 "PATH") from exc
            except PermissionError as exc:
                raise UsageError(f"cannot run {argv[0]!r}: permission denied") from exc
            ctx.processes.add(proc.pid)
            if ctx.journal is not None:
                entry = ctx.journal.push(journal_kind, pid=proc.pid,
                                         start_time=journal_mod.process_start_time(proc.pid),
                                         **journal_fields)
    except BaseException:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if entry is not None and ctx.journal is not None:
                ctx.journal.forget(entry)
        raise
    return Program(ctx, proc, entry, started)


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str


def run_to_end(ctx: RunContext, argv: list[str], what: str, *, timeout_s: float | None = 600,
               cwd: Path | str | None = None, user: tuple[int, int] | None = None) -> Finished:
    """Run a short program to its end, capturing its output (like subprocess.run), but
    supervised: journaled, in its own group, and on timeout or any exception (Ctrl-C) the group
    is killed and reaped before this returns. RuntimeError on timeout."""
    program = start(ctx, argv, cwd=cwd, user=user, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)
    with program:
        try:
            out, err = program.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{what} did not finish within {timeout_s:g} s") from None
        code = program.proc.returncode
    return Finished(code, out.decode(errors="replace"), err.decode(errors="replace"))


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is pgid, from /proc."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(name))
    return members
