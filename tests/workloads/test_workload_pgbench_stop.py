"""pgbench's server after kill -9: `stallbench cleanup` asks PostgreSQL for an immediate
shutdown (its own log says so) even while a client holds a connection open, which a smart
shutdown (SIGTERM) would wait for; no process, socket directory or data directory is left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from conftest import alive, needs_postgres, run_stallbench

pytestmark = [pytest.mark.guest, needs_postgres, pytest.mark.root]

# prepare() only: initdb, server start, pgbench -i -s 1; then an idle client stays connected
STARTER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from stallbench.core.context import EnvState, RunContext
    from stallbench.core.journal import Journal
    from stallbench.workloads.pgbench import PgbenchWorkload
    base = Path(sys.argv[1])
    journal = Journal(base / "state")
    ctx = RunContext(run_dir=base / "run", env=EnvState(workdir=base / "work"), duration_s=60,
                     journal=journal)
    workload = PgbenchWorkload.from_options({"scale": 1, "clients": 1, "threads": 1})
    workload.prepare(ctx)
    client = subprocess.Popen([str(workload.bindir / "psql"), "-X", "-q",
                               *workload._connect_args(), "postgres"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              start_new_session=True)
    client.stdin.write(b"select 1;\\n")
    client.stdin.flush()
    print(workload.server.pid, client.pid, workload.socket_dir, flush=True)
    time.sleep(300)
""")


def test_cleanup_shuts_the_server_down_immediately(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="sb-pgstop-", dir="/tmp"))
    os.chmod(base, 0o755)
    for name in ("state", "run", "work"):
        (base / name).mkdir()
    os.chmod(base / "work", 0o755)
    proc = subprocess.Popen([sys.executable, "-c", STARTER, str(base)],
                            stdout=subprocess.PIPE, text=True)
    server = client = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert len(line) == 3, "the server did not start"
        server, client, socket_dir = int(line[0]), int(line[1]), Path(line[2])
        assert alive(server) and socket_dir.exists()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert alive(server), "the server should outlive a kill -9"
        cleanup = run_stallbench("cleanup", env={"STALLBENCH_STATE_DIR": str(base / "state")},
                                 timeout=120)
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert "undone: pg_stop" in cleanup.stdout
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(server)
        log = (base / "run/postgres.log").read_text(errors="replace")
        assert "received immediate shutdown request" in log
        assert "received smart shutdown request" not in log
        assert not socket_dir.exists()
        assert not (base / "work/pgdata").exists()
        assert not list((base / "state").glob("journal-*"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in (server, client):
            if pid is not None and alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if proc.poll() is not None:
            subprocess.run([sys.executable, "-m", "stallbench", "cleanup"],
                           env={**os.environ, "STALLBENCH_STATE_DIR": str(base / "state")},
                           capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)
