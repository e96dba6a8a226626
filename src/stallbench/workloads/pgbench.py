"""Workload `pgbench`: a real PostgreSQL server in the variant's directory, driven by pgbench.

prepare: a PostgreSQL cluster in <workdir>/pgdata, its server listening only on a Unix socket
(pgserver.py), with small shared_buffers by default so the kernel's page cache and writeback
matter, loaded with `pgbench -i -s SCALE`. Server and pgbench run under the supervisor
(supervisor.py) in the variant's cgroup.

run: `pgbench -T DURATION -c CLIENTS -j THREADS --log -P 1` — every transaction is logged; op
`txn` (worker = client id), start = end - latency from the log (epoch µs, mapped onto the run's
CLOCK_MONOTONIC by one paired reading). -P 1 also makes pgbench measure its "latency average"
from the transactions themselves (without it pgbench derives it from the run time), so that it
can be compared with ours; pgbench's own tps and averages go to workload_summary. The server is
then stopped (fast shutdown) and its files removed.

Every change is in the journal before it is made (pgserver.py: rmtree of pgdata and the socket
directory, `pg_stop` of the server; `kill` of pgbench), so after `kill -9` `stallbench cleanup`
stops the server and removes its files.

Custom scripts (`--script FILE[@WEIGHT]`, pgbench -f, copied into the run directory) replace or
join the built-in one (`--builtin NAME[@WEIGHT]`); with more than one script each has its own op
`txn-<name>`. `--rate TPS` (-R) schedules transactions: the log's time then counts from the
scheduled start, so ops get intended_ns (the scheduled start) and service time as latency, and
the comparison shows `txn (response)` too (see logformats/pgbench.py). `--latency-limit MS` (-L),
`--protocol simple|extended|prepared` (-M) and `--per-statement` (-r) pass through.
"""

from __future__ import annotations

import glob
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.options import APPEND, SWITCH, option
from ..core.units import parse_size
from ..logformats.loglines import LineTail
from ..logformats.pgbench import (
    PgbenchLogStats,
    parse_pgbench_line,
    parse_pgbench_output,
    stats_summary,
)
from ..logformats.samples import Samples, clock_offset_ns
from . import supervisor
from .base import ProgressFn, Workload, WorkloadResult, logged_ops
from .pgbenchargs import (
    BUILTINS,
    DEFAULT_SETTINGS,
    PROTOCOLS,
    as_list,
    parse_pg_settings,
    parse_script,
    positive_number,
    script_ops,
    split_weight,
)
from .pgserver import DB_NAME, PostgresServer, add_server_cpu, postgres_bindir, server_user


