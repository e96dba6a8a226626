"""The monitor interface. One module per monitor in this package; see monitors/__init__.py.

A monitor records: `stop()` returns its tables and its own status (samples taken, errors,
notes), nothing derived from the tables. Each table is declared once as a TableSchema: its
columns' Arrow types, and what each one means (a cumulative counter, a gauge, a per-row value,
a time or a key) and its unit. Every derived number (totals, rates, deltas) is computed by
analysis/ from the table and that declaration, for run.json (`MonitorResult.summary`, through
the schema's `totals` function) and for the report (compare/where/) alike.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.units import RUN_TIME_UNIT

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from ..core.context import RunContext

TIME = "time"        # ns since the run's start
KEY = "key"          # an identity or label: pid, tid, device, comm, category
COUNTER = "counter"  # cumulative: only its differences over time mean something
GAUGE = "gauge"      # a level at the sample's time (sizes, queue depth, averages, maxima)
VALUE = "value"      # a measurement of the row itself (an interval's duration)


@dataclass(frozen=True)
class Column:
    name: str
    kind: str            # TIME, KEY, COUNTER, GAUGE or VALUE
    unit: str = ""
    type: str = "int64"  # Arrow type name: int64, int32, float64, string, bool

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa
        return {"int64": pa.int64(), "int32": pa.int32(), "float64": pa.float64(),
                "string": pa.string(), "bool": pa.bool_()}[self.type]


RUN_TIME = Column("t_ns", TIME, RUN_TIME_UNIT)   # every sampled table's first column: when


@dataclass(frozen=True)
class TableSchema:
    """One monitor table: its fixed columns, and for tables whose columns depend on the
    machine (counters: one per /proc/vmstat key) a rule naming the others."""

    name: str
    columns: tuple[Column, ...] = ()
    rule: Callable[[str], Column] | None = None
    # analysis function: the table's columns (numpy) and this schema -> run.json totals
    totals: Callable[[Mapping[str, np.ndarray], TableSchema], dict[str, Any]] | None = None

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        if self.rule is not None:
            return self.rule(name)
        return Column(name, VALUE, "as recorded")

    def kind(self, name: str) -> str:
        return self.column(name).kind

    def unit(self, name: str) -> str:
        return self.column(name).unit

    def units(self, names: Iterable[str]) -> dict[str, str]:
        """The declared unit of each of these columns (by the rule for machine-made ones);
        columns the schema does not know are left out."""
        known = {c.name for c in self.columns}
        return {n: unit for n in names
                if (n in known or self.rule is not None) and (unit := self.unit(n))}

    def is_counter(self, name: str) -> bool:
        return self.column(name).kind == COUNTER

    def arrow(self) -> pa.Schema:
        import pyarrow as pa
        return pa.schema([(c.name, c.arrow_type()) for c in self.columns])


def table_columns(table: pa.Table) -> dict[str, np.ndarray]:
    """An Arrow table as numpy columns (nulls of numbers become NaN, strings objects)."""
    return {name: table.column(name).to_numpy(zero_copy_only=False)
            for name in table.column_names}


@dataclass
class MonitorResult:
    """What a monitor leaves behind for one run."""

    tables: dict[str, pa.Table] = field(default_factory=dict)  # -> monitors/<key>.parquet
    status: dict[str, Any] = field(default_factory=dict)       # the monitor's own account
    folded_stacks: str | None = None                           # -> stacks.folded
    schemas: dict[str, TableSchema] = field(default_factory=dict)  # declaration per table

    @property
    def summary(self) -> dict[str, Any]:
        """run.json["monitors"][name]: the status and the totals analysis/ derives from each
        table through its schema (the same functions the report uses)."""
        summary = dict(self.status)
        for name, table in self.tables.items():
            schema = self.schemas.get(name)
            if schema is None or schema.totals is None:
                continue
            try:
                summary.update(schema.totals(table_columns(table), schema))
            except Exception as exc:  # noqa: BLE001 - the table is kept; the run must not fail
                summary["errors"] = [*summary.get("errors", []),
                                     f"{name} totals: {type(exc).__name__}: {exc}"]
        return summary


class Monitor(abc.ABC):
    name: ClassVar[str]

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        """Why this monitor cannot work on this machine (one line), or None when it can."""
        return None

    @abc.abstractmethod
    def start(self, ctx: RunContext) -> None:
        """Begin observing; called after the run clock started, before the workload starts.

        Processes appear later: sample ctx.processes.pids() each time. Record every change to the
        system through ctx.journal before making it. Must return quickly (use a thread).
        """

    @abc.abstractmethod
    def stop(self) -> MonitorResult:
        """Stop observing, undo own changes, return the tables and status (no derived numbers).
        Must not raise on a dead pid."""
