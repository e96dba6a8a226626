"""The run directory: RESULTS/<variant>/<workload>/<iteration>/ (see docs/architecture.md).

Writing: `RunWriter` claims the next iteration number atomically (mkdir), writes run.json with
status "running" at once (so a killed run is never mistaken for a complete one), accepts the ops
and monitor tables, and finalizes run.json atomically (write to a temp file, fsync, rename).

Reading: `load_run`, `resolve_runs` and `Run.op_arrays` give the ops as numpy arrays per op.
run.json is a `runmeta.RunMeta`, read by `runmeta.read_meta` and written by `runmeta.write_meta`.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__, metadata
from .errors import RunDataError, UsageError
from .runmeta import RUN_FILE, RunMeta, Status, read_meta, write_meta

OPS_FILE = "ops.parquet"
OPS_ROW_GROUP = 1 << 20      # rows per row group: what a streaming reader holds at once
MONITOR_DIR = "monitors"
STACKS_FILE = "stacks.folded"
# the trace monitors' tables, the one read first: trace-full records what trace does and more
# (syscalls, block requests); a run with both has two recordings of the same D states, and
# every reader takes the same one so that their totals agree
TRACE_TABLES = ("trace_full", "trace")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@=,:-]{0,99}$")

OPS_SCHEMA = pa.schema(
    [
        ("op", pa.dictionary(pa.int32(), pa.string())),
        ("worker", pa.int32()),
        ("start_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("intended_ns", pa.int64()),
    ]
)


def default_results_dir() -> Path:
    return Path(os.environ.get("STALLBENCH_RESULTS") or "results")


def check_name(name: str, what: str = "variant name") -> str:
    """Variant and workload names become directory names: keep them plain."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name:
        raise UsageError(
            f"{what} {name!r} is not allowed: use letters, digits and ._+@=,:- "
            "(no '/', spaces or control characters, at most 100 characters)"
        )
    return name


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def kernel_info() -> dict[str, str]:
    uname = os.uname()
    try:
        cmdline = Path("/proc/cmdline").read_text().strip()
    except OSError:
        cmdline = ""
    return {"release": uname.release, "version": uname.version, "machine": uname.machine,
            "cmdline": cmdline}


class RunWriter:
    """Creates one run directory and writes its files; see the module docstring."""

    def __init__(self, results: Path, variant: str, workload: str, params: dict[str, Any]):
        check_name(variant)
        check_name(workload, "workload name")
        self.results = Path(results)
        base = self.results / variant / workload
        _refuse_symlinks(self.results, base)            # before mkdir: it would follow them
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create results directory {base}: {exc.strerror}") from exc
        _refuse_symlinks(self.results, base)
        self.path = claim_iteration(base)
        self.meta = RunMeta.started(
            stallbench_version=__version__, variant=variant, workload=workload,
            iteration=int(self.path.name), params=params,
            start_utc=utc_now(), host=socket.gethostname(), kernel=kernel_info(),
            pid=os.getpid())
        self.save()

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
        pq.write_table(metadata.annotate(table, target, units=units), tmp)
        os.replace(tmp, target)
        return target

    def finalize(self, status: Status, reason: str | None = None) -> None:
        self.meta.status = status
        self.meta.reason = reason
        self.meta.end_utc = utc_now()
        self.save()


