"""Monitor samples are spilled to disk in chunks and read back exactly."""

from __future__ import annotations

import pyarrow as pa
import pytest

from stallbench.monitors._sampling import RowStore

pytestmark = pytest.mark.pure


def test_dict_rows_spill_in_chunks_and_come_back_with_late_columns(tmp_path):
    store = RowStore(chunk=10, spill_dir=tmp_path / "spill", name="counters")
    rows = [{"t_ns": i, "a": 2 * i} for i in range(25)]
    rows += [{"t_ns": i, "a": 2 * i, "late": 7} for i in range(25, 31)]
    for row in rows:
        store.append(row)
    assert len(store) == 31 and store.first == rows[0] and store.last == rows[-1]
    assert len(list((tmp_path / "spill").glob("counters-*.arrow"))) == 3   # 30 rows spilled
    table = store.table()
    assert table.column("t_ns").to_pylist() == list(range(31))
    assert table.column("a").to_pylist() == [2 * i for i in range(31)]
    assert table.column("late").to_pylist() == [None] * 25 + [7] * 6
    store.discard()
    assert not list((tmp_path / "spill").iterdir())


def test_tuple_rows_iterate_back_in_order(tmp_path):
    schema = pa.schema([("t_ns", pa.int64()), ("name", pa.string())])
    store = RowStore(schema=schema, chunk=4, spill_dir=tmp_path)
    rows = [(i, f"s{i % 3}") for i in range(9)]
    for row in rows:
        store.append(row)
    assert list(store) == rows
    assert store.table().schema == schema
