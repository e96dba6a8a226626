"""The external-program supervisor on real programs: a group that ignores SIGTERM is SIGKILLed
after the grace period and nothing of it is left in /proc; every way a program ends maps to the
declared run status; wait4's rusage agrees with what the program measured of itself; a Ctrl-C
while a short tool runs kills and reaps it before the exception goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import needs_strace, stallbench_cmd
from stallbench.core.context import EnvState, RunContext
from stallbench.core.journal import Journal
from stallbench.workloads import supervisor
from stallbench.workloads.supervisor import Ending, StopStep

pytestmark = pytest.mark.machine


@pytest.fixture
def ctx(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir()
    with Journal(state) as journal:
        yield RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=1,
                         journal=journal)


def _journal_kills(ctx: RunContext) -> list[int]:
    """pids of the `kill` entries in the journal file on disk (what cleanup would read)."""
    data = json.loads(ctx.journal.path.read_text())
    return [e["pid"] for e in data["entries"] if e["kind"] == "kill"]


def _in_group(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process of the group, read from /proc independently of the module."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                found.append((int(name), fields[0]))
    return found


# the leader and a grandchild both ignore SIGTERM; the leader says when both are set up
STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    time.sleep(120)
    os._exit(0)
print(child, flush=True)
time.sleep(120)
"""


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_and_leaves_nothing(ctx) -> None:
    program = supervisor.start(ctx, [sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE)
    with program:
        grandchild = int(program.stdout.readline())
        assert {pid for pid, _ in _in_group(program.pid)} == {program.pid, grandchild}
        assert _journal_kills(ctx) == [program.pid]        # journaled while it runs
        assert program.pid in ctx.processes.roots()
        ctx.stop.set()
        begun = time.monotonic()
        outcome = program.wait(ctx.stop, ladder=(StopStep(signal.SIGTERM, 1.0),))
        waited = time.monotonic() - begun
    assert outcome.ending is Ending.STOPPED
    assert outcome.exit_code == -signal.SIGKILL           # SIGTERM was ignored: SIGKILL ended it
    assert 1.0 <= waited < 10.0
    assert [(pid, st) for pid, st in _in_group(program.pid) if st not in "ZX"] == []
    assert not os.path.exists(f"/proc/{grandchild}") or \
        Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    assert _journal_kills(ctx) == []                       # entry dropped once reaped


SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.mark.parametrize("case, argv, expected", [
    ("exit 0", ["sh", "-c", "exit 0"], ("complete", None)),
    ("exit 3", ["sh", "-c", "echo 'bad thing' >&2; exit 3"],
     ("failed", "prog exited with status 3: bad thing")),
    ("killed by its own signal", ["sh", "-c", "kill -SEGV $$"],
     ("failed", "prog exited with status -11")),
    ("stopped", SLEEP, ("interrupted", "stopped before prog finished")),
    ("overran", SLEEP, ("failed", "prog ran far past its runtime and was stopped")),
    ("time up", SLEEP, ("complete", None)),
])
def test_every_ending_maps_to_the_declared_run_status(ctx, tmp_path, case, argv,
                                                      expected) -> None:
    err = tmp_path / "stderr"
    with open(err, "w") as stderr:
        program = supervisor.start(ctx, argv, stderr=stderr)
    now = time.monotonic_ns()
    if case == "stopped":
        threading.Timer(0.3, ctx.stop.set).start()
    with program:
        outcome = program.wait(
            ctx.stop, end_ns=now + 300_000_000 if case == "time up" else None,
            deadline_ns=now + 300_000_000 if case == "overran" else None)
    status = outcome.run_status("prog", supervisor.last_line(err.read_text()))
    assert status == expected
    if case in ("stopped", "overran", "time up"):
        assert outcome.exit_code == -signal.SIGTERM        # the ladder's first step did it
        assert outcome.stopped == {"stopped": "stop"}.get(case, "deadline")
    else:
        assert outcome.stopped is None


# burns CPU in user space and in the kernel, then reports what it measured of itself
BURN = """
import os, time
end = time.process_time() + 0.4
while time.process_time() < end:
    pass
fd = os.open("/dev/zero", os.O_RDONLY)
for _ in range(40000):
    os.read(fd, 65536)
t = os.times()
print(t.user, t.system, flush=True)
time.sleep(0.3)
"""


def test_rusage_is_the_programs_own_cpu_time_from_wait4(ctx) -> None:
    begun = time.monotonic()
    with supervisor.start(ctx, [sys.executable, "-c", BURN], stdout=subprocess.PIPE) as program:
        user, system = (float(x) for x in program.stdout.readline().split())
        outcome = program.wait()
    assert outcome.ending is Ending.EXITED and outcome.exit_code == 0
    usage = outcome.rusage
    assert user + system >= 0.4                         # process_time counts both
    assert user <= usage["user_s"] < user + 0.1          # its own clock ticks, plus the exit
    assert system <= usage["system_s"] < system + 0.1
    # one thread: its wall time holds its CPU time and the last sleep
    assert user + system + 0.3 <= usage["elapsed_s"] <= time.monotonic() - begun


def test_ctrl_c_during_a_short_tool_kills_and_reaps_it_first(ctx) -> None:
    main = threading.main_thread().ident
    threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        supervisor.run_to_end(ctx, SLEEP, "sleeper")
    [pid] = ctx.processes.roots()
    assert not os.path.exists(f"/proc/{pid}")             # killed and reaped, not a zombie
    assert _journal_kills(ctx) == []


def test_a_program_that_cannot_start_is_one_clear_error(ctx) -> None:
    from stallbench.core.errors import UsageError

    with pytest.raises(UsageError, match="not found; install it or fix PATH"):
        supervisor.start(ctx, ["/nonexistent/program"])
    assert _journal_kills(ctx) == []


# a shell that leaves a background child, then waits: the whole group must go at cleanup
FAMILY = """sleep 300 &
echo $! $$ > "$1"
wait
"""


@needs_strace
# the journal's `kill` stops the leader (strace, which detaches from the shell on SIGTERM); the
# rest of the group goes with the run's memory cgroup, which only root gets
@pytest.mark.root
def test_kill_9_of_stallbench_then_cleanup_stops_the_programs_it_started(tmp_path) -> None:
    script = tmp_path / "family.sh"
    script.write_text(FAMILY)
    pids_file = tmp_path / "pids"
    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "STALLBENCH_STATE_DIR": str(state)}
    proc = subprocess.Popen(
        stallbench_cmd("run", "command", "--results", str(tmp_path / "results"), "--variant",
                       "v", "--monitors", "none", "--no-progress", "--duration", "120",
                       "--tracer", "strace", "--", "sh", str(script), str(pids_file)),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (pids_file.exists() and pids_file.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        family = [int(x) for x in pids_file.read_text().split()]
        journaled = [e for path in state.glob("journal-*.json")
                     for e in json.loads(path.read_text())["entries"] if e["kind"] == "kill"]
        [strace_pid] = [e["pid"] for e in journaled]
        proc.kill()
        proc.wait(timeout=30)
        assert all(os.path.exists(f"/proc/{pid}") for pid in [strace_pid, *family])
        cleanup = subprocess.run(stallbench_cmd("cleanup"), env=env, capture_output=True,
                                 text=True, timeout=120)
        assert cleanup.returncode == 0, cleanup.stderr
        assert f"undone: kill (pid={strace_pid}" in cleanup.stdout
        deadline = time.monotonic() + 10
        while _in_group(strace_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p, st in _in_group(strace_pid) if st not in "ZX"] == []
        assert not [pid for pid in family if os.path.exists(f"/proc/{pid}") and
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    not in "ZX"]
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in (int(x) for x in (pids_file.read_text().split()
                                     if pids_file.exists() else [])):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_kill_undo_stops_a_group_whose_leader_is_already_gone(ctx) -> None:
    """After kill -9 of stallbench, `stallbench cleanup` undoes the journal's `kill` entry: with
    `group` it stops every process of the program's group, also when its leader died first
    (the shell here), and only those that started after it."""
    from stallbench.core.journal import process_start_time, run_undo

    leader = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"],
                              start_new_session=True)
    try:
        for _ in range(200):
            if len(supervisor.group_members(leader.pid)) == 3:
                break
            time.sleep(0.01)
        members = supervisor.group_members(leader.pid)
        assert len(members) == 3
        start_time = process_start_time(leader.pid)
        os.kill(leader.pid, signal.SIGKILL)             # the leader goes first
        leader.wait()
        assert len(supervisor.group_members(leader.pid)) == 2
        run_undo({"kind": "kill", "pid": leader.pid, "start_time": start_time, "group": True})
        assert supervisor.group_members(leader.pid) == []
        assert not any(os.path.exists(f"/proc/{pid}/stat")
                       and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
                       for pid in members)
    finally:
        for pid in supervisor.group_members(leader.pid):
            os.kill(pid, signal.SIGKILL)
