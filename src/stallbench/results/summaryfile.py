"""summary.parquet beside ops.parquet: the run's summary (analysis/summary.py) on disk.

It is written in the same streaming pass that writes ops.parquet (runner, importers, `stallbench
cleanup` for killed runs). A summary is trusted only when its schema version and its
fingerprint of ops.parquet (size and the Parquet footer, which holds every row group's offsets
and statistics) match; otherwise, and for runs that have none, it is rebuilt from ops.parquet in
bounded memory (row-group batches) and written atomically. Results one may not write keep the
rebuilt summary in memory.

One long table, one row per fact, `kind` saying which:
  0 histogram     op, key = fine bucket, count
  1 block         op, block, count, sum_ns, min_ns, max_ns
  2 block bucket  op, block, key = coarse bucket, count
  3 worker        op, key = worker id, count, sum_ns
  4 op            op, count = warm-up samples, sum_ns = longest gap start, min_ns = its length,
                  max_ns = 1 if exact
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis import histogram as hist
from ..analysis import summary as sm
from ..analysis.summarybuilder import SummaryBuilder
from ..core.errors import RunDataError
from ..core.jsonfile import replace_durably
from .rundirs import OPS_FILE, RUN_FILE, SUMMARY_FILE
from .runmeta import RunMeta, read_meta

# 2: the warm-up counts from the run's first op, and the run spans its ops (start_ns, end_ns)
# 3: where no warm-up was stated (run.json warmup_found), the start-up transient found is the
#    warm-up and its outcome is in the metadata; a reader of 2 must not take such a summary
SUMMARY_SCHEMA_VERSION = 3
_KIND_HISTOGRAM, _KIND_BLOCK, _KIND_BLOCK_BUCKET, _KIND_WORKER, _KIND_OP = range(5)
_BATCH_ROWS = 1 << 18

SCHEMA = pa.schema([
    ("kind", pa.int8()),
    ("op", pa.dictionary(pa.int32(), pa.string())),
    ("block", pa.int32()),
    ("key", pa.int64()),
    ("count", pa.int64()),
    ("sum_ns", pa.int64()),
    ("min_ns", pa.int64()),
    ("max_ns", pa.int64()),
])


def fingerprint(ops_path: Path) -> str:
    """Size and SHA-256 of the Parquet footer of ops.parquet."""
    ops_path = Path(ops_path)
    size = ops_path.stat().st_size
    with open(ops_path, "rb") as f:
        if size < 12:
            return f"{size}:short"
        f.seek(size - 8)
        footer_len = int.from_bytes(f.read(4), "little")
        start = max(size - 8 - footer_len, 0)
        f.seek(start)
        digest = hashlib.sha256(f.read(size - start)).hexdigest()
    return f"{size}:{digest}"


def builder_for(meta: RunMeta) -> SummaryBuilder:
    """A builder with the block length and warm-up of the run that `meta` (run.json) describes
    (its length only chooses the blocks: the summary spans the run's ops); where no warm-up
    was stated (warmup_found), one that finds the start-up transient."""
    warmup_s = float(meta.warmup_s or 0.0)
    duration = meta.duration_s or meta.duration_planned_s
    planned = meta.duration_planned_s or meta.duration_s
    builder = SummaryBuilder(sm.block_ns_for(duration, warmup_s), int(round(warmup_s * 1e9)),
                             find_warmup=bool(meta.warmup_found),
                             planned_ns=int(planned * 1e9) if planned else None)
    builder.declare(list(meta.ops_declared))
    return builder


def _filled_int64(column: pa.ChunkedArray, fill: int) -> np.ndarray:
    """An int64 column as numpy with its nulls replaced by `fill`, read from the Arrow buffers:
    `fill_null` would import pyarrow.compute (2 s in a guest under TCG, for each paced run)."""
    if column.type != pa.int64():
        return column.fill_null(fill).to_numpy()
    parts = []
    for chunk in column.chunks:
        validity, data = chunk.buffers()[:2]
        values = np.frombuffer(data, dtype=np.int64, count=chunk.offset + len(chunk))
        values = values[chunk.offset:]
        if chunk.null_count:
            bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
            values = np.where(bits[chunk.offset:chunk.offset + len(chunk)].astype(bool),
                              values, fill)
        parts.append(values)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def add_batch(builder: SummaryBuilder, batch: pa.RecordBatch | pa.Table) -> None:
    """Feed one ops batch (opsfile.OPS_SCHEMA) to the builder."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    if table.num_rows == 0:
        return
    column = table.column("op")
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    column = column.unify_dictionaries()
    chunks = column.chunks
    names = chunks[0].dictionary.to_pylist()
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks])
    intended = None
    if "intended_ns" in table.column_names:
        col = table.column("intended_ns")
        if col.null_count < len(col):
            intended = _filled_int64(col, -1)
    builder.add(names, codes, table.column("worker").to_numpy(),
                table.column("start_ns").to_numpy(), table.column("latency_ns").to_numpy(),
                intended)


