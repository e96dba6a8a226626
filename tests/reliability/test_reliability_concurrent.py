"""Scenario 5: two stallbench processes at once on the same results directory and machine."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import (
    assert_one_line_exit_2,
    leftovers,
    run_meta,
    sb,
    sb_start,
    sysctl,
    wait_until,
)

pytestmark = [pytest.mark.machine, pytest.mark.root]


def test_two_runs_at_once_share_results_and_machine_without_harm(tmp_path):
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    args = ["run", "randread", "--variant", "both", "--results", str(results), "--fs", "ext4",
            "--work-dir", str(work), "--file-size", "8M", "--duration", "1.5",
            "--iterations", "2", "--monitors", "counters,psi", "--no-progress",
            "--warmup", "0"]     # the oracle below pools every op
    first = sb_start(*args, state=state)
    second = sb_start(*args, state=state)
    # both are in flight at once, each with its own journal (neither clobbers the other)
    journals = wait_until(lambda: len(list(state.glob("journal-*.json"))) == 2
                          and list(state.glob("journal-*.json")), first, timeout=90)
    owners = {int(p.name.split("-")[1]) for p in journals}
    assert owners == {first.pid, second.pid}
    for proc in (first, second):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "Traceback" not in err

    runs = sorted((results / "both" / "randread").iterdir(), key=lambda p: int(p.name))
    assert [p.name for p in runs] == ["1", "2", "3", "4"]          # distinct iterations
    pids = []
    for run in runs:
        meta = run_meta(run)
        assert meta["status"] == "complete"
        assert meta["iteration"] == int(run.name)
        pids.append(meta["pid"])
        ops = pq.read_table(run / "ops.parquet").column("op").to_pylist()
        assert len(ops) == meta["counted"]["read"] == meta["samples"]["read"] > 0
        devices = meta["environment"]["devices"]
        assert len(devices) == 1
    assert sorted(pids) == sorted([first.pid, first.pid, second.pid, second.pid])
    # each process used its own loop device and cgroup, and put everything back
    by_pid = {}
    for run in runs:
        meta = run_meta(run)
        by_pid.setdefault(meta["pid"], set()).add(meta["environment"]["filesystem"]["image"])
    assert not by_pid[first.pid] & by_pid[second.pid]
    assert leftovers(first.pid, work) == [] and leftovers(second.pid, work) == []
    assert list(state.glob("journal-*")) == []
    show = sb("show", "both", "--format", "json", "--results", str(results), state=state)
    assert show.returncode == 0 and show.stderr == "", show.stderr
    pooled = np.concatenate([pq.read_table(r / "ops.parquet").column("latency_ns").to_numpy()
                             for r in runs])
    read = json.loads(show.stdout)["ops"]["read"]
    assert read["samples"] == len(pooled) and read["max_ns"] == pooled.max()


def test_a_second_run_changing_the_same_sysctl_refuses_clearly(tmp_path):
    key = "vm.dirty_writeback_centisecs"
    before = sysctl(key)
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    common = ["--results", str(results), "--dir", str(work), "--file-size", "8M",
              "--monitors", "none", "--no-progress"]
    holder = sb_start("run", "randread", "--variant", "a", "--duration", "3",
                      "--sysctl", f"{key}=499", *common, state=state)
    wait_until(lambda: sysctl(key) == "499" and (results / "a").exists(), holder)
    clash = sb("run", "randread", "--variant", "b", "--duration", "1", "--sysctl", f"{key}=511",
               *common, state=state)
    assert_one_line_exit_2(clash, "another stallbench run is changing sysctl", key)
    assert sysctl(key) == "499"                       # the first run's value stands
    assert not (results / "b").exists()
    out, err = holder.communicate(timeout=60)
    assert holder.returncode == 0, err
    assert run_meta(results / "a" / "randread" / "1")["status"] == "complete"
    assert sysctl(key) == before
    assert list(state.glob("journal-*")) == []
