"""Scenario 3: SIGINT and SIGTERM at every phase of a run.

Each phase is recognised from outside by what it leaves on disk, polled every 2 ms:
- setup: the loop image exists, the run directory does not (it is made after the environment);
  mkfs writes all inode tables (lazy_itable_init=0), which keeps this phase long enough;
- warm-up: the workload's data file is being created on the loop filesystem (no marker yet);
- run: the workers' spool directory exists;
- monitor shutdown: the first monitor table is written, ops.parquet is not begun;
- writing results: the temporary ops.parquet exists, the final one does not.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import leftovers, run_meta, sb_start, wait_until

from stallbench.monitors import default_monitor_names

pytestmark = [pytest.mark.oracle, pytest.mark.root]

RUN = ["run", "randread", "--variant", "sig", "--no-progress", "--threads", "2"]
PHASES = {
    "setup": ["--fs", "ext4", "--fs-size", "2G", "--mkfs-opts",
              "-E lazy_itable_init=0,lazy_journal_init=0 -N 400000", "--file-size", "8M",
              "--duration", "2", "--monitors", "none"],
    "warm-up": ["--fs", "ext4", "--file-size", "1G", "--duration", "2", "--monitors", "none"],
    "run": ["--fs", "ext4", "--file-size", "16M", "--duration", "30", "--monitors", "default"],
    "monitor shutdown": ["--file-size", "8M", "--duration", "1.5", "--monitors", "default"],
    "writing results": ["--file-size", "8M", "--duration", "1.5", "--monitors", "none"],
}


def _phase_reached(phase: str, work: Path, run_dir: Path) -> bool:
    if phase == "setup":
        return any(work.glob("stallbench-*.img")) and not run_dir.exists()
    if phase == "warm-up":
        mount = next(work.glob("stallbench-*.mnt"), None)
        return (mount is not None and (mount / "randread.data").exists()
                and not (mount / ".randread.data.stallbench.json").exists())
    if phase == "run":
        return (run_dir / ".spool").is_dir()
    if phase == "monitor shutdown":
        return (run_dir / "monitors").is_dir() and not (run_dir / ".ops.parquet.tmp").exists()
    return (run_dir / ".ops.parquet.tmp").exists() and not (run_dir / "ops.parquet").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", list(PHASES))
def test_signal_at_every_phase(tmp_path, phase, signum):
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    where = ["--work-dir", str(work)] if "--fs" in PHASES[phase] else ["--dir", str(work)]
    proc = sb_start(*RUN, "--results", str(results), *where, *PHASES[phase], state=state)
    run_dir = results / "sig" / "randread" / "1"
    wait_until(lambda: _phase_reached(phase, work, run_dir), proc, timeout=90, poll=0.002)
    if phase == "run":
        time.sleep(1.0)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=90)

    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert leftovers(proc.pid, work) == []
    assert list(state.glob("journal-*.json")) == []
    if phase == "setup":
        assert not list(results.rglob("run.json"))    # nothing recorded, nothing claimed
        assert "interrupted" in err
        return
    meta = run_meta(run_dir)
    assert meta["status"] == "interrupted"            # never complete, never left "running"
    assert f"stopped by {signal.Signals(signum).name}" in meta["reason"]
    assert not (run_dir / ".spool").exists()
    assert not (run_dir / ".ops.parquet.tmp").exists()
    if phase == "warm-up":
        assert "before the run finished" in meta["reason"]
        assert not (run_dir / "ops.parquet").exists()
        return
    # every op the workers counted is in ops.parquet (counted here with numpy)
    ops = np.array(pq.read_table(run_dir / "ops.parquet").column("op").to_pylist())
    assert len(ops) == meta["counted"]["read"] > 0
    assert set(ops.tolist()) == {"read"}
    if phase == "run":
        assert meta["duration_s"] < 20
    if phase == "monitor shutdown":
        statuses = {name: m["status"] for name, m in meta["monitors"].items()}
        default = default_monitor_names()      # each writes one table of its own name
        assert statuses == {name: "ok" for name in default}
        assert sorted(p.name for p in (run_dir / "monitors").iterdir()) == sorted(
            f"{name}.parquet" for name in default)