# -- options: the one declaration of pgbench's flags, plan keys, defaults and checks -----------
def _count(limit: int) -> Any:
    def parse(value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            raise UsageError(f"pgbench: {what.lstrip('-')} must be an integer from 1 to {limit}, "
                             f"got {value!r}")
        return value
    return parse


@dataclass
class PgbenchOptions:
    scale: int = option(10, parse=_count(100_000), cli_type=int,
                        help="pgbench -i scale factor (10 = 1M accounts, ~160 MB)")
    clients: int = option(4, parse=_count(1000), cli_type=int, help="pgbench -c", show=str)
    threads: int = option(2, parse=_count(1000), cli_type=int, help="pgbench -j", show=str)
    builtin: str | None = option(None, help="pgbench built-in script NAME[@WEIGHT]: "
                                 + ", ".join(BUILTINS)
                                 + " (default tpcb-like unless --script is given)")
    script: Any = option(None, kind=APPEND, metavar="FILE[@WEIGHT]",
                         help="a custom pgbench script (-f; repeatable, with weights)")
    rate: float | None = option(None, cli_type=float, metavar="TPS",
                                help="schedule transactions at this rate (pgbench -R); response "
                                     "time then counts from the scheduled start")
    latency_limit: float | None = option(None, cli_type=float, metavar="MS",
                                         help="pgbench -L: with --rate, skip transactions "
                                              "already this late; counts those over it")
    protocol: str | None = option(None, choices=PROTOCOLS,
                                  help="pgbench -M query protocol (simple)")
    keep_logs: bool = option(False, kind=SWITCH, help="keep pgbench's per-transaction logs in "
                             "the run directory (pgbench-logs/)")
    pg_setting: Any = option(None, kind=APPEND, metavar="KEY=VALUE",
                             help="PostgreSQL setting (repeatable); defaults: "
                                  + ", ".join(f"{k}={v}" for k, v in DEFAULT_SETTINGS.items()))
    per_statement: bool = option(False, kind=SWITCH, help="also report per-statement average "
                                 "latencies (pgbench -r)")
    pg_bin: str | None = option(None, metavar="DIR", help="PostgreSQL binaries (default: "
                                "newest /usr/lib/postgresql/*/bin)")
# ------------------------------------------------------------------------------------------------


class PgbenchWorkload(Workload):
    Options = PgbenchOptions
    name = "pgbench"
    ops = ("txn",)
    help = "a real PostgreSQL server in the variant's directory, driven by pgbench"
    default_warmup_s = 2.0      # connections, the first checkpoint, a cold buffer pool

    def __init__(self, options: PgbenchOptions, builtin_weight: int | None = None):
        # resolved by from_options: builtin a name (its weight apart), script a list of
        # (path, weight), pg_setting every setting with the defaults, pg_bin the directory
        self.options = options
        self.builtin_weight = builtin_weight
        self.script_ops = script_ops(options.builtin, options.script)
        self.ops = tuple(dict.fromkeys(self.script_ops)) if self.script_ops else ("txn",)
        self.pg: PostgresServer | None = None

    @property
    def settings(self) -> dict[str, str]:
        return self.options.pg_setting

    @property
    def bindir(self) -> Path:
        return Path(self.options.pg_bin)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> PgbenchWorkload:
        opts = cls.parse_options(options)
        if opts.threads > opts.clients:
            raise UsageError(f"pgbench: threads ({opts.threads}) cannot exceed clients "
                             f"({opts.clients})")
        scripts = [parse_script(item) for item in as_list(opts.script, "script")]
        builtin, builtin_weight = opts.builtin, None
        if builtin is not None:
            if not isinstance(builtin, str):
                raise UsageError(f"pgbench: --builtin needs a name, got {builtin!r}")
            builtin, builtin_weight = split_weight(builtin, "--builtin")
        elif not scripts:
            builtin = "tpcb-like"
        if builtin is not None and builtin not in BUILTINS:
            raise UsageError(f"pgbench: --builtin {builtin!r}: choose one of "
                             f"{', '.join(BUILTINS)}")
        rate = positive_number(opts.rate, "--rate", 1e7)
        latency_limit = positive_number(opts.latency_limit, "--latency-limit", 1e7)
        if opts.protocol is not None and opts.protocol not in PROTOCOLS:
            raise UsageError(f"pgbench: --protocol {opts.protocol!r}: choose one of "
                             f"{', '.join(PROTOCOLS)}")
        settings = {**DEFAULT_SETTINGS, **parse_pg_settings(opts.pg_setting)}
        bindir = postgres_bindir(opts.pg_bin)
        if shutil.which("pgbench") is None and not (bindir / "pgbench").exists():
            raise UsageError("pgbench: the pgbench program is not installed "
                             "(apt install postgresql-contrib)")
        server_user()
        opts.builtin, opts.script, opts.rate, opts.latency_limit = \
            builtin, scripts, rate, latency_limit
        opts.pg_setting, opts.pg_bin = settings, str(bindir)
        opts.per_statement, opts.keep_logs = bool(opts.per_statement), bool(opts.keep_logs)
        return cls(opts, builtin_weight)

    def params(self) -> dict[str, Any]:
        """run.json's params: the options under the names (and in the order) runs have always
        recorded them, which noise profiles and `show` read."""
        opts = self.options
        return {"scale": opts.scale, "clients": opts.clients, "threads": opts.threads,
                "builtin": opts.builtin, "pg_settings": opts.pg_setting,
                "per_statement": opts.per_statement, "pg_bin": opts.pg_bin,
                "builtin_weight": self.builtin_weight,
                "scripts": [{"path": str(p), "weight": w} for p, w in opts.script],
                "rate": opts.rate, "latency_limit_ms": opts.latency_limit,
                "protocol": opts.protocol, "keep_logs": opts.keep_logs,
                "server_version": self._server_version()}

    def _server_version(self) -> str | None:
        try:
            out = subprocess.run([str(self.bindir / "postgres"), "--version"],
                                 capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return out.strip() or None

    def space_needed(self, memory_available: int) -> int:
        data = self.options.scale * 16 * 1024 * 1024 * 3 // 2
        try:
            wal = parse_size(self.settings.get("max_wal_size", "1GB").rstrip("B"))
        except UsageError:
            wal = 1 << 30
        return data + 2 * wal + (64 << 20)

    # -- server -------------------------------------------------------------------------------
    def _pgbench(self) -> str:
        local = self.bindir / "pgbench"
        return str(local) if local.exists() else "pgbench"

    @property
    def server(self) -> supervisor.Program | None:
        return self.pg.program if self.pg else None

    @property
    def socket_dir(self) -> Path | None:
        return self.pg.socket_dir if self.pg else None

    def _connect_args(self) -> list[str]:
        assert self.pg is not None
        return self.pg.connect_args()

    def prepare(self, ctx: RunContext) -> None:
        self.pg = PostgresServer(self.bindir, self.settings, self.options.clients + 10)
        try:
            self.pg.create(ctx)
            self.pg.start(ctx)
            self.run_client(ctx, ["-i", "-q", "-s", str(self.options.scale)], "pgbench -i")
        except BaseException:
            self.shutdown(ctx)
            raise

    def run_client(self, ctx: RunContext, args: list[str], what: str) -> str:
        argv = [self._pgbench(), *args, *self._connect_args(), DB_NAME]
        result = supervisor.run_to_end(ctx, argv, what, timeout_s=3600, cwd=ctx.run_dir)
        if result.code != 0:
            line = supervisor.last_line(result.stderr)
            raise RuntimeError(f"{what} failed (exit {result.code})"
                               + (f": {line}" if line else ""))
        return result.stdout

    def shutdown(self, ctx: RunContext) -> dict[str, float] | None:
        """Stop the server and remove its files (every exit path goes through here)."""
        return self.pg.remove(ctx) if self.pg else None

    def _script_args(self, ctx: RunContext) -> list[str]:
        """-b/-f arguments; each script is copied into the run directory, so the run keeps
        what it ran and pgbench reads a file nobody changes under it."""
        args: list[str] = []
        if self.options.builtin:
            weight = f"@{self.builtin_weight}" if self.builtin_weight is not None else ""
            args += ["-b", self.options.builtin + weight]
        for index, (path, weight) in enumerate(self.options.script):
            copy = ctx.run_dir / f"pgbench-script-{index}-{path.name}"
            shutil.copyfile(path, copy)
            args += ["-f", str(copy) + (f"@{weight}" if weight is not None else "")]
        return args

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
        argv = [self._pgbench(), "-T", str(seconds), "-c", str(self.options.clients),
                "-j", str(self.options.threads), "-P", "1", "--log",
                f"--log-prefix={logdir / 'pgbench_log'}", "--no-vacuum"]
        argv += self._script_args(ctx)
        if self.options.per_statement:
            argv.append("-r")
        if self.options.rate is not None:
            argv += ["-R", f"{self.options.rate:g}"]
        if self.options.latency_limit is not None:
            argv += ["-L", f"{self.options.latency_limit:g}"]
        if self.options.protocol is not None:
            argv += ["-M", self.options.protocol]
        argv += [*self._connect_args(), DB_NAME]
        server_cpu_before_s = self.pg.cpu_s(ctx.processes.pids())
        offset = clock_offset_ns()
        samples = Samples("epoch")
        stats = PgbenchLogStats()
        tails: dict[str, LineTail] = {}

        def collect(final: bool = False) -> None:
            for path in sorted(glob.glob(str(logdir / "pgbench_log.*"))):
                tail = tails.setdefault(path, LineTail(Path(path)))
                for lineno, line in tail.lines(final):
                    parse_pgbench_line(path, lineno, line, samples, stats,
                                       paced=self.options.rate is not None,
                                       op_names=self.script_ops or None)

        since = 0

        def tick() -> None:
            nonlocal since
            collect()
            progress(samples.progress(since))
            since = len(samples)

        out_path = ctx.run_dir / "pgbench.out"
        with open(out_path, "w") as out:
            program = supervisor.start(ctx, argv, cwd=ctx.run_dir, stdout=out,
                                       stderr=subprocess.STDOUT)
        ctx.workload_starting()       # no start gate: the monitors attach to pgbench and the
        with program:                 # server as the client starts
            outcome = program.wait(
                ctx.stop, deadline_ns=ctx.t0_ns + int((seconds + 120) * 1e9),
                ladder=(supervisor.StopStep(signal.SIGINT, 5.0),), tick=tick)
        # a pgbench stopped by a signal can leave half a line in a log: drop it
        collect(final=outcome.stopped is None)
        cut = sum(1 for tail in tails.values() if tail.partial.strip())
        if cut:
            ctx.notes.append(f"{cut} incomplete last line(s) of pgbench's logs dropped "
                             "(pgbench was stopped)")
        output = out_path.read_text(errors="replace")
        own = parse_pgbench_output(output)
        rusage = add_server_cpu(dict(outcome.rusage), self.pg.stop(), server_cpu_before_s)
        if self.options.keep_logs:
            logdir.rename(ctx.run_dir / "pgbench-logs")
        else:
            shutil.rmtree(logdir, ignore_errors=True)
        mean_ns = 0
        if len(samples):
            _, _, _, latency = samples.arrays()
            mean_ns = int(latency.mean())
        extra: dict[str, Any] = {
            "pgbench": own,
            "log": stats_summary(stats, samples),
            "stallbench_mean_latency_ms": mean_ns / 1e6,
            "exit_code": outcome.exit_code,
        }
        ctx.notes.append("pgbench's own tps and average latency are in workload_summary.pgbench; "
                         "pgbench logs latencies in µs; rusage includes the server's CPU "
                         "(including its shutdown checkpoint)")
        if self.options.rate is not None:
            ctx.notes.append("rate-limited (pgbench -R): the txn ops are service times (from "
                             "the actual start); 'txn (response)' counts from the scheduled "
                             "start, as pgbench's own latency average does")
        if stats.skipped:
            ctx.notes.append(f"{stats.skipped} transactions skipped by --latency-limit (already "
                             "later than the limit when due): not ops, so response-time "
                             "percentiles leave them out")
        status, reason = outcome.run_status("pgbench", supervisor.last_line(output),
                                            planned="duration")
        counted = {"txn": own["transactions"]} if "transactions" in own and \
            self.ops == ("txn",) else {}
        return WorkloadResult(batches=logged_ops(samples, offset + ctx.t0_ns), counted=counted,
                              rusage=rusage, extra=extra, status=status, reason=reason)


WORKLOAD = PgbenchWorkload
