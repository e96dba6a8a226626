"""core/startgate.py: a program behind a StartGate runs only once its parent opened the gate;
the oracle is the program's own side effect (a file it writes) and its exit status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import alive
from stallbench.core.startgate import StartGate

pytestmark = pytest.mark.pure
SRC = Path(__file__).resolve().parents[2] / "src"


def _program(marker: Path) -> list[str]:
    """Writes what it read on its standard input into `marker`, exits 7."""
    return ["sh", "-c", f'cat > "{marker}"; exit 7']


def test_an_opened_gate_runs_the_program_with_its_exit_status_and_no_input(tmp_path):
    marker = tmp_path / "ran"
    gate = StartGate()
    try:
        proc = subprocess.Popen(gate.command(_program(marker)), stdin=gate.stdin)
        gate.started()
        time.sleep(0.2)
        assert not marker.exists()           # waiting on the gate
        gate.open()
        assert proc.wait(timeout=10) == 7
    finally:
        gate.close()
    assert marker.read_text() == ""          # its standard input is /dev/null, not the gate


def test_a_gate_closed_unopened_never_runs_the_program(tmp_path):
    marker = tmp_path / "ran"
    gate = StartGate()
    proc = subprocess.Popen(gate.command(_program(marker)), stdin=gate.stdin)
    gate.started()
    gate.close()
    assert proc.wait(timeout=10) != 7
    assert not marker.exists()


def test_a_parent_killed_before_opening_leaves_nothing_running(tmp_path):
    """The parent is a real process killed with SIGKILL after Popen and before open()."""
    marker = tmp_path / "ran"
    parent = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time
sys.path.insert(0, {str(SRC)!r})
from stallbench.core.startgate import StartGate
gate = StartGate()
proc = subprocess.Popen(gate.command({_program(marker)!r}), stdin=gate.stdin,
                        start_new_session=True)
gate.started()
print(proc.pid, flush=True)
time.sleep(600)
"""], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert child > 1 and Path(f"/proc/{child}").exists()
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(child):
        time.sleep(0.05)
    assert not alive(child)
    assert not marker.exists()
