"""`stallbench list` and `stallbench query` as the report's table model (tables.py): what a
results tree holds per variant and workload, and the rows a query returned."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ..results.catalog import Entry
from .tables import LEFT, RIGHT, Cell, Column, Section, Table
from .wording import json_number


def _dates(entry: Entry) -> str:
    first, last = (entry.first or "")[:16].replace("T", " "), (entry.last or "")[:16]
    return first if first[:16] == last.replace("T", " ") else \
        f"{first} – {last.replace('T', ' ')}"


def list_section(results: str, entries: list[Entry], problems: list[str]) -> Section:
    """One line per variant and workload: runs, their status, kernels, hosts, dates, plans."""
    columns = [Column("variant", LEFT, 0, 0), Column("workload", LEFT, 0, 2),
               Column("runs", RIGHT, 0, 2), Column("status", LEFT, 0, 2),
               Column("kernel", LEFT, 0, 2), Column("host", LEFT, 0, 2),
               Column("dates (UTC)", LEFT, 0, 2), Column("plan", LEFT, 0, 2)]
    rows = [[Cell(e.variant), Cell(e.workload), Cell(str(e.runs)),
             Cell(", ".join(f"{n} {s}" for s, n in sorted(e.status.items()))),
             Cell(", ".join(e.kernels) or "-"), Cell(", ".join(e.hosts) or "-"),
             Cell(_dates(e)), Cell(", ".join(e.plans) or "-")] for e in entries]
    notes = [f"not readable: {p}" for p in problems]
    if not entries:
        notes.insert(0, f"no runs under {results}")
    return Section(f"{results}: {sum(e.runs for e in entries)} run(s)",
                   [Table(columns, rows)] if entries else [], notes)


def list_json(entries: list[Entry], problems: list[str]) -> str:
    return json.dumps({"entries": [{"variant": e.variant, "workload": e.workload,
                                    "runs": e.runs, "status": dict(e.status),
                                    "kernels": e.kernels, "hosts": e.hosts,
                                    "plan_hashes": e.plans, "first_utc": e.first,
                                    "last_utc": e.last} for e in entries],
                       "problems": problems}, indent=1) + "\n"


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def rows_section(names: list[str], rows: list[tuple]) -> Section:
    columns = [Column(name, RIGHT if rows and isinstance(rows[0][i], (int, float)) else LEFT,
                      0, 0 if i == 0 else 2) for i, name in enumerate(names)]
    return Section(f"{len(rows)} row(s)", [Table(columns, [[Cell(_text(v)) for v in row]
                                                          for row in rows])])


def rows_csv(names: list[str], rows: list[tuple]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(["" if v is None else v for v in row] for row in rows)
    return out.getvalue()


def rows_json(names: list[str], rows: list[tuple]) -> str:
    return json.dumps([{n: json_number(v) if isinstance(v, float) else
                        (v if isinstance(v, (int, str, bool)) or v is None else str(v))
                        for n, v in zip(names, row, strict=True)} for row in rows],
                      indent=1, ensure_ascii=False) + "\n"
