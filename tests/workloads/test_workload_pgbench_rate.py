"""pgbench with a rate (-R), a latency limit, custom weighted scripts and prepared statements on a
real PostgreSQL: the response/service split of every transaction matches pgbench's own
per-transaction log line by line (the oracle: pgbench's `time` and `schedule_lag` fields, read
here without stallbench's parser), in the workload and in the importer; pgbench's own averages
agree."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_workload_pgbench import pg_place  # noqa: F401 - fixture

from conftest import needs_postgres, run_stallbench
from stallbench.core.errors import UsageError
from stallbench.importers import import_log
from stallbench.logformats.pgbench import PgbenchLogStats, parse_pgbench_line
from stallbench.logformats.samples import Samples
from stallbench.workloads.pgbench import PgbenchWorkload

pytestmark = [pytest.mark.guest, needs_postgres]

SCRIPT = """\\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT pg_sleep(0.002);
"""


def _log_rows(logdir: Path) -> list[tuple[int, int, int, int, int]]:
    """(client, script_no, end_us, time_us, lag_us) of every completed transaction."""
    rows = []
    for path in sorted(logdir.iterdir()):
        for line in path.read_text().splitlines():
            client, _, time_us, script, epoch, micros, lag = line.split()[:7]
            if time_us in ("skipped", "failed"):
                continue
            rows.append((int(client), int(script), int(epoch) * 10**6 + int(micros),
                         int(time_us), int(lag)))
    return rows


def _check_line_by_line(table, log_rows, op_of_script) -> None:
    ops = table.column("op").to_pylist()
    worker = table.column("worker").to_numpy()
    start = table.column("start_ns").to_numpy()
    latency = table.column("latency_ns").to_numpy()
    intended = table.column("intended_ns").to_numpy(zero_copy_only=False)
    assert table.column("intended_ns").null_count == 0      # every rate-limited txn is paced
    ours = defaultdict(list)
    for i in range(len(ops)):
        ours[(ops[i], int(worker[i]))].append((int(intended[i]), int(start[i]),
                                               int(latency[i])))
    theirs = defaultdict(list)
    for client, script, end_us, time_us, lag_us in log_rows:
        theirs[(op_of_script(script), client)].append((end_us - time_us, time_us, lag_us))
    assert sorted(ours) == sorted(theirs)
    offsets = []
    for key in theirs:
        mine = sorted(ours[key])
        log = sorted(theirs[key])
        assert len(mine) == len(log), key
        for (planned, began, service), (scheduled_us, time_us, lag_us) in zip(
                mine, log, strict=True):
            assert began + service - planned == time_us * 1000      # response = pgbench's time
            assert service == (time_us - lag_us) * 1000             # service = time - lag
            assert began - planned == lag_us * 1000                 # the schedule lag
            offsets.append(planned - scheduled_us * 1000)
    assert max(offsets) == min(offsets)         # one clock mapping for the whole log


@pytest.mark.root
def test_rate_limited_run_matches_pgbench_log_line_by_line(pg_place) -> None:  # noqa: F811
    results, env = pg_place
    script = results.parent / "custom.sql"
    script.write_text(SCRIPT)
    out = run_stallbench(
        "run", "pgbench", "--scale", "1", "--clients", "3", "--threads", "1", "--duration", "4",
        "--rate", "250", "--latency-limit", "30", "--protocol", "prepared",
        "--builtin", "select-only@1", "--script", f"{script}@3", "--per-statement",
        "--keep-logs", "--results", str(results), "--variant", "rate", "--monitors", "none",
        "--no-progress", env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    run_dir = results / "rate/pgbench/1"
    meta = json.loads((run_dir / "run.json").read_text())
    own = meta["workload_summary"]["pgbench"]
    rows = _log_rows(run_dir / "pgbench-logs")
    names = {0: "txn-select-only", 1: "txn-custom"}
    table = pq.read_table(run_dir / "ops.parquet")
    assert len(rows) > 300
    _check_line_by_line(table, rows, names.get)
    assert meta["samples"] == {name: sum(r[1] == s for r in rows) for s, name in names.items()}
    # pgbench's own summary: with a rate its latency average counts from the scheduled start
    response = np.array([r[3] for r in rows]) / 1000
    lag = np.array([r[4] for r in rows]) / 1000
    assert response.mean() == pytest.approx(own["latency_average_ms"], abs=0.0015)
    assert lag.mean() == pytest.approx(own["schedule_lag_average_ms"], abs=0.0015)
    assert len(rows) == own["transactions"]          # skipped ones are not processed
    assert [s["weight"] for s in own["scripts"]] == [1, 3]
    custom = [r[3] for r in rows if r[1] == 1]
    assert np.mean(custom) / 1000 == pytest.approx(own["scripts"][1]["latency_average_ms"],
                                                   abs=0.0015)
    assert any("pg_sleep" in s["statement"] for s in own["scripts"][1]["statements"])
    assert meta["params"]["protocol"] == "prepared" and meta["params"]["rate"] == 250
    assert (run_dir / f"pgbench-script-0-{script.name}").read_text() == SCRIPT

    # the response op is shown next to the service op
    shown = run_stallbench("show", str(run_dir), env=env).stdout
    assert "txn-custom (res" in shown

    # the importer reads the same logs into the same split (one `txn` op: it has no names)
    imported = import_log("pgbench", run_dir / "pgbench-logs", "imported", results)
    _check_line_by_line(pq.read_table(imported / "ops.parquet"), rows, lambda s: "txn")
    assert json.loads((imported / "run.json").read_text())["workload_summary"][
        "schedule_lag_mean_ms"] == pytest.approx(lag.mean())


def test_unpaced_lines_keep_the_old_meaning_and_lag_is_checked() -> None:
    samples, stats = Samples("epoch"), PgbenchLogStats()
    parse_pgbench_line("log", 1, "0 1 3000 0 1700000000 500000", samples, stats)
    parse_pgbench_line("log", 2, "0 2 2500 0 1700000000 900000 400", samples, stats, paced=True)
    parse_pgbench_line("log", 3, "0 3 skipped 0 1700000001 0 9000", samples, stats)
    parse_pgbench_line("log", 4, "0 4 2000 0 1700000001 100000 3", samples, stats, paced=False)
    _, _, start, latency = samples.arrays()
    assert latency.tolist() == [3_000_000, 2_100_000, 2_000_000]
    assert samples.intended().tolist() == [-1, 1700000000_900000_000 - 2_500_000, -1]
    assert start[1] - samples.intended()[1] == 400_000
    assert (stats.skipped, stats.retries, stats.lagged) == (1, 3, 1)   # skipped: no lag
    with pytest.raises(UsageError, match="schedule_lag larger"):
        parse_pgbench_line("log", 5, "0 5 100 0 1700000001 0 200 0", samples, stats)


def test_bad_rate_and_script_options(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--rate"):
        PgbenchWorkload.from_options({"rate": -5})
    with pytest.raises(UsageError, match="no such file"):
        PgbenchWorkload.from_options({"script": [str(tmp_path / "missing.sql")]})
    (tmp_path / "a.sql").write_text("SELECT 1;\n")
    with pytest.raises(UsageError, match="weight after @"):
        PgbenchWorkload.from_options({"script": [f"{tmp_path / 'a.sql'}@x"]})
    with pytest.raises(UsageError, match="--builtin"):
        PgbenchWorkload.from_options({"builtin": "nonsense"})
    with pytest.raises(UsageError, match="--protocol"):
        PgbenchWorkload.from_options({"protocol": "fast"})
    alone = PgbenchWorkload.from_options({"script": [str(tmp_path / "a.sql")]})
    assert alone.options.builtin is None and alone.ops == ("txn",)
    both = PgbenchWorkload.from_options({"script": [f"{tmp_path / 'a.sql'}@2"],
                                         "builtin": "tpcb-like"})
    assert both.ops == ("txn-tpcb-like", "txn-a")
