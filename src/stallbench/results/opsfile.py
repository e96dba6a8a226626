"""The ops format: ops.parquet's Arrow schema, its atomic streaming writer, record batches
from numpy arrays, and a table split back into numpy arrays per op (OpArrays).

Columns: `op` (dictionary string), `worker` (int32), `start_ns`, `latency_ns`, `intended_ns`
(int64, null for unpaced ops), times in ns since run start on CLOCK_MONOTONIC.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.jsonfile import replace_durably
from . import metadata

OPS_ROW_GROUP = 1 << 20      # rows per row group: what a streaming reader holds at once

OPS_SCHEMA = pa.schema(
    [
        ("op", pa.dictionary(pa.int32(), pa.string())),
        ("worker", pa.int32()),
        ("start_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("intended_ns", pa.int64()),
    ]
)


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
            if not table.schema.equals(OPS_SCHEMA):   # (a cast imports pyarrow.compute)
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
    replace_durably(tmp, path)
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



def ops_batches(op_names: list[str], chunks: Iterable[tuple]) -> Iterator[pa.RecordBatch]:
    """A record batch per (op codes, worker, start_ns, latency_ns, intended_ns) chunk, such as
    logformats/samples.Samples.chunks gives."""
    for chunk in chunks:
        yield ops_batch(op_names, *chunk)

@dataclass
class OpArrays:
    """All samples of one op in one run, as numpy arrays (int64 ns, since run start)."""

    latency_ns: np.ndarray
    start_ns: np.ndarray
    worker: np.ndarray
    intended_ns: np.ndarray | None = None  # planned start; NaN-free, only for paced ops


def empty_op() -> OpArrays:
    empty = np.empty(0, dtype=np.int64)
    return OpArrays(empty, empty.copy(), np.empty(0, dtype=np.int32), None)


def split_by_op(table: pa.Table) -> dict[str, OpArrays]:
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
