"""pgbench workload on a real PostgreSQL: a 20 s run whose mean transaction latency matches
pgbench's own average within 1% and whose transaction count matches exactly; no server
process, socket or data directory left after the run, after Ctrl-C, or after kill -9 +
`stallbench cleanup`. Also the pgbench log importer on a real log."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import needs_postgres, run_stallbench, stallbench_cmd
from stallbench.core.context import EnvState, RunContext
from stallbench.core.errors import UsageError
from stallbench.core.journal import Journal
from stallbench.importers import import_log
from stallbench.logformats.pgbench import parse_pgbench_output
from stallbench.results.store import load_run
from stallbench.workloads.pgbench import PgbenchWorkload

pytestmark = [pytest.mark.guest, needs_postgres]


def _processes_under(path: Path) -> list[int]:
    """Processes whose command line or working directory is under `path` (postgres backends
    rewrite their command line but keep the data directory as cwd)."""
    found = []
    text = str(path)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if text in cmdline or cwd.startswith(text):
            found.append(int(entry.name))
    return found


def _socket_dirs() -> set[str]:
    return set(glob.glob("/tmp/stallbench-pg-*"))


@pytest.fixture
def pg_place() -> Iterator[tuple[Path, dict[str, str]]]:
    """A results directory the postgres user can reach, and a private journal directory."""
    base = Path(tempfile.mkdtemp(prefix="sb-pgtest-", dir="/tmp"))
    os.chmod(base, 0o755)
    state = base / "state"
    state.mkdir()
    sockets_before = _socket_dirs()
    yield base / "results", {"STALLBENCH_STATE_DIR": str(state)}
    leftovers = _processes_under(base)
    for pid in leftovers:               # only what this test started
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for path in _socket_dirs() - sockets_before:
        shutil.rmtree(path, ignore_errors=True)
    if leftovers:
        time.sleep(0.5)
    subprocess.run(stallbench_cmd("cleanup"), env={**os.environ, "STALLBENCH_STATE_DIR":
                                                   str(state)}, capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


def _assert_nothing_left(base: Path, sockets_before: set[str]) -> None:
    assert _processes_under(base) == []
    assert _socket_dirs() - sockets_before == set()
    assert list(base.rglob("pgdata")) == []


def _run_args(results: Path, duration: str) -> list[str]:
    return ["run", "pgbench", "--scale", "1", "--clients", "4", "--threads", "2",
            "--duration", duration, "--results", str(results), "--variant", "pg",
            "--monitors", "none", "--no-progress"]


def _start_and_wait_for_pgbench(results: Path, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(stallbench_cmd(*_run_args(results, "60")),
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = results / "pg/pgbench/1/pgbench.out"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().count("progress:") >= 2:
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"stallbench exited early: {proc.communicate()}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("pgbench did not start within 90 s")


@pytest.mark.root
@pytest.mark.slow
def test_real_run_matches_pgbench_own_numbers(pg_place) -> None:
    results, env = pg_place
    sockets_before = _socket_dirs()
    out = run_stallbench(*_run_args(results, "20"), env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    run_dir = results / "pg/pgbench/1"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete"
    own = meta["workload_summary"]["pgbench"]
    latency = pq.read_table(run_dir / "ops.parquet").column("latency_ns").to_numpy()
    start = pq.read_table(run_dir / "ops.parquet").column("start_ns").to_numpy()
    # the oracle is pgbench's own output: its count and its average latency (ms, 3 decimals)
    assert len(latency) == own["transactions"] == meta["samples"]["txn"] > 100
    assert meta["counted"]["txn"] == own["transactions"]
    assert np.mean(latency) / 1e6 == pytest.approx(own["latency_average_ms"], rel=0.01)
    assert own["tps"] > 0
    # every transaction lies within the run (start is on the run's monotonic clock)
    assert start.min() >= 0 and (start + latency).max() <= 25e9
    assert meta["rusage"]["server_cpu_s"] > 0
    assert meta["params"]["pg_settings"]["shared_buffers"] == "16MB"
    _assert_nothing_left(results.parent, sockets_before)
    assert list((results.parent / "state").glob("journal-*.json")) == []


@pytest.mark.root
@pytest.mark.slow
def test_ctrl_c_stops_server_and_keeps_transactions(pg_place) -> None:
    results, env = pg_place
    sockets_before = _socket_dirs()
    proc = _start_and_wait_for_pgbench(results, env)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    meta = json.loads((results / "pg/pgbench/1/run.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["samples"]["txn"] > 0
    _assert_nothing_left(results.parent, sockets_before)


@pytest.mark.root
@pytest.mark.slow
def test_kill_9_then_cleanup_stops_server(pg_place) -> None:
    results, env = pg_place
    sockets_before = _socket_dirs()
    proc = _start_and_wait_for_pgbench(results, env)
    proc.kill()
    proc.communicate(timeout=30)
    assert _processes_under(results.parent), "the server should outlive a kill -9"
    cleanup = run_stallbench("cleanup", env=env, timeout=120)
    assert cleanup.returncode == 0, cleanup.stderr
    deadline = time.monotonic() + 20     # orphaned backends exit once the postmaster is gone
    while _processes_under(results.parent) and time.monotonic() < deadline:
        time.sleep(0.2)
    _assert_nothing_left(results.parent, sockets_before)
    assert "killed" in load_run(results / "pg/pgbench/1").describe_status()


@pytest.mark.root
def test_pgbench_log_importer_on_a_real_log(pg_place) -> None:
    results, _ = pg_place
    base = results.parent
    (base / "work").mkdir()
    (base / "run").mkdir()
    logs = base / "logs"
    logs.mkdir()
    workload = PgbenchWorkload.from_options({"scale": 1, "clients": 2, "threads": 2})
    with Journal(base / "state") as journal:
        ctx = RunContext(run_dir=base / "run", env=EnvState(workdir=base / "work"),
                         duration_s=2, journal=journal)
        workload.prepare(ctx)
        try:
            output = workload.run_client(ctx, ["-T", "2", "-c", "2", "-j", "2", "-P", "1",
                                               "--log", f"--log-prefix={logs / 'pgbench_log'}"],
                                         "pgbench")
        finally:
            workload.shutdown(ctx)
    own = parse_pgbench_output(output)
    assert len(list(logs.iterdir())) == 2                     # one log per thread
    run_dir = import_log("pgbench", logs, "imported", results)
    meta = load_run(run_dir).meta
    assert meta.samples["txn"] == own["transactions"]
    latency = pq.read_table(run_dir / "ops.parquet").column("latency_ns").to_numpy()
    assert np.mean(latency) / 1e6 == pytest.approx(own["latency_average_ms"], rel=0.01)
    assert not (base / "work/pgdata").exists()


@pytest.mark.root
def test_unreachable_directory_is_a_clear_error(tmp_path: Path) -> None:
    """pytest's tmp_path is under a 0700 root directory: user postgres cannot reach it."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "work").mkdir()
    workload = PgbenchWorkload.from_options({"scale": 1})
    with Journal(tmp_path) as journal:
        ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=private / "work"),
                         duration_s=1, journal=journal)
        with pytest.raises(UsageError, match="cannot reach"):
            workload.prepare(ctx)
        assert journal.entries == []
    assert not (private / "work/pgdata").exists()


def test_bad_options() -> None:
    with pytest.raises(UsageError, match="threads"):
        PgbenchWorkload.from_options({"clients": 1, "threads": 2})
    with pytest.raises(UsageError, match="KEY=VALUE"):
        PgbenchWorkload.from_options({"pg_setting": ["shared_buffers"]})
    with pytest.raises(UsageError, match="managed by stallbench"):
        PgbenchWorkload.from_options({"pg_setting": ["listen_addresses=*"]})
    with pytest.raises(UsageError, match="scale"):
        PgbenchWorkload.from_options({"scale": -1})
    workload = PgbenchWorkload.from_options({"pg_setting": ["shared_buffers=64MB"]})
    assert workload.settings["shared_buffers"] == "64MB"
