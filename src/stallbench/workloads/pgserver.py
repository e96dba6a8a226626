"""The PostgreSQL server of the pgbench workload: a cluster stallbench makes, runs and removes.

initdb makes the cluster in <workdir>/pgdata as an unprivileged user (the `postgres` user when
root, else `nobody`; the caller itself when not root); the server listens only on a Unix socket
in a private short directory under /tmp (listen_addresses='': no TCP port). Every program runs
under the supervisor (supervisor.py) in the variant's cgroup.

Every change is in the journal before it is made (rmtree of pgdata and the socket directory,
`pg_stop` of the server), so after `kill -9` `stallbench cleanup` stops the server and removes
its files. `pg_stop` (registered here; cleanup imports every workload module) asks the
postmaster for an immediate shutdown (SIGQUIT: no checkpoint, the data directory is thrown away
anyway) rather than the generic kill's SIGTERM, a smart shutdown that waits for every client to
disconnect.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core import journal as journal_mod
from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.journal import Entry
from . import supervisor

DB_USER = "stallbench"
DB_NAME = "postgres"
PORT = 5432            # only names the socket file inside our private directory
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_IMMEDIATE_STOP_TIMEOUT_S = 10.0
_SOCKET_DIR_PREFIX = "stallbench-pg-"
# fast shutdown (SIGINT), then immediate (SIGQUIT), to the postmaster only: it stops its
# backends itself (a SIGINT to the checkpointer would request a checkpoint); then SIGKILL
STOP_LADDER = (supervisor.StopStep(signal.SIGINT, _STOP_TIMEOUT_S, group=False),
               supervisor.StopStep(signal.SIGQUIT, 5.0, group=False))


@journal_mod.register_undo("pg_stop")
def _undo_pg_stop(action: dict[str, Any]) -> None:
    """Stop a PostgreSQL server stallbench started: immediate shutdown (SIGQUIT) of the
    postmaster if it is still that process (same start time), SIGKILL if it does not go within
    10 s, then SIGKILL to whatever is left of its process group (it leads its own session);
    finally remove its socket directory."""
    pid = int(action["pid"])
    start_time = action.get("start_time")
    current = journal_mod.process_start_time(pid)
    if current is not None and start_time is not None and current != start_time:
        return  # the pid now belongs to another process; ours is long gone
    if current is not None:
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + _IMMEDIATE_STOP_TIMEOUT_S
        while journal_mod.process_start_time(pid) == current and time.monotonic() < deadline:
            time.sleep(0.05)
        if journal_mod.process_start_time(pid) == current:
            os.kill(pid, signal.SIGKILL)
    # a pid is not handed out again while a process group of that id exists, so a group `pid`
    # is still the server's unless a new process with this pid leads it
    leader = journal_mod.process_start_time(pid)
    if leader is None or leader == current:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    socket_dir = action.get("socket_dir")
    if socket_dir and Path(socket_dir).parent == Path("/tmp") \
            and Path(socket_dir).name.startswith(_SOCKET_DIR_PREFIX):
        shutil.rmtree(socket_dir, ignore_errors=True)


def postgres_bindir(override: str | None = None) -> Path:
    """The newest /usr/lib/postgresql/<version>/bin holding postgres, initdb and pgbench."""
    candidates = [Path(override)] if override else sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda p: _version_key(p.parent.name), reverse=True)
    for path in candidates:
        if all((path / tool).exists() for tool in ("postgres", "initdb", "pg_isready")):
            return path
    where = override or "/usr/lib/postgresql/*/bin"
    raise UsageError(f"pgbench: no PostgreSQL server binaries in {where} "
                     "(apt install postgresql, or give --pg-bin DIR)")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name)) or (0,)


def server_user() -> tuple[int, int, str] | None:
    """(uid, gid, name) to run PostgreSQL as; None: as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid, name
    raise UsageError("pgbench: running as root needs an unprivileged user to run PostgreSQL "
                     "('postgres' or 'nobody'); create one (adduser --system postgres)")


def process_cpu_ticks(pid: int, children_too: bool) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    ticks = int(fields[11]) + int(fields[12])      # utime, stime
    if children_too:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime (reaped children)
    return ticks


def add_server_cpu(rusage: dict[str, float], server_usage: dict[str, float] | None,
                   before_s: float) -> dict[str, float]:
    """The client's rusage with the server's CPU time since `before_s` (PostgresServer.cpu_s
    at the start) added: wait4 of the stopped server (`stop()`) splits it into user and system,
    the baseline from /proc only in sum, so the run's share is split as the whole was. Also
    `server_cpu_s`, the server's part."""
    if server_usage is None:
        return rusage
    delta_s = max(0.0, (server_usage["user_s"] + server_usage["system_s"]) - before_s)
    share = server_usage["user_s"] / max(1e-9, server_usage["user_s"] + server_usage["system_s"])
    rusage["user_s"] += delta_s * share
    rusage["system_s"] += delta_s * (1 - share)
    rusage["server_cpu_s"] = delta_s
    return rusage


