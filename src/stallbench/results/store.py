"""The run directory: RESULTS/<variant>/<workload>/<iteration>/ (see docs/architecture.md).

Writing: `RunWriter` claims the next iteration number atomically (rundirs.claim_iteration),
writes run.json with status "running" at once (so a killed run is never mistaken for a complete
one), accepts the ops (opsfile.py) and monitor tables, and finalizes run.json atomically (write
to a temp file, fsync, rename).

Reading: `load_run` gives a `Run`; `Run.op_arrays` the ops as numpy arrays per op, `Run.summary`
the run's summary. Which runs a name means: runselect.py. run.json is a `runmeta.RunMeta`, read
by `runmeta.read_meta` and written by `runmeta.write_meta`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import RunDataError, UsageError
from ..core.hostfacts import kernel_info, pid_alive, utc_now
from ..core.jsonfile import replace_durably
from ..core.kernelconfig import canonical_text, config_digest, running_config
from ..core.names import check_name
from ..core.version import __version__
from . import metadata
from .opsfile import OPS_ROW_GROUP, OpArrays, empty_op, split_by_op, write_ops_file
from .rundirs import (
    KERNEL_CONFIG_FILE,
    MONITOR_DIR,
    OPS_FILE,
    OPS_LEFT_OUT_FILE,
    RUN_FILE,
    STACKS_FILE,
    TRACE_TABLES,
    claim_iteration,
    refuse_symlinks,
)
from .runmeta import RunMeta, Status, read_meta, write_meta


class RunWriter:
    """Creates one run directory and writes its files; see the module docstring."""

    def __init__(self, results: Path, variant: str, workload: str, params: dict[str, Any]):
        check_name(variant)
        check_name(workload, "workload name")
        self.results = Path(results)
        base = self.results / variant / workload
        refuse_symlinks(self.results, base)            # before mkdir: it would follow them
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create results directory {base}: {exc.strerror}") from exc
        refuse_symlinks(self.results, base)
        self.path = claim_iteration(base)
        self.meta = RunMeta.started(
            stallbench_version=__version__, variant=variant, workload=workload,
            iteration=int(self.path.name), params=params,
            start_utc=utc_now(), host=socket.gethostname(), kernel=kernel_info(),
            pid=os.getpid())
        digest = self.keep_kernel_config(running_config())
        if digest:
            self.meta.kernel["config_sha256"] = digest
        self.save()

    def keep_kernel_config(self, config: dict[str, str]) -> str | None:
        """The run's kernel's config beside run.json (a bundle carries it, a report names it
        by its hash); returns the hash, None for an empty config (not known)."""
        if not config:
            return None
        target = self.path / KERNEL_CONFIG_FILE
        tmp = self.path / f".{KERNEL_CONFIG_FILE}.tmp"
        tmp.write_text(canonical_text(config))
        os.replace(tmp, target)
        return config_digest(config)

    def save(self) -> None:
        write_meta(self.path / RUN_FILE, self.meta)

    def note(self, text: str) -> None:
        self.meta.notes.append(text)

    def write_ops(self, batches: Iterable[pa.RecordBatch | pa.Table]) -> dict[str, int]:
        """Stream record batches (OPS_SCHEMA) into ops.parquet and, in the same pass, the run's
        summary.parquet (from meta: ops_declared, duration_s, warmup_s); returns the count per
        op."""
        from . import summaryfile

        return summaryfile.write_with_ops(self.path, self.meta, batches, write_ops_file)

    def write_monitor(self, name: str, table: pa.Table,
                      units: Mapping[str, str] | None = None) -> Path:
        """monitors/<name>.parquet, atomically; `units`: the table's declared column units."""
        check_name(name, "monitor table name")
        folder = self.path / MONITOR_DIR
        folder.mkdir(exist_ok=True)
        target = folder / f"{name}.parquet"
        tmp = folder / f".{name}.parquet.tmp"
        try:
            pq.write_table(metadata.annotate(table, target, units=units), tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        replace_durably(tmp, target)
        return target

    def finalize(self, status: Status, reason: str | None = None) -> None:
        self.meta.status = status
        self.meta.reason = reason
        self.meta.end_utc = utc_now()
        self.save()


# ----------------------------------------------------------------------------------------------
# reading


@dataclass
class Run:
    path: Path
    meta: RunMeta
    _ops: dict[str, OpArrays] | None = field(default=None, repr=False)
    _summary: Any = field(default=None, repr=False)

    @property
    def variant(self) -> str:
        return self.meta.variant

    @property
    def workload(self) -> str:
        return self.meta.workload

    @property
    def status(self) -> Status:
        return self.meta.status

    @property
    def complete(self) -> bool:
        return self.status == Status.COMPLETE

    @property
    def duration_s(self) -> float:
        return float(self.meta.duration_s or 0.0)

    def describe_status(self) -> str:
        """'complete', or what is wrong in words."""
        status, pid = self.status, self.meta.pid
        if status == Status.RUNNING:
            if pid and pid_alive(int(pid)) and self.meta.host == socket.gethostname():
                return f"still running (pid {pid})"
            return "incomplete: the run was killed before it finished (no end recorded)"
        if status == Status.COMPLETE:
            return str(status)
        reason = self.meta.reason
        return f"{status}" + (f": {reason}" if reason else "")

    def ops_table(self) -> pa.Table:
        path = self.path / OPS_FILE
        if not path.exists():
            raise RunDataError(f"{self.path}: no {OPS_FILE} ({self.describe_status()})")
        try:
            return pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise RunDataError(f"{path}: damaged ({exc})") from exc

    def op_arrays(self) -> dict[str, OpArrays]:
        """Samples per op; ops that the workload declares but never completed map to empty."""
        if self._ops is None:
            self._ops = split_by_op(self.ops_table())
            for op in self.meta.ops_declared:
                self._ops.setdefault(op, empty_op())
        return self._ops

    def summary(self):
        """The run's summary (analysis.summary.RunSummary): from summary.parquet when it
        matches ops.parquet, else rebuilt from ops.parquet in bounded memory; a run whose ops
        were left out (a bundle without --ops) has its summary stand for them."""
        if self._summary is None:
            from . import summaryfile

            if not (self.path / OPS_FILE).exists():
                summary = summaryfile.read_without_ops(self.path) \
                    if (self.path / OPS_LEFT_OUT_FILE).exists() else None
                if summary is None:
                    raise RunDataError(f"{self.path}: no {OPS_FILE} "
                                       f"({self.describe_status()})")
                self._summary = summary
                return summary
            self._summary = summaryfile.load_or_build(self.path, self.meta)
        return self._summary

    def iter_ops(self, columns: list[str] | None = None,
                 min_latency_ns: int | None = None) -> Iterator[pa.Table]:
        """ops.parquet in row-group batches (bounded memory), optionally only the ops slower
        than `min_latency_ns`."""
        import pyarrow.compute as pc

        path = self.path / OPS_FILE
        try:
            for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(
                    batch_size=OPS_ROW_GROUP, columns=columns):
                table = pa.Table.from_batches([batch])
                if min_latency_ns is not None:
                    table = table.filter(pc.greater(table.column("latency_ns"),
                                                    min_latency_ns))
                yield table
        except (pa.ArrowException, OSError) as exc:
            raise RunDataError(f"{path}: damaged ({exc})") from exc

    def monitor_table(self, name: str) -> pa.Table | None:
        path = self.path / MONITOR_DIR / f"{name}.parquet"
        if not path.exists():
            return None
        try:
            return pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise RunDataError(f"{path}: damaged ({exc})") from exc

    def trace_table_name(self) -> str | None:
        """The trace table this run's readers use (TRACE_TABLES order), None without one."""
        for name in TRACE_TABLES:
            if (self.path / MONITOR_DIR / f"{name}.parquet").exists():
                return name
        return None

    def trace_table(self, columns: list[str] | None = None) -> pa.Table | None:
        """The trace table of trace_table_name(), optionally only some columns."""
        name = self.trace_table_name()
        if name is None:
            return None
        path = self.path / MONITOR_DIR / f"{name}.parquet"
        try:
            return pq.read_table(path, columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise RunDataError(f"{path}: damaged ({exc})") from exc

    def stacks_folded(self) -> str | None:
        path = self.path / STACKS_FILE
        return path.read_text() if path.exists() else None


def load_run(path: str | os.PathLike) -> Run:
    """Read one run directory's run.json (ops are read lazily)."""
    path = Path(path)
    return Run(path=path, meta=read_meta(path / RUN_FILE))
