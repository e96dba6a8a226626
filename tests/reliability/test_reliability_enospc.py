"""Scenario 1: the data filesystem fills up mid-run.

A pgioperf run on a 24 MiB ext4 loop filesystem. Mid-run another process makes room disappear
the way a real neighbour would: it punches the data file's blocks out (the file becomes sparse,
as a file restored from a backup or copied with `cp --sparse` would be) and fills the filesystem
with its own file. The checkpointer's next write into a hole then needs a new block and gets
ENOSPC from ext4's delayed allocation. The filler keeps doing this until the run ends.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import (
    leftovers,
    only_run,
    run_meta,
    sb,
    sb_start,
    wait_until,
)

pytestmark = [pytest.mark.oracle, pytest.mark.root]

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02


def _punch_and_fill(mount_point: Path, data_size: int, fs_size: int) -> int:
    """Free the data file's blocks, then take every free block; returns bytes written.

    Never more than the loop filesystem holds, and only while it is mounted: once the run has
    unmounted it, the mount point is a directory of the machine's own filesystem, which the
    filler must not fill (it did once, 67 GB of /tmp, when the run ended first)."""
    if not os.path.ismount(mount_point):
        raise OSError(errno.ENOENT, "the run's filesystem is no longer mounted", mount_point)
    subprocess.run(["fallocate", "--punch-hole", "--offset", "0", "--length", str(data_size),
                    str(mount_point / "pgioperf.data")], check=True, capture_output=True)
    chunk = b"\xa5" * (1 << 20)
    written = 0
    with open(mount_point / "neighbour.fill", "ab", buffering=0) as f:
        try:
            while written < fs_size and os.path.ismount(mount_point):
                written += f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return written


def test_full_filesystem_fails_the_run_and_keeps_every_op(tmp_path):
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    base = sb("run", "pgioperf", "--variant", "roomy", "--results", str(results), "--dir",
              str(work), "--data-size", "8M", "--wal-size", "1M", "--readers", "2",
              "--duration", "2", "--monitors", "none", "--no-progress", state=state)
    assert base.returncode == 0, base.stderr

    data_size = 8 << 20
    proc = sb_start("run", "pgioperf", "--variant", "full", "--results", str(results),
                    "--fs", "ext4", "--fs-size", "24M", "--work-dir", str(work),
                    "--data-size", "8M", "--wal-size", "1M", "--readers", "2",
                    "--duration", "60", "--monitors", "default", "--no-progress", state=state)
    run_dir = results / "full" / "pgioperf" / "1"
    wait_until(lambda: (run_dir / ".spool").is_dir(), proc)
    mount_point = wait_until(lambda: next(iter(work.glob("stallbench-*.mnt")), None), proc)
    time.sleep(1.0)                                   # let every worker record a while
    started = time.monotonic()
    filled = 0
    while proc.poll() is None and time.monotonic() - started < 30:
        try:
            filled += _punch_and_fill(mount_point, data_size, 24 << 20)
        except (OSError, subprocess.CalledProcessError, AssertionError):
            pass                                      # the run ended and unmounted under us
        time.sleep(0.2)
    out, err = proc.communicate(timeout=60)
    assert filled > 0
    assert proc.returncode == 1, err
    assert "no space left on device" in out

    meta = run_meta(run_dir)
    assert meta["status"] == "failed"
    assert "no space left on device" in meta["reason"]
    assert meta["duration_s"] < 30                    # the workload stopped, it did not run on
    # every op the workers counted is in ops.parquet (counted independently by pyarrow)
    ops = pq.read_table(run_dir / "ops.parquet").column("op").to_pylist()
    names, counts = np.unique(np.array(ops), return_counts=True)
    recorded = dict(zip(names.tolist(), counts.tolist(), strict=True))
    for op in ("wal", "commit", "checkpoint", "read"):
        assert recorded[op] > 0, op
        assert recorded[op] == meta["counted"][op], op
    assert not (run_dir / ".spool").exists()

    # comparable: the failed run is left out unless asked for, and then compared
    refused = sb("compare", "roomy", "full", "--results", str(results), state=state)
    assert refused.returncode == 2 and "no space left on device" in refused.stderr
    compared = sb("compare", "roomy", "full", "--results", str(results), "--format", "json",
                  "--allow-incomplete", state=state)
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    for op in ("wal", "commit", "checkpoint", "read"):
        entry = report["ops"][op]["variants"]["full"]
        assert entry["samples"] + entry["warmup_samples"] == recorded[op], op
    [run] = report["variants"][1]["runs"]
    assert run["status"] == "failed: checkpointer worker 1: no space left on device"

    # the machine is put back: no loop device, mount, cgroup, image
    assert leftovers(proc.pid, work) == []
    assert only_run(results, "full", "pgioperf") == run_dir
    assert not any(p.name.startswith("journal-") and p.suffix == ".json"
                   for p in state.iterdir())
    assert os.listdir(work) == [n for n in os.listdir(work) if n.startswith("pgioperf")
                                or n.startswith(".pgioperf")]
