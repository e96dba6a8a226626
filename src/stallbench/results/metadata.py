"""Self-describing tables: Parquet key-value metadata on ops.parquet and every monitor table,
so that a file copied out of its results tree still says what it is.

Keys (all values are strings): stallbench.variant, stallbench.workload, stallbench.iteration,
stallbench.version, stallbench.schema_version, stallbench.table (`ops` or the monitor table's
name), stallbench.clock, and stallbench.units (JSON: column -> unit). The run's identity is read
from run.json beside the file, which the run writes when it starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..core.errors import RunDataError
from ..core.units import RUN_TIME_UNIT
from .rundirs import RUN_FILE
from .runmeta import SCHEMA_VERSION, RunMeta, read_meta

PREFIX = "stallbench."
CLOCK = "ns since the run's start, CLOCK_MONOTONIC"


def column_unit(table: str, column: str) -> str:
    """The unit of a column, from the naming conventions of the run's tables: for ops.parquet
    and imported tables; a monitor's table says its own (TableSchema.units)."""
    if column in ("t_ns", "start_ns", "intended_ns"):
        return RUN_TIME_UNIT
    if column.endswith("_ns"):
        return "ns"
    if column.endswith("_ms") or column.endswith("_ticks_ms"):
        return "ms"
    if column.endswith("_s"):
        return "s"
    if column.endswith("_sectors"):
        return "512-byte sectors"
    if column == "avg10":
        return "percent"
    if column.startswith("meminfo."):
        return "pages" if column.startswith("meminfo.HugePages_") else "bytes"
    if column.startswith(("vmstat.", "memcg.")) or column.endswith("_count"):
        return "count (cumulative or level as the kernel reports it)"
    if column in ("worker", "pid", "tid"):
        return "id"
    if column in ("op", "comm", "category", "kind", "stack", "device", "detail", "scope",
                  "resource", "wchan"):
        return "text"
    return "as recorded"


def _run_meta(path: Path) -> RunMeta | None:
    for folder in (path.parent, path.parent.parent):
        candidate = folder / RUN_FILE
        if candidate.exists():
            try:
                return read_meta(candidate)
            except RunDataError:
                return None
    return None


def describe(schema: pa.Schema, path: Path, table: str | None = None,
             units: Mapping[str, str] | None = None) -> dict[str, str]:
    """The key-value metadata for a table with this schema written to `path`; `units` are the
    table's declared ones (a monitor's TableSchema), the naming conventions fill the rest."""
    from ..core.version import __version__

    path = Path(path)
    table = table or path.name.removesuffix(".parquet")
    meta = _run_meta(path)
    iteration = meta.iteration if meta else None
    return {
        PREFIX + "table": table,
        PREFIX + "variant": meta.variant if meta else "",
        PREFIX + "workload": meta.workload if meta else "",
        PREFIX + "iteration": "" if iteration is None else str(iteration),
        PREFIX + "version": __version__,
        PREFIX + "schema_version": str(SCHEMA_VERSION),
        PREFIX + "clock": CLOCK,
        PREFIX + "units": json.dumps({name: (units or {}).get(name) or column_unit(table, name)
                                      for name in schema.names}, sort_keys=True),
    }


def annotate_schema(schema: pa.Schema, path: Path, table: str | None = None,
                    units: Mapping[str, str] | None = None) -> pa.Schema:
    return schema.with_metadata({**(schema.metadata or {}), **{
        k.encode(): v.encode() for k, v in describe(schema, path, table, units).items()}})


def annotate(table: pa.Table, path: Path, name: str | None = None,
             units: Mapping[str, str] | None = None) -> pa.Table:
    return table.replace_schema_metadata(
        annotate_schema(table.schema, path, name, units).metadata)


def read(metadata: dict[bytes, bytes] | None) -> dict[str, Any]:
    """Parquet key-value metadata -> {key without prefix: value} (units decoded)."""
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        text = key.decode(errors="replace")
        if text.startswith(PREFIX):
            out[text[len(PREFIX):]] = value.decode(errors="replace")
    if "units" in out:
        out["units"] = json.loads(out["units"])
    return out