def write(run_dir: Path, summary: sm.RunSummary, ops_fingerprint: str) -> Path:
    """Write summary.parquet atomically."""
    run_dir = Path(run_dir)
    target = run_dir / SUMMARY_FILE
    tmp = run_dir / f".{SUMMARY_FILE}.tmp"
    metadata = {
        "summary_schema_version": str(SUMMARY_SCHEMA_VERSION),
        "ops_fingerprint": ops_fingerprint,
        "block_ns": str(summary.block_ns),
        "warmup_blocks": str(summary.warmup_blocks),
        "start_ns": str(summary.start_ns),
        "end_ns": str(summary.end_ns),
        "sub_bits": str(hist.SUB_BITS),
        "coarse_sub_bits": str(sm.COARSE_SUB_BITS),
    }
    if summary.transient is not None:
        metadata.update({"transient": summary.transient.outcome,
                         "transient_op": summary.transient.op or "",
                         "transient_stat": summary.transient.stat or ""})
    try:
        pq.write_table(_to_table(summary).replace_schema_metadata(metadata), tmp,
                       compression="zstd")
        replace_durably(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _to_table(summary: sm.RunSummary) -> pa.Table:
    names = list(summary.ops)
    parts: list[dict[str, np.ndarray]] = []

    def part(kind: int, op: int, n: int, **columns: np.ndarray) -> None:
        row = {"kind": np.full(n, kind, np.int8), "op": np.full(n, op, np.int32)}
        row.update(columns)
        parts.append(row)

    for code, name in enumerate(names):
        op = summary.ops[name]
        used = np.flatnonzero(op.histogram)
        part(_KIND_HISTOGRAM, code, used.size, key=used, count=op.histogram[used])
        blocks = np.flatnonzero(op.block_count)
        part(_KIND_BLOCK, code, blocks.size, block=blocks, count=op.block_count[blocks],
             sum_ns=op.block_sum[blocks], min_ns=op.block_min[blocks],
             max_ns=op.block_max[blocks])
        block, bucket = np.nonzero(op.block_hist)
        part(_KIND_BLOCK_BUCKET, code, block.size, block=block, key=bucket + op.coarse_first,
             count=op.block_hist[block, bucket])
        part(_KIND_WORKER, code, op.workers.size, key=op.workers, count=op.worker_count,
             sum_ns=op.worker_sum)
        part(_KIND_OP, code, 1, count=np.array([op.warmup_samples]),
             sum_ns=np.array([op.gap_start_ns]), min_ns=np.array([op.gap_ns]),
             max_ns=np.array([int(op.gap_exact)]))
    columns = {}
    for field in SCHEMA:
        if field.name == "op":
            continue
        values = [p.get(field.name) for p in parts]
        if all(v is None for v in values):
            columns[field.name] = pa.nulls(sum(len(p["kind"]) for p in parts), field.type)
            continue
        arrays = []
        for p, v in zip(parts, values, strict=True):
            n = len(p["kind"])
            arrays.append(pa.array(np.asarray(v), type=field.type) if v is not None
                          else pa.nulls(n, field.type))
        columns[field.name] = pa.concat_arrays(arrays) if arrays else pa.array([], field.type)
    codes = np.concatenate([p["op"] for p in parts]) if parts else np.empty(0, np.int32)
    columns["op"] = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                                   pa.array(names, pa.string()))
    return pa.table({f.name: columns[f.name] for f in SCHEMA}, schema=SCHEMA)