def write_ops_file(path: Path, batches: Iterable[pa.RecordBatch | pa.Table]) -> dict[str, int]:
    """Write ops batches to a Parquet file atomically; returns the number of rows per op."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    counts: dict[str, int] = {}
    # dictionary encoding only where it pays (op names); tried on every int64 column it
    # costs more time than the compression
    writer = pq.ParquetWriter(tmp, metadata.annotate_schema(OPS_SCHEMA, path), compression="zstd",
                              use_dictionary=["op"])
    try:
        for batch in batches:
            table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            table = table.cast(OPS_SCHEMA)
            if table.num_rows == 0:
                continue
            for op, n in _count_ops(table.column("op")).items():
                counts[op] = counts.get(op, 0) + n
            writer.write_table(table, row_group_size=OPS_ROW_GROUP)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(tmp, path)
    return counts


def _count_ops(column: pa.ChunkedArray) -> dict[str, int]:
    counts: dict[str, int] = {}
    for chunk in column.chunks:
        codes = chunk.indices.to_numpy(zero_copy_only=False)
        names = chunk.dictionary.to_pylist()
        for code, n in enumerate(np.bincount(codes, minlength=len(names))):
            if n:
                counts[names[code]] = counts.get(names[code], 0) + int(n)
    return counts


def ops_batch(op_names: list[str], op_codes, worker, start_ns, latency_ns,
              intended_ns=None) -> pa.RecordBatch:
    """Build one ops record batch from numpy arrays; intended_ns < 0 means 'not paced'."""
    n = len(start_ns)
    intended = pa.nulls(n, pa.int64())
    if intended_ns is not None:
        intended_ns = np.asarray(intended_ns, dtype=np.int64)
        intended = pa.array(intended_ns, mask=intended_ns < 0, type=pa.int64())
    return pa.RecordBatch.from_arrays(
        [
            pa.DictionaryArray.from_arrays(
                pa.array(np.asarray(op_codes, dtype=np.int32)), pa.array(op_names, pa.string())
            ),
            pa.array(np.broadcast_to(np.asarray(worker, dtype=np.int32), (n,))),
            pa.array(np.asarray(start_ns, dtype=np.int64)),
            pa.array(np.asarray(latency_ns, dtype=np.int64)),
            intended,
        ],
        schema=OPS_SCHEMA,
    )


def claim_iteration(base: Path) -> Path:
    """The next free iteration directory under base, created (mkdir is the atomic claim)."""
    existing = [int(p.name) for p in base.iterdir() if p.name.isdigit()]
    number = max(existing, default=0) + 1
    while True:
        candidate = base / str(number)
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            number += 1


def _refuse_symlinks(root: Path, path: Path) -> None:
    """Refuse to write through a symlink inside the results directory that leaves it."""
    root_real = root.resolve()
    real = path.resolve()
    if real != root_real and root_real not in real.parents:
        raise UsageError(f"{path} leads outside the results directory {root} (symlink?): refusing")


# ----------------------------------------------------------------------------------------------
# reading


@dataclass
class OpArrays:
    """All samples of one op in one run, as numpy arrays (int64 ns, since run start)."""

    latency_ns: np.ndarray
    start_ns: np.ndarray
    worker: np.ndarray
    intended_ns: np.ndarray | None = None  # planned start; NaN-free, only for paced ops


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
            if pid and _pid_alive(int(pid)) and self.meta.host == socket.gethostname():
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
            self._ops = _split_by_op(self.ops_table())
            for op in self.meta.ops_declared:
                self._ops.setdefault(op, _empty_op())
        return self._ops

    def summary(self):
        """The run's summary (analysis.summary.RunSummary): from summary.parquet when it
        matches ops.parquet, else rebuilt from ops.parquet in bounded memory."""
        if self._summary is None:
            from . import summaryfile

            if not (self.path / OPS_FILE).exists():
                raise RunDataError(f"{self.path}: no {OPS_FILE} ({self.describe_status()})")
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


def _empty_op() -> OpArrays:
    empty = np.empty(0, dtype=np.int64)
    return OpArrays(empty, empty.copy(), np.empty(0, dtype=np.int32), None)


def _split_by_op(table: pa.Table) -> dict[str, OpArrays]:
    if table.num_rows == 0:
        return {}
    op_col = table.column("op")
    if not pa.types.is_dictionary(op_col.type):
        op_col = op_col.dictionary_encode()
    # each worker's batches carry their own dictionary: give all chunks one, then join them
    chunk = pa.concat_arrays(op_col.unify_dictionaries().chunks)
    codes = chunk.indices.to_numpy(zero_copy_only=False)
    names = chunk.dictionary.to_pylist()
    latency = table.column("latency_ns").to_numpy()
    start = table.column("start_ns").to_numpy()
    worker = table.column("worker").to_numpy()
    intended_col = table.column("intended_ns") if "intended_ns" in table.column_names else None
    intended = None
    if intended_col is not None and intended_col.null_count < len(intended_col):
        intended = intended_col.to_numpy(zero_copy_only=False)
    # a stable sort of small integer codes is a radix sort: linear in the number of ops
    order = np.argsort(codes.astype(np.int16 if len(names) < 32768 else np.int32), kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    result: dict[str, OpArrays] = {}
    for code, name in enumerate(names):
        idx = order[bounds[code]:bounds[code + 1]]
        if len(idx) == 0:
            continue
        intended_op = None
        if intended is not None:
            values = intended[idx]
            if not np.isnan(values.astype(float)).any():
                intended_op = values.astype(np.int64)
        result[name] = OpArrays(latency[idx], start[idx], worker[idx], intended_op)
    return result


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_run(path: str | os.PathLike) -> Run:
    """Read one run directory's run.json (ops are read lazily)."""
    path = Path(path)
    return Run(path=path, meta=read_meta(path / RUN_FILE))


