"""kernel.task_delayacct with two stallbench processes using the delay monitor at once: the first
to finish (stop, or kill -9 + `stallbench cleanup`) leaves it on for the other; the last one out
restores the value found before."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import run_stallbench
from stallbench.monitors.delayacct import DELAYACCT_SYSCTL, delayacct_dir

DELAYACCT = Path(DELAYACCT_SYSCTL)

pytestmark = [pytest.mark.quiet, pytest.mark.root,
              pytest.mark.skipif(not DELAYACCT.exists(), reason="needs kernel.task_delayacct")]

MONITORED = textwrap.dedent("""
    import sys
    from pathlib import Path
    from stallbench.core.context import EnvState, RunContext
    from stallbench.core.journal import Journal
    from stallbench.monitors.delay import DelayMonitor
    journal = Journal(Path(sys.argv[1]))
    ctx = RunContext(run_dir=Path(sys.argv[1]), env=EnvState(workdir=Path(sys.argv[1])),
                     duration_s=60, journal=journal)
    ctx.start_clock()
    monitor = DelayMonitor(interval_s=0.2)
    monitor.start(ctx)
    print("started", flush=True)
    sys.stdin.readline()
    result = monitor.stop()
    journal.undo_all()
    journal.close()
    print("stopped", result.summary.get("errors", []), flush=True)
""")


def _value() -> str:
    return DELAYACCT.read_text().strip()


def _other_stallbench_holds_it() -> bool:
    """A delay monitor outside this test (another engineer's run) still holds a claim."""
    fd = os.open(delayacct_dir() / "delayacct.users", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@pytest.fixture
def before() -> str:
    value = _value()
    if value == "1":
        pytest.skip("task_delayacct is already on: nothing to restore")
    return value


class Monitored:
    """A separate process with its own journal and a running delay monitor."""

    def __init__(self, state: Path):
        state.mkdir()
        self.state = state
        self.proc = subprocess.Popen([sys.executable, "-c", MONITORED, str(state)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_started(self) -> None:
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "started"

    def stop(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "stopped []"
        assert self.proc.wait(timeout=30) == 0

    def kill_9_and_clean_up(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        cleanup = run_stallbench("cleanup", env={"STALLBENCH_STATE_DIR": str(self.state)})
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert "undone: delayacct" in cleanup.stdout
        assert not list(self.state.glob("journal-*"))

    def finish(self) -> None:
        """Whatever happened in the test: no process left, its journal undone."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        run_stallbench("cleanup", env={"STALLBENCH_STATE_DIR": str(self.state)})


def _restored(before: str) -> bool:
    return _value() == before or (_value() == "1" and _other_stallbench_holds_it())


def test_first_to_stop_leaves_it_on_for_the_other(tmp_path: Path, before: str) -> None:
    first, second = Monitored(tmp_path / "a"), Monitored(tmp_path / "b")
    try:
        first.wait_started()
        second.wait_started()
        assert _value() == "1"
        first.stop()
        assert _value() == "1", "switched off under a run that still needs it"
        second.stop()
        assert _restored(before)
    finally:
        first.finish()
        second.finish()


def test_kill_9_and_cleanup_of_one_then_of_the_other(tmp_path: Path, before: str) -> None:
    first, second = Monitored(tmp_path / "a"), Monitored(tmp_path / "b")
    try:
        first.wait_started()
        second.wait_started()
        first.kill_9_and_clean_up()
        assert _value() == "1", "cleanup switched it off under a live run"
        second.kill_9_and_clean_up()
        assert _restored(before)
    finally:
        first.finish()
        second.finish()


def test_journal_undo_without_stop_restores_it(tmp_path: Path, before: str) -> None:
    """A run whose delay monitor never got to stop (the journal undoes everything at exit)."""
    from stallbench.core.context import EnvState, RunContext
    from stallbench.core.journal import Journal
    from stallbench.monitors.delay import DelayMonitor

    with Journal(tmp_path) as journal:
        ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=60,
                         journal=journal)
        ctx.start_clock()
        monitor = DelayMonitor(interval_s=0.2)
        monitor.start(ctx)
        try:
            assert _value() == "1"
            assert journal.undo_all() == []
            assert _restored(before)
        finally:
            monitor.stop()
    assert _restored(before)
