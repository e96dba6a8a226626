"""Workload `pgbench`: a real PostgreSQL server in the variant's directory, driven by pgbench.

prepare: initdb a cluster in <workdir>/pgdata as an unprivileged user (the `postgres` user when
root, else `nobody`; the caller itself when not root), start the server listening only on a Unix
socket in a private short directory under /tmp (listen_addresses='': no TCP port), with small
shared_buffers by default so the kernel's page cache and writeback matter, and load it with
`pgbench -i -s SCALE`. Server and pgbench run through ctx.env.child_setup (the variant's cgroup).

run: `pgbench -T DURATION -c CLIENTS -j THREADS --log -P 1` — every transaction is logged; op
`txn` (worker = client id), start = end - latency from the log (epoch µs, mapped onto the run's
CLOCK_MONOTONIC by one paired reading). -P 1 also makes pgbench measure its "latency average"
from the transactions themselves (without it pgbench derives it from the run time), so that it
can be compared with ours; pgbench's own tps and averages go to workload_summary. The server is
then stopped (fast shutdown) and its files removed.

Every change is in the journal before it is made (rmtree of pgdata and the socket directory,
`pg_stop` of the server, `kill` of pgbench), so after `kill -9` `stallbench cleanup` stops the
server and removes its files. `pg_stop` (registered here; cleanup imports every workload module)
asks the postmaster for an immediate shutdown (SIGQUIT: no checkpoint, the data directory is
thrown away anyway) rather than the generic kill's SIGTERM, a smart shutdown that waits for
every client to disconnect.
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .. import journal as journal_mod
from ..context import RunContext
from ..errors import UsageError
from ..importers.common import Samples
from ..importers.pgbench import PgbenchLogStats, parse_pgbench_line, stats_summary
from ..units import parse_size
from .base import ProgressFn, Workload, WorkloadResult
from .command import (
    LineTail,
    child_preexec,
    clock_offset_ns,
    progress_from_samples,
    signal_group,
    start_child,
    wait_child,
)

DB_USER = "stallbench"
DB_NAME = "postgres"
PORT = 5432            # only names the socket file inside our private directory
DEFAULT_SETTINGS = {
    "shared_buffers": "16MB",
    "max_wal_size": "256MB",
    "fsync": "on",
    "synchronous_commit": "on",
}
BUILTINS = ("tpcb-like", "simple-update", "select-only")
_SETTING_RE = re.compile(r"^[a-z_][a-z0-9_.]*$")
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_IMMEDIATE_STOP_TIMEOUT_S = 10.0
_SOCKET_DIR_PREFIX = "stallbench-pg-"


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


def parse_pg_settings(items: Any) -> dict[str, str]:
    """--pg-setting key=value (repeatable) or a plan-file table -> {key: value}."""
    settings: dict[str, str] = {}
    if items is None:
        return settings
    if isinstance(items, dict):
        pairs = [(str(k), v) for k, v in items.items()]
    elif isinstance(items, (list, tuple)):
        pairs = []
        for item in items:
            key, sep, value = str(item).partition("=")
            if not sep:
                raise UsageError(f"pgbench: --pg-setting {item!r}: use KEY=VALUE, "
                                 "e.g. shared_buffers=128MB")
            pairs.append((key, value))
    else:
        raise UsageError("pgbench: pg_setting must be a list of KEY=VALUE or a table")
    for key, value in pairs:
        key = key.strip()
        if not _SETTING_RE.match(key):
            raise UsageError(f"pgbench: {key!r} is not a PostgreSQL setting name")
        if key in ("listen_addresses", "unix_socket_directories", "port", "data_directory"):
            raise UsageError(f"pgbench: {key} is managed by stallbench (Unix socket only)")
        value = str(value).strip()
        if not value or any(c in value for c in "\n\r\x00"):
            raise UsageError(f"pgbench: setting {key}: empty or multi-line value")
        settings[key] = value
    return settings


_RESULT_PATTERNS = {
    "transactions": (r"number of transactions actually processed:\s*(\d+)", int),
    "failed": (r"number of failed transactions:\s*(\d+)", int),
    "latency_average_ms": (r"latency average\s*=\s*([\d.]+)\s*ms", float),
    "latency_stddev_ms": (r"latency stddev\s*=\s*([\d.]+)\s*ms", float),
    "initial_connection_time_ms": (r"initial connection time\s*=\s*([\d.]+)\s*ms", float),
    "tps": (r"tps\s*=\s*([\d.]+)\s*\(without initial connection time\)", float),
    "scaling_factor": (r"scaling factor:\s*(\d+)", int),
}


def parse_pgbench_output(text: str) -> dict[str, Any]:
    """pgbench's own summary (its tps, transaction count and average latency)."""
    summary: dict[str, Any] = {}
    for key, (pattern, kind) in _RESULT_PATTERNS.items():
        match = re.search(pattern, text)
        if match:
            summary[key] = kind(match.group(1))
    statements = _parse_statement_latencies(text)
    if statements:
        summary["statements"] = statements
    return summary