def complete_runs(paths: Iterable[str | os.PathLike]) -> list[Run]:
    """The complete runs among these run directories (damaged or unfinished ones left out):
    what --iterations auto and bisect compare after each round."""
    runs = []
    for path in paths:
        try:
            run = load_run(path)
        except RunDataError:
            continue
        if run.status == Status.COMPLETE:
            runs.append(run)
    return runs


def iter_run_dirs(path: Path) -> Iterator[Path]:
    """Run directories at or below `path` (a run, a workload or a variant directory)."""
    path = Path(path)
    if (path / RUN_FILE).exists() or (path / OPS_FILE).exists():   # no run.json: reported
        yield path
        return
    if not path.is_dir():
        return
    for child in sorted(path.iterdir(), key=_natural_key):
        if child.name.startswith(".") or not child.is_dir() or child.is_symlink():
            continue
        yield from iter_run_dirs(child)


def prepare_summaries(specs: list[str], results: Path | None) -> None:
    """summaryfile.prepare() (parallel rebuild of missing or stale summaries) for the runs that
    BASELINE/CANDIDATE arguments name (variants or paths)."""
    from . import summaryfile

    root = Path(results) if results else default_results_dir()
    dirs: list[Path] = []
    for spec in specs:
        base = Path(spec) if Path(spec).is_dir() else root / spec
        if base.is_dir():
            dirs += list(iter_run_dirs(base))
    summaryfile.prepare(dirs)


def _natural_key(p: Path):
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)


@dataclass
class Resolved:
    """The runs a BASELINE/CANDIDATE argument named, and those that could not be used."""

    label: str
    runs: list[Run]
    problems: list[str]


def resolve_runs(spec: str, results: Path | None = None, workload: str | None = None,
                 allow_incomplete: bool = False) -> Resolved:
    """A variant name under RESULTS, or a path to a variant, workload or run directory."""
    results = Path(results) if results else default_results_dir()
    candidate = Path(spec)
    if candidate.exists() and (candidate.is_dir()):
        base = candidate
    elif (results / spec).is_dir() and "/" not in spec:
        base = results / spec
    else:
        raise UsageError(f"{spec!r}: no such variant under {results} and no such directory")
    runs: list[Run] = []
    problems: list[str] = []
    for run_dir in iter_run_dirs(base):
        try:
            run = load_run(run_dir)
        except RunDataError as exc:
            problems.append(str(exc))
            continue
        if workload and run.workload != workload:
            continue
        if not run.complete and not allow_incomplete:
            problems.append(f"{run_dir}: {run.describe_status()}; left out")
            continue
        try:
            run.summary()       # a damaged ops.parquet leaves this run out, not the command
        except RunDataError as exc:
            problems.append(f"{exc}; left out")
            continue
        runs.append(run)
    if not runs:
        detail = f" ({problems[0]})" if problems else ""
        raise RunDataError(f"{spec!r}: no usable run{detail}")
    workloads = sorted({r.workload for r in runs})
    if len(workloads) > 1:
        raise UsageError(
            f"{spec!r} holds runs of several workloads ({', '.join(workloads)}): "
            "pick one with --workload"
        )
    label = runs[0].variant if len({r.variant for r in runs}) == 1 else spec
    return Resolved(label=label, runs=runs, problems=problems)
