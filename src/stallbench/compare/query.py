"""`stallbench query "SQL"`: DuckDB (optional extra [query]) as an embedded database over a
results tree, with three views whose columns include variant, host, kernel and date:

- runs: one row per run directory, from run.json (results/catalog.py RunFacts: path, variant,
  workload, iteration, status, host, kernel, date, end, duration_s, plan_hash, commit,
  others_cpus, ops_file);
- summaries: one row per run and op, the statistics compare computes from the run's summary
  (loading.op_side over that run alone: samples, rate, min_ns, p50_ns ... p999_ns, max_ns,
  mean_ns; after the warm-up), built only when the SQL names it;
- ops: every operation of every run's ops.parquet (op, worker, start_ns, latency_ns,
  intended_ns) with its run's columns, read by DuckDB where the SQL needs them.

The database is in memory; the results tree is only read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..analysis.quantiles import latency_stats
from ..core.errors import UsageError
from ..results.catalog import RunFacts, run_facts
from ..results.store import load_run

RUN_COLUMNS = (("path", "VARCHAR"), ("variant", "VARCHAR"), ("workload", "VARCHAR"),
               ("iteration", "INTEGER"), ("status", "VARCHAR"), ("host", "VARCHAR"),
               ("kernel", "VARCHAR"), ("date", "TIMESTAMPTZ"), ("end", "TIMESTAMPTZ"),
               ("duration_s", "DOUBLE"), ("plan_hash", "VARCHAR"), ("commit", "VARCHAR"),
               ("others_cpus", "DOUBLE"), ("ops_file", "VARCHAR"))
# the run's columns every view carries
KEY_COLUMNS = ("variant", "workload", "iteration", "host", "kernel", "date", "path")
OPS_COLUMNS = ("op", "worker", "start_ns", "latency_ns", "intended_ns")
INSTALL = "stallbench query needs DuckDB: pip install 'stallbench[query]' (or duckdb)"


def connect(results: Path, sql: str) -> Any:
    """A DuckDB connection with the views `runs`, `summaries` (when `sql` names it) and
    `ops`."""
    try:
        import duckdb
    except ImportError:
        raise UsageError(INSTALL) from None
    facts, _ = run_facts(results)
    con = duckdb.connect()
    con.execute("CREATE TABLE runs (" + ", ".join(f'"{n}" {t}' for n, t in RUN_COLUMNS) + ")")
    if facts:
        con.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                        [[getattr(f, name) for name, _ in RUN_COLUMNS] for f in facts])
    keys = ", ".join(f'r."{k}"' for k in KEY_COLUMNS)
    files = [f.ops_file for f in facts if f.ops_file]
    if files:
        listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW ops AS SELECT {keys}, "
                    + ", ".join(f"o.{c}" for c in OPS_COLUMNS)
                    + f" FROM read_parquet([{listing}], filename = true, union_by_name = true)"
                    " AS o JOIN runs AS r ON o.filename = r.ops_file")
    else:
        con.execute(f"CREATE VIEW ops AS SELECT {keys}, NULL::VARCHAR AS op, NULL::INTEGER AS "
                    "worker, NULL::BIGINT AS start_ns, NULL::BIGINT AS latency_ns, "
                    "NULL::BIGINT AS intended_ns FROM runs AS r WHERE false")
    if re.search(r"\bsummaries\b", sql, re.I):
        _summaries(con, facts)
    return con


def _summaries(con: Any, facts: list[RunFacts]) -> None:
    from ..results.runselect import Resolved
    from .loading import load_variant, op_names, op_side

    stats = latency_stats()
    columns = [("path", "VARCHAR"), ("op", "VARCHAR"), ("samples", "BIGINT"),
               ("rate", "DOUBLE"), *((s.json_key, "DOUBLE") for s in stats)]
    con.execute("CREATE TABLE summary_rows (" + ", ".join(f'"{n}" {t}' for n, t in columns)
                + ")")
    rows = []
    for fact in facts:
        if not fact.ops_file:
            continue
        run = load_run(fact.path)
        try:
            variant, _ = load_variant(Resolved(run.variant, [run], []))
        except Exception:  # noqa: BLE001 - a damaged run is left out of the view, not the query
            continue
        for name in op_names([variant]):
            side = op_side(name, variant).stats
            rows.append([fact.path, name, side.samples, side.rate,
                         *(side.values.get(s.key) for s in stats)])
    if rows:
        con.executemany(f"INSERT INTO summary_rows VALUES ({', '.join('?' * len(columns))})",
                        rows)
    keys = ", ".join(f'r."{k}"' for k in KEY_COLUMNS if k != "path")
    con.execute(f"CREATE VIEW summaries AS SELECT {keys}, s.* FROM summary_rows AS s "
                "JOIN runs AS r ON s.path = r.path")


def run_query(results: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of the SQL over the tree; UsageError for SQL DuckDB refuses."""
    con = connect(results, sql)
    import duckdb

    try:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description or []]
        return names, cursor.fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"query: {first}") from None