def _parse_statement_latencies(text: str) -> list[dict[str, Any]]:
    """The -r block: '  0.123  0  UPDATE pgbench_accounts ...' per statement (ms, failures)."""
    lines = text.splitlines()
    result = []
    inside = False
    for line in lines:
        if line.startswith("statement latencies in milliseconds"):
            inside = True
            continue
        if inside:
            match = re.match(r"^\s+([\d.]+)\s+(?:(\d+)\s+)?(?:(\d+)\s+)?(\S.*)$", line)
            if not match:
                if line.strip() and not line.startswith(" "):
                    inside = False
                continue
            result.append({"latency_ms": float(match.group(1)),
                           "failures": int(match.group(2) or 0),
                           "statement": match.group(4).strip()})
    return result


def _process_cpu_ticks(pid: int, children_too: bool) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    ticks = int(fields[11]) + int(fields[12])      # utime, stime
    if children_too:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime (reaped children)
    return ticks


class PgbenchWorkload(Workload):
    name = "pgbench"
    ops = ("txn",)
    help = "a real PostgreSQL server in the variant's directory, driven by pgbench"
    default_warmup_s = 2.0      # connections, the first checkpoint, a cold buffer pool

    def __init__(self, scale: int, clients: int, threads: int, builtin: str,
                 settings: dict[str, str], per_statement: bool, bindir: Path):
        self.scale = scale
        self.clients = clients
        self.threads = threads
        self.builtin = builtin
        self.settings = settings
        self.per_statement = per_statement
        self.bindir = bindir
        self.server: subprocess.Popen | None = None
        self.server_entry = None
        self.file_entries: list[Any] = []
        self.pgdata: Path | None = None
        self.socket_dir: Path | None = None
        self.user: tuple[int, int, str] | None = None

    # -- options ------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--scale", type=int, default=10,
                            help="pgbench -i scale factor (10 = 1M accounts, ~160 MB)")
        parser.add_argument("--clients", type=int, default=4, help="pgbench -c (4)")
        parser.add_argument("--threads", type=int, default=2, help="pgbench -j (2)")
        parser.add_argument("--builtin", default="tpcb-like", choices=BUILTINS,
                            help="pgbench built-in script (tpcb-like)")
        parser.add_argument("--pg-setting", dest="pg_setting", action="append", default=None,
                            metavar="KEY=VALUE",
                            help="PostgreSQL setting (repeatable); defaults: "
                                 + ", ".join(f"{k}={v}" for k, v in DEFAULT_SETTINGS.items()))
        parser.add_argument("--per-statement", dest="per_statement", action="store_true",
                            help="also report per-statement average latencies (pgbench -r)")
        parser.add_argument("--pg-bin", dest="pg_bin", default=None, metavar="DIR",
                            help="PostgreSQL binaries (default: newest /usr/lib/postgresql/*/bin)")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> PgbenchWorkload:
        def positive_int(key: str, default: int, limit: int) -> int:
            value = options.get(key, default)
            if value is None:
                value = default
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise UsageError(f"pgbench: {key} must be an integer from 1 to {limit}, "
                                 f"got {value!r}")
            return value

        scale = positive_int("scale", 10, 100_000)
        clients = positive_int("clients", 4, 1000)
        threads = positive_int("threads", 2, 1000)
        if threads > clients:
            raise UsageError(f"pgbench: threads ({threads}) cannot exceed clients ({clients})")
        builtin = options.get("builtin") or "tpcb-like"
        if builtin not in BUILTINS:
            raise UsageError(f"pgbench: builtin must be one of {', '.join(BUILTINS)}")
        settings = {**DEFAULT_SETTINGS, **parse_pg_settings(options.get("pg_setting"))}
        bindir = postgres_bindir(options.get("pg_bin"))
        if shutil.which("pgbench") is None and not (bindir / "pgbench").exists():
            raise UsageError("pgbench: the pgbench program is not installed "
                             "(apt install postgresql-contrib)")
        server_user()
        return cls(scale, clients, threads, builtin, settings,
                   bool(options.get("per_statement")), bindir)

    def params(self) -> dict[str, Any]:
        return {"scale": self.scale, "clients": self.clients, "threads": self.threads,
                "builtin": self.builtin, "pg_settings": self.settings,
                "per_statement": self.per_statement, "pg_bin": str(self.bindir),
                "server_version": self._server_version()}

    def _server_version(self) -> str | None:
        try:
            out = subprocess.run([str(self.bindir / "postgres"), "--version"],
                                 capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return out.strip() or None

    def space_needed(self, memory_available: int) -> int:
        data = self.scale * 16 * 1024 * 1024 * 3 // 2
        try:
            wal = parse_size(self.settings.get("max_wal_size", "1GB").rstrip("B"))
        except UsageError:
            wal = 1 << 30
        return data + 2 * wal + (64 << 20)

    # -- server -------------------------------------------------------------------------------
    def _pgbench(self) -> str:
        local = self.bindir / "pgbench"
        return str(local) if local.exists() else "pgbench"

    def _as_user(self, ctx: RunContext, argv: list[str], what: str, timeout: float = 600) -> str:
        uid_gid = (self.user[0], self.user[1]) if self.user else None
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                    preexec_fn=child_preexec(ctx, uid_gid), cwd="/")
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"{what} did not finish within {timeout:g} s") from exc
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines()
            raise RuntimeError(f"{what} failed (exit {result.returncode})"
                               + (f": {lines[-1]}" if lines else ""))
        return result.stdout

    def prepare(self, ctx: RunContext) -> None:
        try:
            self._prepare(ctx)
        except BaseException:
            self.shutdown(ctx)
            raise

    def _prepare(self, ctx: RunContext) -> None:
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
                self._as_user(ctx, ["test", "-w", str(self.pgdata)], "access check", 30)
            except RuntimeError:
                raise UsageError(
                    f"pgbench: PostgreSQL runs as user {self.user[2]}, who cannot reach "
                    f"{self.pgdata}: make its parent directories searchable (chmod o+x) or use "
                    "a --dir elsewhere") from None
        self._as_user(ctx, [str(self.bindir / "initdb"), "-D", str(self.pgdata),
                            f"--username={DB_USER}", "--auth=trust", "--encoding=UTF8",
                            "--locale=C", "--no-sync", "--no-instructions"], "initdb")
        self._start_server(ctx)
        self.run_client(ctx, ["-i", "-q", "-s", str(self.scale)], "pgbench -i")

    def _journal_rmtree(self, ctx: RunContext, path: Path) -> None:
        if ctx.journal is not None:
            self.file_entries.append(ctx.journal.push("rmtree", path=str(path)))

    def _connect_args(self) -> list[str]:
        return ["-h", str(self.socket_dir), "-p", str(PORT), "-U", DB_USER]

    def _start_server(self, ctx: RunContext) -> None:
        argv = [str(self.bindir / "postgres"), "-D", str(self.pgdata),
                "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
                "-c", f"port={PORT}", "-c", f"max_connections={self.clients + 10}"]
        for key, value in self.settings.items():
            argv += ["-c", f"{key}={value}"]
        uid_gid = (self.user[0], self.user[1]) if self.user else None
        log = open(ctx.run_dir / "postgres.log", "ab")
        try:
            self.server = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=child_preexec(ctx, uid_gid), cwd="/")
        finally:
            log.close()
        if ctx.journal is not None:
            self.server_entry = ctx.journal.push(
                "pg_stop", pid=self.server.pid,
                start_time=journal_mod.process_start_time(self.server.pid),
                socket_dir=str(self.socket_dir))
        ctx.processes.add(self.server.pid)
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                tail = (ctx.run_dir / "postgres.log").read_text(errors="replace")
                lines = tail.strip().splitlines()
                raise RuntimeError(f"PostgreSQL did not start (exit {self.server.returncode})"
                                   + (f": {lines[-1]}" if lines else ""))
            ready = subprocess.run([str(self.bindir / "pg_isready"), "-q", "-d", DB_NAME,
                                    *self._connect_args()], capture_output=True)
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL was not ready after {_READY_TIMEOUT_S:g} s")

    def run_client(self, ctx: RunContext, args: list[str], what: str) -> str:
        argv = [self._pgbench(), *args, *self._connect_args(), DB_NAME]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=3600,
                                preexec_fn=ctx.env.child_setup, cwd=ctx.run_dir)
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            raise RuntimeError(f"{what} failed (exit {result.returncode})"
                               + (f": {lines[-1]}" if lines else ""))
        return result.stdout

    def _stop_server(self, ctx: RunContext) -> dict[str, float] | None:
        """Fast shutdown (SIGINT), then immediate (SIGQUIT), then SIGKILL; returns the server's
        rusage from wait4 (its own CPU and that of every backend it reaped)."""
        server = self.server
        if server is None:
            return None
        usage = None
        if server.returncode is None:
            for sig, wait_s in ((signal.SIGINT, _STOP_TIMEOUT_S), (signal.SIGQUIT, 5.0),
                                (signal.SIGKILL, 5.0)):
                try:
                    os.kill(server.pid, sig)
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline:
                    pid, status, ru = os.wait4(server.pid, os.WNOHANG)
                    if pid == server.pid:
                        server.returncode = os.waitstatus_to_exitcode(status)
                        usage = ru
                        break
                    time.sleep(0.05)
                if server.returncode is not None:
                    break
        signal_group(server, signal.SIGKILL)   # any backend left in the server's session
        if self.server_entry is not None and ctx.journal is not None:
            ctx.journal.forget(self.server_entry)
            self.server_entry = None
        self.server = None
        if usage is None:
            return None
        return {"user_s": usage.ru_utime, "system_s": usage.ru_stime}

    def shutdown(self, ctx: RunContext) -> dict[str, float] | None:
        """Stop the server and remove its files (every exit path goes through here)."""
        usage = self._stop_server(ctx)
        for entry in reversed(self.file_entries):
            ctx.journal.undo(entry)
        self.file_entries = []
        if ctx.journal is None:
            for path in (self.socket_dir, self.pgdata):
                if path is not None and path.exists():
                    shutil.rmtree(path, ignore_errors=True)
        return usage

    # -- the timed run ------------------------------------------------------------------------
    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        try:
            return self._run(ctx, progress)
        finally:
            self.shutdown(ctx)

    def _run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        if self.server is None:
            raise RuntimeError("pgbench: prepare() did not start the server")
        logdir = ctx.run_dir / ".pgbench-logs"
        logdir.mkdir(exist_ok=True)
        seconds = max(1, int(round(ctx.duration_s)))
        argv = [self._pgbench(), "-T", str(seconds), "-c", str(self.clients),
                "-j", str(self.threads), "-b", self.builtin, "-P", "1", "--log",
                f"--log-prefix={logdir / 'pgbench_log'}", "--no-vacuum"]
        if self.per_statement:
            argv.append("-r")
        argv += [*self._connect_args(), DB_NAME]
        tick_hz = os.sysconf("SC_CLK_TCK")
        server_ticks_before = _process_cpu_ticks(self.server.pid, True) + sum(
            _process_cpu_ticks(pid, False) for pid in ctx.processes.pids()
            if pid != self.server.pid)
        offset = clock_offset_ns()
        samples = Samples("epoch")
        stats = PgbenchLogStats()
        tails: dict[str, LineTail] = {}

        def collect(final: bool = False) -> None:
            for path in sorted(glob.glob(str(logdir / "pgbench_log.*"))):
                tail = tails.setdefault(path, LineTail(Path(path)))
                for lineno, line in tail.lines(final):
                    parse_pgbench_line(path, lineno, line, samples, stats)

        since = 0

        def tick() -> None:
            nonlocal since
            collect()
            progress(progress_from_samples(samples, since))
            since = len(samples)

        out_path = ctx.run_dir / "pgbench.out"
        with open(out_path, "w") as out:
            proc, entry = start_child(ctx, argv, cwd=ctx.run_dir, stdout=out,
                                      stderr=subprocess.STDOUT)
        try:
            stopped, client_usage = wait_child(
                proc, ctx.stop, deadline_ns=ctx.t0_ns + int((seconds + 120) * 1e9),
                on_stop=lambda: signal_group(proc, signal.SIGINT), tick=tick, grace_s=5.0)
        finally:
            signal_group(proc, signal.SIGKILL)
            if proc.returncode is None:
                proc.wait()
            if entry is not None:
                ctx.journal.forget(entry)
        # a pgbench stopped by a signal can leave half a line in a log: drop it
        collect(final=stopped is None)
        cut = sum(1 for tail in tails.values() if tail.partial.strip())
        if cut:
            ctx.notes.append(f"{cut} incomplete last line(s) of pgbench's logs dropped "
                             "(pgbench was stopped)")
        output = out_path.read_text(errors="replace")
        own = parse_pgbench_output(output)
        server_usage = self._stop_server(ctx)
        rusage = dict(client_usage)
        if server_usage is not None:
            delta_s = max(0.0, (server_usage["user_s"] + server_usage["system_s"])
                          - server_ticks_before / tick_hz)
            # wait4 splits user/system; the baseline from /proc does too, but only in sum here
            share = server_usage["user_s"] / max(1e-9, server_usage["user_s"]
                                                 + server_usage["system_s"])
            rusage["user_s"] += delta_s * share
            rusage["system_s"] += delta_s * (1 - share)
            rusage["server_cpu_s"] = delta_s
        shutil.rmtree(logdir, ignore_errors=True)
        mean_ns = 0
        if len(samples):
            _, _, _, latency = samples.arrays()
            mean_ns = int(latency.mean())
        extra: dict[str, Any] = {
            "pgbench": own,
            "log": stats_summary(stats, samples),
            "stallbench_mean_latency_ms": mean_ns / 1e6,
            "exit_code": proc.returncode,
        }
        ctx.notes.append("pgbench's own tps and average latency are in workload_summary.pgbench; "
                         "pgbench logs latencies in µs; rusage includes the server's CPU "
                         "(including its shutdown checkpoint)")
        status, reason = "complete", None
        if stopped == "stop":
            status, reason = "interrupted", "stopped before pgbench finished"
        elif stopped == "deadline":
            status, reason = "failed", "pgbench ran far past its duration and was stopped"
        elif proc.returncode != 0:
            lines = output.strip().splitlines()
            status, reason = "failed", (f"pgbench exited with status {proc.returncode}"
                                        + (f": {lines[-1]}" if lines else ""))
        counted = {"txn": own["transactions"]} if "transactions" in own else {}
        return WorkloadResult(batches=samples.batches(offset + ctx.t0_ns), counted=counted,
                              rusage=rusage, extra=extra, status=status, reason=reason)


WORKLOAD = PgbenchWorkload
