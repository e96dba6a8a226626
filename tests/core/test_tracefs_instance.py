"""The shared tracefs instance: journaled removal, also of journals written before the move."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stallbench.core.journal import Journal
from stallbench.core.tracefs import TracefsInstance, find_tracefs

pytestmark = [pytest.mark.machine, pytest.mark.root, pytest.mark.usefixtures("tracefs_root")]

CLEANUP = ("import sys; from pathlib import Path; "
           "from stallbench.core.journal import cleanup_stale; "
           "from stallbench.run.undo import undo_kinds; "
           "sys.exit(cleanup_stale(Path(sys.argv[1]), log=print, undo_kinds=undo_kinds))")


def _trigger_lines(path: str) -> list[str]:
    text = Path(path, "events/sched/sched_switch/trigger").read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_old_journal_entry_is_undone_by_a_fresh_cleanup(tmp_path: Path) -> None:
    """A journal of the old monitors/trace.py (path only, D-state trigger set) is undone by a
    `stallbench cleanup` process that never imported the trace monitor itself."""
    path = os.path.join(find_tracefs(), "instances", f"stallbench-test-{os.getpid()}-old")
    os.mkdir(path)
    try:
        Path(path, "events/sched/sched_switch/trigger").write_text(
            "stacktrace if prev_state & 2")
        assert _trigger_lines(path)
        (tmp_path / "journal-1-1.json").write_text(json.dumps(
            {"pid": 1, "entries": [{"id": 1, "kind": "tracefs_instance", "path": path}]}))
        done = subprocess.run([sys.executable, "-c", CLEANUP, str(tmp_path)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "undone: tracefs_instance" in done.stdout
        assert not os.path.exists(path)
        assert not list(tmp_path.glob("journal-*"))
    finally:
        if os.path.isdir(path):
            os.rmdir(path)


def test_instance_records_its_trigger_before_setting_it_and_removes_it(tmp_path: Path) -> None:
    with Journal(tmp_path) as journal:
        instance = TracefsInstance(find_tracefs(), f"stallbench-test-{os.getpid()}-new",
                                   journal, 64)
        try:
            assert Path(instance.path, "tracing_on").read_text().strip() == "0"
            assert Path(instance.path, "trace_clock").read_text().count("[mono]") == 1
            instance.set_trigger("sched/sched_switch", "stacktrace if prev_state & 2")
            saved = json.loads(journal.path.read_text())["entries"]
            assert saved[0]["kind"] == "tracefs_instance"
            assert saved[0]["triggers"] == [["sched/sched_switch",
                                             "stacktrace if prev_state & 2"]]
            assert _trigger_lines(instance.path)
            instance.add_pids([os.getpid()])
            instance.enable("syscalls/sys_enter_getppid")
            instance.on()
            for _ in range(5):
                os.getppid()
            instance.off()
            text = instance.drain().decode()
            assert text.count("sys_getppid(") >= 5
            assert instance.lost_events() == 0
        finally:
            instance.remove()
        assert not os.path.exists(instance.path)
        assert journal.entries == [] and journal.errors == []