def read_without_ops(run_dir: Path) -> sm.RunSummary | None:
    """The summary of a run whose ops.parquet is not there (a bundle made without the ops):
    trusted as it was written, with the fingerprint it recorded; None when it is missing or
    unreadable."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        recorded = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError):
        return None
    mark = recorded.get(b"ops_fingerprint")
    return read(run_dir, mark.decode()) if mark else None


def read(run_dir: Path, ops_fingerprint: str | None) -> sm.RunSummary | None:
    """The summary on disk, or None when it is missing, damaged, of another schema, or does
    not match ops.parquet (`ops_fingerprint`)."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.exists():
        return None
    try:
        table = pq.read_table(path)
        kv = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if kv.get("summary_schema_version") != str(SUMMARY_SCHEMA_VERSION) \
                or kv.get("sub_bits") != str(hist.SUB_BITS) \
                or kv.get("coarse_sub_bits") != str(sm.COARSE_SUB_BITS) \
                or kv.get("ops_fingerprint") != ops_fingerprint:
            return None
        summary = _from_table(table, int(kv["block_ns"]), int(kv["warmup_blocks"]),
                              int(kv["start_ns"]), int(kv["end_ns"]))
        if kv.get("transient") in sm.TRANSIENT_OUTCOMES:
            summary.transient = sm.Transient(summary.warmup_blocks, kv["transient"],
                                             kv.get("transient_op") or None,
                                             kv.get("transient_stat") or None)
        return summary
    except (pa.ArrowException, OSError, KeyError, ValueError, IndexError):
        return None


