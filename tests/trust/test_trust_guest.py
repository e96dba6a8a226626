"""A guest on the other side of a trust boundary (issue 34 item 12): a real QEMU guest whose
stallbench, as a compromised guest could, names a result folder outside its exchange folder in
outcome.json and plants a device node, a FIFO and a symlink in its run folder.

The guest runs this installation from the host's root; tests/trust/guest_hostile/sitecustomize.py
(on the guest's PYTHONPATH only through the job's environment) does the lying, and only where
the exchange folder is mounted, i.e. in the guest. Oracles: the host folder the crafted path
names (its files stay where they were), lstat of everything the run folder holds.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from reliability_support import run_meta, sb
from vm_support import guest_kernels, requires_vm

pytestmark = [pytest.mark.guest, requires_vm]

HOSTILE = Path(__file__).with_name("guest_hostile")


def test_a_guest_naming_a_folder_outside_its_exchange_moves_nothing_of_the_host(tmp_path):
    results, state = tmp_path / "results", tmp_path / "state"
    local = sb("run", "randread", "--variant", "local", "--results", str(tmp_path / "local"),
               "--file-size", "1M", "--duration", "0.3", "--monitors", "none",
               "--no-progress", "--no-drop-caches", state=state)
    assert local.returncode == 0, local.stderr
    victim = results / "guest" / "randread" / "victim"      # where `../../victim` leads
    victim.parent.mkdir(parents=True)
    shutil.copytree(tmp_path / "local" / "local" / "randread" / "1", victim)   # a real run
    (victim / "the-users-file").write_text("keep me")
    before = sorted(p.name for p in victim.iterdir())
    deb, _release = guest_kernels()[0]
    pythonpath = f"{HOSTILE}:{os.environ.get('PYTHONPATH', '')}".rstrip(":")
    run = sb("run", "randread", "--variant", "guest", "--results", str(results),
             "--kernel", str(deb), "--vm-cpus", "1", "--vm-memory", "512M",
             "--file-size", "8M", "--duration", "1", "--monitors", "none", "--no-progress",
             state=state, timeout=600, PYTHONPATH=pythonpath)
    assert sorted(p.name for p in victim.iterdir()) == before, run.stdout + run.stderr
    meta = run_meta(results / "guest" / "randread" / "1")
    assert meta["status"] == "failed", meta
    assert "outside its exchange folder" in meta["reason"], meta["reason"]
    run_dir = results / "guest" / "randread" / "1"
    for path in [run_dir, *run_dir.rglob("*")]:
        mode = path.lstat().st_mode
        assert stat.S_ISREG(mode) or stat.S_ISDIR(mode), path
    assert run.returncode == 1, run.stdout + run.stderr
