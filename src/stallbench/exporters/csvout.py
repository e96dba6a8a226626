"""CSV of every op of the runs, with variant, workload and iteration columns; streamed batch by
batch, so memory stays bounded however many ops there are."""

from __future__ import annotations

from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..core.errors import RunDataError
from ..results.rundirs import OPS_FILE
from ..results.store import Run

SCHEMA = pa.schema([("variant", pa.string()), ("workload", pa.string()),
                    ("iteration", pa.int32()), ("op", pa.string()), ("worker", pa.int32()),
                    ("start_ns", pa.int64()), ("latency_ns", pa.int64()),
                    ("intended_ns", pa.int64())])
BATCH_ROWS = 1 << 16


def write(runs: list[Run], out: BinaryIO) -> int:
    """Write the header and every op of every run; returns the number of rows."""
    rows = 0
    with pacsv.CSVWriter(out, SCHEMA) as writer:
        for run in runs:
            path = run.path / OPS_FILE
            try:
                source = pq.ParquetFile(path)
            except (pa.ArrowException, OSError) as exc:
                raise RunDataError(f"{path}: damaged ({exc})") from exc
            iteration = run.meta.iteration
            for batch in source.iter_batches(batch_size=BATCH_ROWS):
                n = batch.num_rows
                names = batch.schema.names
                intended = batch.column("intended_ns") if "intended_ns" in names else \
                    pa.nulls(n, pa.int64())
                writer.write_batch(pa.RecordBatch.from_arrays(
                    [pa.array([run.variant] * n, pa.string()),
                     pa.array([run.workload] * n, pa.string()),
                     pa.array([iteration] * n, pa.int32()),
                     batch.column("op").cast(pa.string()), batch.column("worker"),
                     batch.column("start_ns"), batch.column("latency_ns"), intended],
                    schema=SCHEMA))
                rows += n
    return rows
