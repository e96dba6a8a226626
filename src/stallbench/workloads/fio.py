"""Workload `fio`: a fio job file run with per-IO latency logs; ops `read`/`write` per job.

`stallbench run fio --job FILE`. The job file is copied with these options appended to every
section, so they win over the job's own: directory=<the variant's directory>,
runtime=<--duration> + time_based, write_lat_log + log_avg_msec=0 (one line per IO),
log_offset=1, log_unix_epoch=1 (so times can be mapped onto the run clock), lat_percentiles=1
(fio's JSON then has percentiles of the same total latency we record), per_job_logs=1.

Recorded latency is fio's `lat` (submission + completion: what the application waits for);
worker = fio's job number (1-based, one per job clone). fio does not log sync
(fsync/fdatasync) per IO: their latency is only in fio's JSON totals (workload_summary.jobs[].sync).
fio's logs have ms timestamps: op start = completion - latency, to the ms.
Each IO's offset and block size go to monitors/fio_io.parquet (see logformats/fio.py). fio logs
no scheduled start for rate-limited jobs (rate=, rate_iops=): their ops are service times, and
the run's notes say so.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.options import option
from ..core.units import parse_size
from ..logformats import fio as fio_logs
from ..logformats.samples import Samples, clock_offset_ns
from . import supervisor
from .base import ProgressFn, Workload, WorkloadResult, logged_ops


# -- options: the one declaration of fio's flags, plan keys, defaults and checks ---------------
@dataclass
class FioOptions:
    job: str | None = option(None, metavar="FILE",
                             help="the fio job file (e.g. examples/pg-like.fio)")
# ------------------------------------------------------------------------------------------------

LOG_PREFIX = "stallbench"
_SECTION_RE = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")
FIO_JSON = "fio.json"


def forced_job_text(text: str, workdir: Path, logdir: Path, duration_s: float) -> str:
    """The job file with our options appended to every section (later options win in fio)."""
    forced = [
        f"directory={workdir}",
        f"runtime={max(1, int(round(duration_s)))}",
        "time_based=1",
        f"write_lat_log={logdir / LOG_PREFIX}",
        "log_avg_msec=0",
        "log_offset=1",
        "log_unix_epoch=1",
        "lat_percentiles=1",
        "per_job_logs=1",
    ]
    out: list[str] = []
    sections = 0
    for line in text.splitlines():
        if _SECTION_RE.match(line) and sections:
            out.extend(forced)
        if _SECTION_RE.match(line):
            sections += 1
        out.append(line)
    if sections:
        out.extend(forced)
    return "\n".join(out) + "\n"


def job_sections(text: str) -> list[tuple[str, dict[str, str]]]:
    """[(section name, {option: value})] of a fio job file (for validation and sizing)."""
    sections: list[tuple[str, dict[str, str]]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        match = _SECTION_RE.match(line)
        if match:
            sections.append((match["name"].strip(), {}))
        elif sections:
            key, _, value = line.partition("=")
            sections[-1][1][key.strip()] = value.strip()
    return sections


class FioWorkload(Workload):
    Options = FioOptions
    name = "fio"
    ops = ("read", "write")
    help = "run a fio job file with per-IO latency logs"

    def __init__(self, job: Path, job_text: str):
        self.job = job
        self.job_text = job_text

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> FioWorkload:
        job = cls.parse_options(options).job
        if not job:
            raise UsageError("fio: give a job file with --job FILE (e.g. examples/pg-like.fio)")
        job = Path(job)
        try:
            text = job.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"fio: cannot read job file {job}: {exc}") from exc
        sections = job_sections(text)
        jobs = [name for name, _ in sections if name != "global"]
        if not jobs:
            raise UsageError(f"fio: {job} has no job section ([name] followed by options)")
        if shutil.which("fio") is None:
            raise UsageError("fio: the fio program is not installed (apt install fio)")
        return cls(job.resolve(), text)

    def params(self) -> dict[str, Any]:
        return {"job": str(self.job), "job_text": self.job_text, "latency": "lat"}

    def space_needed(self, memory_available: int) -> int:
        total = 0
        global_opts: dict[str, str] = {}
        for name, opts in job_sections(self.job_text):
            if name == "global":
                global_opts.update(opts)
                continue
            merged = {**global_opts, **opts}
            try:
                size = parse_size(merged.get("size", "0") or "0")
            except UsageError:
                size = 0
            try:
                numjobs = int(merged.get("numjobs", "1"))
            except ValueError:
                numjobs = 1
            total += size * max(numjobs, 1)
        return total

    def _job_file(self, ctx: RunContext, logdir: Path, duration_s: float) -> Path:
        path = ctx.run_dir / "job.fio"
        path.write_text(forced_job_text(self.job_text, ctx.workdir, logdir, duration_s))
        return path

    def prepare(self, ctx: RunContext) -> None:
        """Lay out fio's files now (fio --create_only), so the timed run does not."""
        logdir = ctx.run_dir / ".fio-prepare"
        logdir.mkdir(exist_ok=True)
        job = self._job_file(ctx, logdir, 1)
        try:
            result = supervisor.run_to_end(ctx, ["fio", "--create_only=1", "--eta=never",
                                                 str(job)], "fio --create_only",
                                           cwd=ctx.workdir, timeout_s=None)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        if result.code != 0:
            message = supervisor.last_line(result.stderr or result.stdout)
            raise UsageError(f"fio: the job file {self.job} does not run: "
                             + (message or f"exit {result.code}"))

    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        logdir = ctx.run_dir / ".fio-logs"
        logdir.mkdir(exist_ok=True)
        job = self._job_file(ctx, logdir, ctx.duration_s)
        offset = clock_offset_ns()
        stderr_path = ctx.run_dir / "fio.stderr"
        with open(stderr_path, "w") as stderr:
            program = supervisor.start(
                ctx, ["fio", "--output-format=json", "--status-interval=1", "--eta=never",
                      str(job)],
                cwd=ctx.workdir, stdout=subprocess.PIPE, stderr=stderr)
        ctx.workload_starting()       # no start gate: the monitors attach to fio as it starts
        reader = _JsonStream(program.stdout)
        reader.start()
        try:
            outcome = program.wait(
                ctx.stop, deadline_ns=ctx.t0_ns + int((ctx.duration_s + 120) * 1e9),
                # fio on SIGINT stops its jobs and still writes logs and results
                ladder=(supervisor.StopStep(signal.SIGINT, 30.0),),
                tick=lambda: progress(reader.progress()))
        finally:
            program.signal(signal.SIGKILL)
            reader.join()
            program.close()
        final = reader.last
        if final is not None:
            (ctx.run_dir / FIO_JSON).write_text(json.dumps(final, indent=1))
        samples = Samples("epoch")
        io = fio_logs.IoColumns()
        for log, job_number in fio_logs.find_lat_logs(logdir, LOG_PREFIX):
            fio_logs.parse_lat_log(log, job_number, samples, io)
        shutil.rmtree(logdir, ignore_errors=True)
        if len(io):
            _write_table(ctx.run_dir / "monitors", fio_logs.IO_TABLE,
                         io.table(offset + ctx.t0_ns))
            ctx.notes.append(fio_logs.IO_TABLE_NOTE)
        if any(opts.get(k) for _, opts in job_sections(self.job_text)
               for k in fio_logs.RATE_KEYS):
            ctx.notes.append(fio_logs.RATE_NOTE)
        ctx.notes.extend([fio_logs.TIME_NOTE, fio_logs.SYNC_NOTE,
                          "latency is fio's 'lat' (submission + completion)"])
        extra: dict[str, Any] = {"latency": "lat", "exit_code": outcome.exit_code}
        if final is not None:
            extra.update(fio_logs.json_summary(final))
        status, reason = outcome.run_status(
            "fio", supervisor.last_line(stderr_path.read_text(errors="replace")))
        counted = _json_counts(final) if final is not None else samples.counts()
        # fio's log times are wall clock (ms): onto the run's monotonic clock
        return WorkloadResult(batches=logged_ops(samples, offset + ctx.t0_ns), counted=counted,
                              rusage=outcome.rusage, extra=extra, status=status,
                              reason=reason)


