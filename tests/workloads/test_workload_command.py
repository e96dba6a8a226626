"""command workload: on dd, which reads its input exactly `count` times, the read count is exact;
the tracefs path and the strace path agree on counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import needs_strace, run_stallbench
from stallbench.core.context import EnvState, RunContext
from stallbench.core.errors import UsageError
from stallbench.core.journal import Journal
from stallbench.results.opsfile import write_ops_file
from stallbench.workloads.command import CommandWorkload, tracefs_unavailable

pytestmark = pytest.mark.machine

TRACEFS_SKIP = pytest.mark.skipif(tracefs_unavailable() is not None,
                                  reason=f"tracefs path unavailable: {tracefs_unavailable()}")


def _run(tmp_path: Path, argv: list[str], tracer: str, syscalls: str | None = None,
         duration: float = 20.0):
    workload = CommandWorkload.from_options({"argv": ["--", *argv], "tracer": tracer,
                                             "syscalls": syscalls})
    run_dir = tmp_path / f"run-{tracer}-{len(list(tmp_path.iterdir()))}"
    run_dir.mkdir()
    with Journal(tmp_path) as journal:
        ctx = RunContext(run_dir=run_dir, env=EnvState(workdir=tmp_path), duration_s=duration,
                         journal=journal)
        workload.prepare(ctx)
        ctx.start_clock()
        result = workload.run(ctx, lambda update: None)
        counts = write_ops_file(run_dir / "ops.parquet", result.batches)
        assert not journal.entries        # tracefs instance removed, process forgotten
    return result, counts, run_dir


def _dd(tmp_path: Path, count: int) -> list[str]:
    data = tmp_path / "input"
    if not data.exists():
        data.write_bytes(os.urandom(4096 * 400))
    return ["dd", f"if={data}", "of=/dev/null", "bs=4k", f"count={count}"]


def _instances() -> set[str]:
    path = Path("/sys/kernel/tracing/instances")
    return {p.name for p in path.iterdir()} if path.is_dir() else set()


@TRACEFS_SKIP
@needs_strace
def test_tracefs_and_strace_count_reads_exactly(tmp_path: Path) -> None:
    before = _instances()
    reads = {}
    for tracer in ("tracefs", "strace"):
        for count in (0, 300):
            result, counts, run_dir = _run(tmp_path, _dd(tmp_path, count), tracer, "read,write")
            assert result.status == "complete", result.reason
            assert counts == result.counted
            reads[tracer, count] = counts.get("read", 0)
            table = pq.read_table(run_dir / "ops.parquet")
            start = table.column("start_ns").to_numpy()
            latency = table.column("latency_ns").to_numpy()
            assert (start >= 0).all() and (latency >= 0).all()
            assert start.max() < result.rusage["elapsed_s"] * 1e9 + 5e9
    # dd reads its input exactly `count` times; what the loader reads is the same in each run
    assert reads["tracefs", 300] - reads["tracefs", 0] == 300
    assert reads["strace", 300] - reads["strace", 0] == 300
    # both tracers see the same calls
    assert reads["tracefs", 0] == reads["strace", 0]
    assert reads["tracefs", 300] == reads["strace", 300]
    assert {n for n in _instances() - before if n.startswith("stallbench-command")} == set()


@TRACEFS_SKIP
def test_tracefs_follows_children_and_all_syscalls(tmp_path: Path) -> None:
    argv = ["sh", "-c", " ".join(_dd(tmp_path, 50)) + " 2>/dev/null; "
            + " ".join(_dd(tmp_path, 70)) + " 2>/dev/null"]
    result, counts, run_dir = _run(tmp_path, argv, "tracefs")
    assert result.status == "complete"
    assert counts["read"] >= 120 and counts["execve"] >= 3   # gate exec + two dd
    workers = pq.read_table(run_dir / "ops.parquet").column("worker").to_numpy()
    assert len(np.unique(workers)) >= 3                         # sh and both dd processes


@needs_strace
def test_failing_command_and_duration_stop(tmp_path: Path) -> None:
    result, _, _ = _run(tmp_path, ["sh", "-c", "exit 3"], "strace")
    assert result.status == "failed" and "status 3" in result.reason
    result, counts, _ = _run(tmp_path, ["sleep", "30"], "strace", duration=1.0)
    assert result.status == "complete" and result.extra["stopped"] == "deadline"
    assert result.rusage["elapsed_s"] < 15


def test_bad_options() -> None:
    with pytest.raises(UsageError, match="after '--'"):
        CommandWorkload.from_options({"argv": []})
    with pytest.raises(UsageError, match="not found"):
        CommandWorkload.from_options({"argv": ["--", "no-such-program-xyz"]})
    with pytest.raises(UsageError, match="system call name"):
        CommandWorkload.from_options({"argv": ["true"], "syscalls": "read,Bad Name"})


@TRACEFS_SKIP
@pytest.mark.root
def test_unknown_syscall_for_tracefs(tracefs_root: str) -> None:
    with pytest.raises(UsageError, match="no system call 'nosuchcall'"):
        CommandWorkload.from_options({"argv": ["true"], "syscalls": "nosuchcall",
                                      "tracer": "tracefs"})


@needs_strace
def test_through_cli(tmp_path: Path) -> None:
    results = tmp_path / "results"
    argv = _dd(tmp_path, 40)
    out = run_stallbench("run", "command", "--results", str(results), "--variant", "dd",
                         "--monitors", "none", "--no-progress", "--duration", "20",
                         "--syscalls", "read", "--tracer", "strace", "--", *argv)
    assert out.returncode == 0, out.stderr
    meta = json.loads((results / "dd/command/1/run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["params"]["argv"] == argv
    assert meta["counted"]["read"] >= 40
    assert any("strace" in note for note in meta["notes"])