class PostgresServer:
    """One cluster: its data and socket directories (journaled `rmtree`) and its postmaster
    (journaled `pg_stop`)."""

    def __init__(self, bindir: Path, settings: dict[str, str], max_connections: int):
        self.bindir = bindir
        self.settings = settings
        self.max_connections = max_connections
        self.user: tuple[int, int, str] | None = None
        self.pgdata: Path | None = None
        self.socket_dir: Path | None = None
        self.program: supervisor.Program | None = None
        self.file_entries: list[Entry] = []

    def connect_args(self) -> list[str]:
        return ["-h", str(self.socket_dir), "-p", str(PORT), "-U", DB_USER]

    def as_user(self, ctx: RunContext, argv: list[str], what: str, timeout: float = 600) -> str:
        """Run a short program as the server's user; RuntimeError with its last line if it
        fails."""
        uid_gid = (self.user[0], self.user[1]) if self.user else None
        result = supervisor.run_to_end(ctx, argv, what, timeout_s=timeout, cwd="/",
                                       user=uid_gid)
        if result.code != 0:
            line = supervisor.last_line(result.stderr or result.stdout)
            raise RuntimeError(f"{what} failed (exit {result.code})"
                               + (f": {line}" if line else ""))
        return result.stdout

    def create(self, ctx: RunContext) -> None:
        """The directories and initdb."""
        self.user = server_user()
        self.pgdata = ctx.workdir / "pgdata"
        if self.pgdata.exists():
            raise UsageError(f"pgbench: {self.pgdata} already exists (left from an earlier "
                             "run? `stallbench cleanup`, or remove it)")
        self.socket_dir = Path("/tmp") / f"{_SOCKET_DIR_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self._journal_rmtree(ctx, self.pgdata)
        self.pgdata.mkdir(mode=0o700)
        self._journal_rmtree(ctx, self.socket_dir)
        self.socket_dir.mkdir(mode=0o700)
        if self.user:
            os.chown(self.pgdata, self.user[0], self.user[1])
            os.chown(self.socket_dir, self.user[0], self.user[1])
            try:
                self.as_user(ctx, ["test", "-w", str(self.pgdata)], "access check", 30)
            except RuntimeError:
                raise UsageError(
                    f"pgbench: PostgreSQL runs as user {self.user[2]}, who cannot reach "
                    f"{self.pgdata}: make its parent directories searchable (chmod o+x) or use "
                    "a --dir elsewhere") from None
        self.as_user(ctx, [str(self.bindir / "initdb"), "-D", str(self.pgdata),
                           f"--username={DB_USER}", "--auth=trust", "--encoding=UTF8",
                           "--locale=C", "--no-sync", "--no-instructions"], "initdb")

    def _journal_rmtree(self, ctx: RunContext, path: Path) -> None:
        if ctx.journal is not None:
            self.file_entries.append(ctx.journal.push("rmtree", path=str(path)))

    def start(self, ctx: RunContext) -> None:
        """Start the postmaster and wait until it accepts connections."""
        argv = [str(self.bindir / "postgres"), "-D", str(self.pgdata),
                "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
                "-c", f"port={PORT}", "-c", f"max_connections={self.max_connections}"]
        for key, value in self.settings.items():
            argv += ["-c", f"{key}={value}"]
        uid_gid = (self.user[0], self.user[1]) if self.user else None
        log_path = ctx.run_dir / "postgres.log"
        with open(log_path, "ab") as log:
            self.program = supervisor.start(
                ctx, argv, stdout=log, stderr=subprocess.STDOUT, user=uid_gid, cwd="/",
                journal_kind="pg_stop", socket_dir=str(self.socket_dir))
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.program.poll() is not None:
                line = supervisor.last_line(log_path.read_text(errors="replace"))
                raise RuntimeError(f"PostgreSQL did not start (exit {self.program.returncode})"
                                   + (f": {line}" if line else ""))
            ready = subprocess.run([str(self.bindir / "pg_isready"), "-q", "-d", DB_NAME,
                                    *self.connect_args()], capture_output=True)
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL was not ready after {_READY_TIMEOUT_S:g} s")

    def cpu_s(self, pids: Iterable[int]) -> float:
        """CPU seconds so far of the postmaster with the backends it reaped, and of the other
        live processes among `pids` (its backends, which it reaps later): the baseline that
        add_server_cpu subtracts from the server's wait4 rusage at the end."""
        assert self.program is not None
        server = self.program.pid
        ticks = process_cpu_ticks(server, True) + sum(
            process_cpu_ticks(pid, False) for pid in pids if pid != server)
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self) -> dict[str, float] | None:
        """Fast shutdown, then immediate, then SIGKILL; returns the server's rusage from wait4
        (its own CPU and that of every backend it reaped), None if it was not reaped."""
        program, self.program = self.program, None
        if program is None:
            return None
        try:
            outcome = program.stop(STOP_LADDER)
        finally:
            program.close()
        if not outcome.rusage:
            return None
        return {"user_s": outcome.rusage["user_s"], "system_s": outcome.rusage["system_s"]}

    def remove(self, ctx: RunContext) -> dict[str, float] | None:
        """Stop the server and remove its files (every exit path goes through here)."""
        usage = self.stop()
        for entry in reversed(self.file_entries):
            ctx.journal.undo(entry)
        self.file_entries = []
        if ctx.journal is None:
            for path in (self.socket_dir, self.pgdata):
                if path is not None and path.exists():
                    shutil.rmtree(path, ignore_errors=True)
        return usage