def _from_table(table: pa.Table, block_ns: int, warmup_blocks: int, start_ns: int,
                end_ns: int) -> sm.RunSummary:
    op_col = table.column("op").combine_chunks()
    if isinstance(op_col, pa.ChunkedArray):
        op_col = op_col.chunk(0)
    names = op_col.dictionary.to_pylist()
    codes = op_col.indices.to_numpy(zero_copy_only=False)
    kind = table.column("kind").to_numpy()
    cols = {name: table.column(name).fill_null(0).to_numpy()
            for name in ("block", "key", "count", "sum_ns", "min_ns", "max_ns")}
    block_rows = cols["block"][kind == _KIND_BLOCK]
    blocks = max(int(block_rows.max()) + 1 if block_rows.size else 0,
                 -(-end_ns // block_ns), warmup_blocks, 1)
    ops = {}
    for code, name in enumerate(names):
        mine = codes == code

        def rows(k: int, mine=mine) -> np.ndarray:
            return mine & (kind == k)

        r = rows(_KIND_HISTOGRAM)
        histogram = np.zeros(hist.N_BUCKETS, np.int64)
        histogram[cols["key"][r]] = cols["count"][r]
        r = rows(_KIND_BLOCK)
        b = cols["block"][r]
        count = np.zeros(blocks, np.int64)
        total = np.zeros(blocks, np.int64)
        low = np.full(blocks, np.iinfo(np.int64).max)
        high = np.full(blocks, -1, np.int64)
        count[b], total[b] = cols["count"][r], cols["sum_ns"][r]
        low[b], high[b] = cols["min_ns"][r], cols["max_ns"][r]
        r = rows(_KIND_BLOCK_BUCKET)
        bucket = cols["key"][r]
        first = int(bucket.min()) if bucket.size else 0
        width = int(bucket.max()) - first + 1 if bucket.size else 0
        block_hist = np.zeros((blocks, width), np.int64)
        block_hist[cols["block"][r], bucket - first] = cols["count"][r]
        r = rows(_KIND_WORKER)
        order = np.argsort(cols["key"][r], kind="stable")
        r_op = np.flatnonzero(rows(_KIND_OP))
        if r_op.size != 1:
            raise ValueError(f"summary of {name!r}: no op row")
        i = int(r_op[0])
        ops[name] = sm.OpSummary(
            histogram=histogram, block_count=count, block_sum=total, block_min=low,
            block_max=high, block_hist=block_hist, coarse_first=first,
            workers=cols["key"][r][order], worker_count=cols["count"][r][order],
            worker_sum=cols["sum_ns"][r][order], warmup_samples=int(cols["count"][i]),
            gap_start_ns=int(cols["sum_ns"][i]), gap_ns=int(cols["min_ns"][i]),
            gap_exact=bool(cols["max_ns"][i]))
    return sm.RunSummary(block_ns, warmup_blocks, start_ns, end_ns, ops)


def build_from_ops(ops_path: Path, meta: RunMeta) -> sm.RunSummary:
    """Stream ops.parquet in row-group batches into a summary (bounded memory)."""
    builder = builder_for(meta)
    try:
        # pre_buffer=False: pyarrow would otherwise keep reading ahead of the batches
        # (RSS grew with the file: 726 MiB for 100 M ops; 165 MiB without)
        for batch in pq.ParquetFile(ops_path, pre_buffer=False).iter_batches(
                batch_size=_BATCH_ROWS):
            add_batch(builder, batch)
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{ops_path}: damaged ({' '.join(str(exc).split())})") from exc
    return builder.finish()


def load_or_build(run_dir: Path, meta: RunMeta) -> sm.RunSummary:
    """The run's summary: read when it matches ops.parquet, else rebuilt (and written back
    when the directory is writable)."""
    run_dir = Path(run_dir)
    ops_path = run_dir / OPS_FILE
    if not ops_path.exists():
        raise RunDataError(f"{run_dir}: no {OPS_FILE}")
    mark = fingerprint(ops_path)
    summary = read(run_dir, mark)
    if summary is not None and (summary.transient is not None) == bool(meta.warmup_found):
        return summary
    summary = build_from_ops(ops_path, meta)
    try:
        write(run_dir, summary, mark)
    except OSError:
        pass    # read-only results: the summary lives in memory for this command
    return summary


def prepare(run_dirs: list[Path], jobs: int | None = None) -> None:
    """Rebuild, in parallel processes (one per core), the summaries that are missing or stale,
    so a command over many long runs uses every core; errors are left for the reader to report
    (a run whose ops.parquet is damaged stays as it is)."""
    stale = []
    for run_dir in run_dirs:
        ops_path = Path(run_dir) / OPS_FILE
        try:
            if ops_path.exists() and read(run_dir, fingerprint(ops_path)) is None:
                stale.append(Path(run_dir))
        except OSError:
            continue
    jobs = min(jobs or os.cpu_count() or 1, len(stale))
    if jobs < 2:
        return
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = []
        for run_dir in stale:
            try:
                meta = read_meta(run_dir / RUN_FILE)
            except RunDataError:
                continue
            futures.append(pool.submit(_rebuild_quietly, run_dir, meta))
        concurrent.futures.wait(futures)


def _rebuild_quietly(run_dir: Path, meta: RunMeta) -> None:
    try:
        load_or_build(run_dir, meta)
    except (RunDataError, OSError, ValueError):
        pass


def write_with_ops(run_dir: Path, meta: RunMeta,
                   batches: Iterable[pa.RecordBatch | pa.Table], write_ops) -> dict[str, int]:
    """Write ops.parquet with `write_ops(path, batches)` and, in the same pass, its summary."""
    builder = builder_for(meta)

    def tee():
        for batch in batches:
            add_batch(builder, batch)
            yield batch

    ops_path = Path(run_dir) / OPS_FILE
    counts = write_ops(ops_path, tee())
    try:
        write(run_dir, builder.finish(), fingerprint(ops_path))
    except OSError as exc:      # the ops are safe; the summary is rebuilt on first use
        meta.notes.append(
            f"summary.parquet not written ({exc.strerror or exc}); rebuilt when first read")
    return counts