def _write_table(folder: Path, name: str, table) -> None:
    import pyarrow.parquet as pq

    folder.mkdir(exist_ok=True)
    tmp = folder / f".{name}.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(folder / f"{name}.parquet")


def _json_counts(data: dict[str, Any]) -> dict[str, int]:
    """fio's own IO counts per op, to check that every IO was logged."""
    counts: dict[str, int] = {}
    for job in data.get("jobs", []):
        for ddir in ("read", "write", "trim"):
            n = (job.get(ddir) or {}).get("total_ios") or 0
            if n:
                counts[ddir] = counts.get(ddir, 0) + int(n)
    return counts


class _JsonStream(threading.Thread):
    """Reads fio's stdout: a JSON object per --status-interval, the last one is the result."""

    def __init__(self, stream):
        super().__init__(name="fio-json", daemon=True)
        self.stream = stream
        self.last: dict[str, Any] | None = None
        self._previous_max: dict[str, int] = {}
        self._lock = threading.Lock()

    def run(self) -> None:
        objects = fio_logs.JsonObjects()
        for chunk in iter(lambda: self.stream.read1(1 << 16), b""):
            found = objects.feed(chunk)
            if found:
                with self._lock:
                    self.last = found[-1]

    def progress(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            data = self.last
        if data is None:
            return {}
        result: dict[str, tuple[int, int]] = {}
        for ddir in ("read", "write"):
            total = 0
            peak = 0
            for job in data["jobs"]:
                stats = job.get(ddir) or {}
                total += int(stats.get("total_ios") or 0)
                peak = max(peak, int((stats.get("lat_ns") or {}).get("max") or 0))
            # fio reports the maximum so far; show it only when it grew since the last second
            recent = peak if peak > self._previous_max.get(ddir, 0) else 0
            self._previous_max[ddir] = max(peak, self._previous_max.get(ddir, 0))
            result[ddir] = (total, recent)
        return result


WORKLOAD = FioWorkload
