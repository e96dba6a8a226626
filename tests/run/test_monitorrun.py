"""Stopping the monitors: a monitor whose table cannot be written fails alone, and leaves no
rows of its other tables to be read as if it had worked. The oracle: the files pyarrow's own
Parquet writer refuses (an interval type Parquet has no type for)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from stallbench.monitors.base import Monitor, MonitorResult
from stallbench.results.runmeta import MonitorStatus
from stallbench.results.store import RunWriter
from stallbench.run.monitorrun import stop_monitors

pytestmark = pytest.mark.pure


class _Tables(Monitor):
    """A monitor that left the given tables (its observing is not the point here)."""

    name = "tables"

    def __init__(self, tables: dict[str, pa.Table]):
        self.tables = tables

    def start(self, ctx) -> None:   # not called
        raise AssertionError

    def stop(self) -> MonitorResult:
        return MonitorResult(tables=self.tables, status={"rows": 1})


def test_a_table_that_cannot_be_written_fails_its_monitor_and_takes_its_other_tables(
        tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "results", "v", "sim", {})
    good = pa.table({"t_ns": pa.array([1, 2], pa.int64())})
    unwritable = pa.table({"x": pa.array([(1, 2, 3)], pa.month_day_nano_interval())})
    said: list[str] = []
    stop_monitors([("kept", _Tables({"kept": good})),
                   ("broken", _Tables({"broken_first": good, "broken_second": unwritable}))],
                  writer, said.append)
    files = sorted(p.name for p in (writer.path / "monitors").iterdir())
    assert files == ["kept.parquet"]          # nor a .tmp of the refused one
    monitors = writer.meta.monitors
    assert monitors["kept"]["status"] == MonitorStatus.OK.value
    assert monitors["broken"]["status"] == MonitorStatus.FAILED.value
    assert "month_day_nano_interval" in monitors["broken"]["reason"]
    assert said == [f"monitor broken failed: {monitors['broken']['reason']}"]
