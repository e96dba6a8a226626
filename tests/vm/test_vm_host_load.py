"""A guest run's machine_load is the host's: the guest's vCPUs are host threads, and a host
process that takes the CPUs slows the guest without the guest seeing it (its own view said
0.0 others with three busy loops beside the host's two CPUs). The oracle: the busy loop's own
CPU time from /proc/PID/stat."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_support import sb
from vm_support import guest_kernels, requires_vm

pytestmark = [pytest.mark.guest, requires_vm]

SPIN = "import os, time\nwhile True:\n    pass\n"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_guest_runs_machine_load_counts_the_hosts_other_processes(tmp_path):
    deb, _release = guest_kernels()[-1]
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        started, cpu0 = time.monotonic(), _cpu_s(spinner.pid)
        out = sb("run", "randread", "--variant", "guest", "--results", str(tmp_path / "r"),
                 "--kernel", str(deb), "--vm-cpus", "1", "--vm-memory", "512M",
                 "--file-size", "8M", "--duration", "1", "--monitors", "none",
                 "--no-progress", state=tmp_path / "state", timeout=300)
        spin_cpus = (_cpu_s(spinner.pid) - cpu0) / (time.monotonic() - started)
    finally:
        os.kill(spinner.pid, signal.SIGKILL)
        spinner.wait()
    assert out.returncode == 0, out.stdout + out.stderr
    meta = json.loads(next((tmp_path / "r").glob("guest/randread/*/run.json")).read_text())
    load, guest = meta["machine_load"], meta["environment"]["vm"]["guest_machine_load"]
    # the host's view: the spinner is among the others, QEMU is the run's own; the guest's view
    # has the guest's one vCPU and none of it. (Beside the suite's other lanes the spinner and
    # QEMU get a share of the two CPUs, 0.4 each measured, not one each.)
    assert load["cpus"] == os.cpu_count() and guest["cpus"] == 1
    assert load["others_cpus"] >= 0.7 * spin_cpus > 0.1, (load, spin_cpus)
    assert load["own_cpus"] > 0.1, load        # QEMU's TCG thread, emulating the guest
    assert guest["others_cpus"] < 0.7 * spin_cpus, (guest, spin_cpus)
