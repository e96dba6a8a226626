"""The run directory's modules against hand-made oracles: store (RunWriter, load_run, Run),
opsfile (the ops format), rundirs (layout, names, claims, the walk), runselect (which runs a
name means) and hostfacts."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from stallbench.core.errors import RunDataError, UsageError
from stallbench.core.hostfacts import kernel_info, pid_alive, utc_now
from stallbench.core.names import check_name
from stallbench.results.opsfile import OPS_SCHEMA, ops_batch, split_by_op, write_ops_file
from stallbench.results.rundirs import (
    RESULTS_HELP,
    claim_iteration,
    default_results_dir,
    iter_run_dirs,
)
from stallbench.results.runmeta import Status
from stallbench.results.runselect import complete_runs, resolve_runs
from stallbench.results.store import RunWriter, load_run

pytestmark = pytest.mark.pure


def test_ops_round_trip_by_op_with_nulls_for_unpaced(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 3, 1000)
    latency = rng.integers(1, 10**9, 1000)
    start = (np.arange(1000, dtype=np.int64) + 1) * 1000
    worker = rng.integers(0, 4, 1000).astype(np.int32)
    intended = np.where(codes == 2, start - 5, -1)          # only op "c" is paced
    batch = ops_batch(["a", "b", "c"], codes, worker, start, latency, intended)
    counts = write_ops_file(tmp_path / "ops.parquet", [batch])
    assert counts == {name: int((codes == i).sum()) for i, name in enumerate("abc")}
    table = pq.read_table(tmp_path / "ops.parquet")
    assert table.schema.names == ["op", "worker", "start_ns", "latency_ns", "intended_ns"]
    assert table.column("intended_ns").null_count == int((codes != 2).sum())
    split = split_by_op(table.cast(OPS_SCHEMA))
    for i, name in enumerate("abc"):
        mine = codes == i
        assert (split[name].latency_ns == latency[mine]).all()        # order kept within an op
        assert (split[name].start_ns == start[mine]).all()
        assert (split[name].worker == worker[mine]).all()
    assert split["a"].intended_ns is None
    assert (split["c"].intended_ns == start[codes == 2] - 5).all()
    assert not list(tmp_path.glob(".*.tmp"))                           # written atomically


def test_names_claims_and_the_walk(tmp_path: Path) -> None:
    assert check_name("v1.2+rc@host") == "v1.2+rc@host"
    for bad in ("", "a/b", "..", "a b", "x\n", "-x", "a" * 101):
        with pytest.raises(UsageError):
            check_name(bad)
    base = tmp_path / "v" / "w"
    base.mkdir(parents=True)
    claimed: list[Path] = []
    threads = [threading.Thread(target=lambda: claimed.append(claim_iteration(base)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(p.name) for p in claimed) == list(range(1, 9))   # each claimed once
    for p in claimed:
        (p / "run.json").write_text("{}")
    (base / "10").mkdir()
    (base / "10" / "run.json").write_text("{}")
    (base / ".hidden").mkdir()
    assert [p.name for p in iter_run_dirs(tmp_path / "v")] == [*map(str, range(1, 9)), "10"]


def test_results_default_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STALLBENCH_RESULTS", raising=False)
    assert default_results_dir() == Path("results")
    monkeypatch.setenv("STALLBENCH_RESULTS", "/tmp/r")
    assert default_results_dir() == Path("/tmp/r")
    assert RESULTS_HELP == "results directory (default: $STALLBENCH_RESULTS or ./results)"


def _run(results: Path, variant: str, status: Status, latency: list[int]) -> Path:
    writer = RunWriter(results, variant, "sim", {"seed": 1})
    assert load_run(writer.path).status == Status.RUNNING          # "running" from the start
    n = len(latency)
    writer.write_ops([ops_batch(["read"], np.zeros(n), 0, np.arange(n) * 10**6, latency)])
    writer.meta.update({"ops_declared": ["read"], "duration_s": 1.0})
    writer.finalize(status)
    return writer.path


def test_writer_loader_and_which_runs_a_name_means(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = _run(results, "a", Status.COMPLETE, [5, 7, 9])
    failed = _run(results, "a", Status.FAILED, [1])
    run = load_run(first)
    assert (run.variant, run.workload, run.meta.iteration) == ("a", "sim", 1)
    assert run.op_arrays()["read"].latency_ns.tolist() == [5, 7, 9]
    assert run.meta.start_utc.endswith("Z") and run.meta.end_utc >= run.meta.start_utc
    resolved = resolve_runs("a", results)
    assert [r.path for r in resolved.runs] == [first] and resolved.label == "a"
    assert len(resolved.problems) == 1 and str(failed) in resolved.problems[0]
    assert [r.path for r in resolve_runs(str(results / "a" / "sim"), results).runs] == [first]
    assert [r.path for r in complete_runs([first, failed, tmp_path / "none"])] == [first]
    with pytest.raises(UsageError):
        resolve_runs("b", results)
    with pytest.raises(RunDataError):
        resolve_runs(str(failed), results)


def test_host_facts() -> None:
    assert kernel_info()["release"] == os.uname().release
    assert kernel_info()["cmdline"] == Path("/proc/cmdline").read_text().strip()
    assert utc_now()[4] == "-" and utc_now().endswith("Z")
    assert pid_alive(os.getpid())
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not pid_alive(proc.pid)


def test_the_public_api_names_them() -> None:
    import stallbench
    from stallbench.results import runselect, store

    assert stallbench.Run is store.Run and stallbench.load_run is store.load_run
    assert stallbench.resolve_runs is runselect.resolve_runs
