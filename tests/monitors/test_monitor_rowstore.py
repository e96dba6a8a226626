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


def _sampler_whose_sample_blocks(tmp_path, block_s: float):
    """A real SamplerThread over a spilling RowStore whose second sample blocks `block_s`;
    `overlaps` counts samples that ran while another was still running."""
    import threading
    import time

    from stallbench.core.context import EnvState, RunContext
    from stallbench.monitors._sampling import SamplerThread

    ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=5,
                     journal=None)
    ctx.start_clock()
    store = RowStore(schema=pa.schema([("t_ns", pa.int64()), ("n", pa.int64())]), chunk=1,
                     spill_dir=tmp_path / "spill", name="slow")
    state = {"running": 0, "overlaps": 0, "calls": 0}
    in_second = threading.Event()

    def sample(t_ns: int) -> None:
        state["running"] += 1
        state["overlaps"] += state["running"] > 1
        state["calls"] += 1
        if state["calls"] == 2:
            in_second.set()
            time.sleep(block_s)
        store.append((t_ns, state["calls"]))
        state["running"] -= 1

    sampler = SamplerThread(ctx, 0.01, sample, "slow")
    sampler.start()
    assert in_second.wait(10)
    return ctx, sampler, store, state


def test_stop_waits_for_a_sample_in_flight_before_its_last_one(tmp_path):
    ctx, sampler, store, state = _sampler_whose_sample_blocks(tmp_path, 1.0)
    ctx.workload_ended()                 # the runner's hook: stop() with a sample in flight
    sampler.stop()
    assert state["overlaps"] == 0 and state["running"] == 0
    # every sample's row, each spilled once and read back whole (the oracle: the call count)
    assert store.table().column("n").to_pylist() == list(range(1, state["calls"] + 1))


def test_stop_raises_for_a_sample_stuck_past_the_wait_and_takes_none_beside_it(
        tmp_path, monkeypatch):
    import stallbench.monitors._sampling as sampling

    monkeypatch.setattr(sampling, "STOP_WAIT_S", 0.2)
    ctx, sampler, store, state = _sampler_whose_sample_blocks(tmp_path, 2.0)
    ctx.workload_ended()                 # the hook swallows it; the monitor's stop raises
    with pytest.raises(RuntimeError, match="did not end within 0.2 s"):
        sampler.stop()
    assert state["overlaps"] == 0 and state["calls"] == 2
    sampler._thread.join(5)
    assert state["overlaps"] == 0 and state["calls"] == 2      # no last sample beside it
