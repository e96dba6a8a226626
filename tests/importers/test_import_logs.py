"""Importers on real logs made here by the real programs (fio, strace) and on hand-written
MMTests pgioperf lines; the pgbench importer's real-log test is in test_workload_pgbench.py
(it needs a server). Oracles: the programs' own counts and numbers, hand computations."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import needs_fio, needs_strace
from stallbench.cli import main
from stallbench.core.errors import UsageError
from stallbench.importers import import_log, parse_log
from stallbench.results.store import load_run

pytestmark = pytest.mark.oracle

MMTESTS_LINES = """\
wal[12155]: avg: 0.0 msec; max: 0.1 msec
commit[12155]: avg: 0.2 msec; max: 15.4 msec
read[12157]: avg: 0.3 msec; max: 9.4 msec
read[12158]: avg: 0.6 msec; max: 4481.2 msec
"""

MMTESTS_TIMED = """\
commit[100]: avg: 1.5 msec; max: 20.0 msec time: 1000.0
read[101]: avg: 2.0 msec; max: 30.0 msec time: 1001.5
commit[100]: avg: 1.0 msec; max: 10.0 msec time: 1003.0
"""


def _ops(run_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    table = pq.read_table(run_dir / "ops.parquet")
    ops = np.array(table.column("op").to_pylist())
    lat = table.column("latency_ns").to_numpy()
    start = table.column("start_ns").to_numpy()
    worker = table.column("worker").to_numpy()
    return {op: (lat[ops == op], start[ops == op], worker[ops == op]) for op in set(ops)}


def test_mmtests_without_time(tmp_path: Path) -> None:
    log = tmp_path / "pgioperf.log"
    log.write_text("MMTests header line\n" + MMTESTS_LINES)
    run_dir = import_log("mmtests-pgioperf", log, "vanilla", tmp_path / "results")
    run = load_run(run_dir)
    assert run.complete and run.meta.interval_sampled is True
    assert run.meta.samples == {"commit": 1, "read": 2, "wal": 1}
    assert any("interval-sampled" in n for n in run.meta.notes)
    ops = _ops(run_dir)
    # hand-computed: the interval maxima in ns
    assert sorted(ops["read"][0].tolist()) == [9_400_000, 4_481_200_000]
    assert ops["commit"][0].tolist() == [15_400_000]
    assert sorted(ops["read"][2].tolist()) == [12157, 12158]
    intervals = pq.read_table(run_dir / "monitors/mmtests_intervals.parquet")
    assert intervals.column("avg_ns").to_pylist() == [0, 200_000, 300_000, 600_000]


def test_mmtests_with_time(tmp_path: Path) -> None:
    log = tmp_path / "pgioperf.log"
    log.write_text(MMTESTS_TIMED)
    run_dir = import_log("mmtests-pgioperf", log, "patched", tmp_path / "results")
    ops = _ops(run_dir)
    # time is the end of the interval: start = time - max; the earliest start becomes 0
    commit_lat, commit_start, _ = ops["commit"]
    assert commit_lat.tolist() == [20_000_000, 10_000_000]
    assert commit_start.tolist() == [0, 3_000_000_000 - 10_000_000 + 20_000_000]
    assert ops["read"][1].tolist() == [1_500_000_000 - 30_000_000 + 20_000_000]
    assert load_run(run_dir).duration_s == pytest.approx(3.02)


def test_mmtests_broken_line_names_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "bad.log"
    log.write_text(MMTESTS_LINES + "read[1]: avg: x msec; max: 1.0 msec\n")
    with pytest.raises(UsageError, match=r"bad\.log:5: .*avg"):
        parse_log("mmtests-pgioperf", log)


def _dd_file(tmp_path: Path, blocks: int) -> Path:
    path = tmp_path / "data"
    path.write_bytes(os.urandom(4096 * blocks))
    return path


@needs_strace
@pytest.mark.parametrize("flags", [["-f", "-T", "-ttt"], ["-f", "-T", "-tt"], ["-T", "-r"],
                                   ["-f", "-T"]])
def test_strace_real_log_counts_reads_exactly(tmp_path: Path, flags: list[str]) -> None:
    """dd reads its input exactly `count` times; the loader's reads are the same in both runs,
    so the difference of two runs is the oracle."""
    data = _dd_file(tmp_path, 300)
    counts = []
    for count in (10, 210):
        log = tmp_path / f"strace-{count}.txt"
        dd = ["dd", f"if={data}", "of=/dev/null", "bs=4k", f"count={count}"]
        if "-f" in flags:   # a child process (sh -> dd): -f output has several pids
            dd = ["sh", "-c", " ".join(dd) + " 2>/dev/null; true"]
        subprocess.run(["strace", *flags, "-o", str(log), *dd], check=True,
                       stderr=subprocess.DEVNULL)
        imported = parse_log("strace", log)
        counts.append(imported.samples.counts()["read"])
        if "-f" in flags:
            assert len(set(imported.samples.worker)) >= 2
    assert counts[1] - counts[0] == 200
    run_dir = import_log("strace", log, "v", tmp_path / "results")
    meta = load_run(run_dir).meta
    assert meta.workload == "command" and meta.samples["read"] == counts[1]


def test_strace_unfinished_resumed_signals_exits(tmp_path: Path) -> None:
    log = tmp_path / "s.txt"
    log.write_text(
        "100  1700000000.000000 read(3,  <unfinished ...>\n"
        "101  1700000000.000100 write(1, \"x\", 1) = 1 <0.000010>\n"
        "100  1700000000.000500 <... read resumed>\"abc\", 3) = 3 <0.000700>\n"
        "101  1700000000.001000 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---\n"
        "[pid   102] 1700000000.002000 pread64(4, \"\", 8, 0) = 0 <0.000003>\n"
        "102  1700000000.003000 exit_group(0)     = ?\n"
        "102  1700000000.003100 +++ exited with 0 +++\n")
    imported = parse_log("strace", log)
    codes, worker, start, latency = imported.samples.arrays()
    names = [imported.samples.op_names[c] for c in codes]
    assert names == ["read", "write", "pread64"]
    # the resumed call starts at its unfinished line and lasts the -T time of the resumed one
    assert start.tolist() == [1700000000_000000000, 1700000000_000100000, 1700000000_002000000]
    assert latency.tolist() == [700_000, 10_000, 3_000]
    assert worker.tolist() == [100, 101, 102]
    assert imported.summary["signals"] == 1 and imported.summary["exits"] == 1


@needs_fio
def test_fio_real_logs_match_fio_json(tmp_path: Path) -> None:
    job = tmp_path / "job.fio"
    job.write_text("[global]\nsize=4m\nbs=4k\nioengine=psync\ndirectory=" + str(tmp_path)
                   + "\n[a]\nrw=randrw\n[b]\nrw=randread\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    subprocess.run(["fio", "--output-format=json", f"--output={logs / 'out.json'}",
                    f"--write_lat_log={logs / 'x'}", "--log_avg_msec=0", "--runtime=1",
                    "--time_based", "--eta=never", str(job)], check=True, capture_output=True)
    data = json.loads((logs / "out.json").read_text())
    expected: dict[str, int] = {}
    for job_stats in data["jobs"]:
        for ddir in ("read", "write"):
            if job_stats[ddir]["total_ios"]:
                expected[ddir] = expected.get(ddir, 0) + job_stats[ddir]["total_ios"]
    run_dir = import_log("fio", logs, "v", tmp_path / "results")
    meta = load_run(run_dir).meta
    assert meta.samples == expected
    assert [j["jobname"] for j in meta.workload_summary["jobs"]] == ["a", "b"]
    ops = _ops(run_dir)
    assert set(ops["read"][2].tolist()) == {1, 2}    # job numbers from the log names
    # mean latency of job a's reads equals fio's own lat mean (exact: same samples)
    a_reads = ops["read"][0][ops["read"][2] == 1]
    assert a_reads.mean() == pytest.approx(data["jobs"][0]["read"]["lat_ns"]["mean"], rel=1e-6)
    # a single log file imports too
    single = parse_log("fio", logs / "x_lat.2.log")
    assert single.samples.counts() == {"read": data["jobs"][1]["read"]["total_ios"]}


def test_fio_garbage_line(tmp_path: Path) -> None:
    log = tmp_path / "x_lat.1.log"
    log.write_text("1, 2000, 0, 4096, 0, 0\n2, 3000, 7, 4096, 0, 0\n")
    with pytest.raises(UsageError, match=r"x_lat\.1\.log:2: unknown data direction 7"):
        parse_log("fio", log)


def test_pgbench_aggregate_log_refused(tmp_path: Path) -> None:
    log = tmp_path / "pgbench_log.123"
    log.write_text("1700000000 100 123456 999999 100 5000 0 0\n")
    with pytest.raises(UsageError, match=r"pgbench_log\.123:1: .*aggregated"):
        parse_log("pgbench", log)


def test_pgbench_hand_written_log(tmp_path: Path) -> None:
    log = tmp_path / "pgbench_log.77"
    log.write_text("0 0 1500 0 1700000000 500000\n"
                   "1 0 failed 0 1700000001 0\n"
                   "1 1 2500 0 1700000001 100000 10 0\n")
    run_dir = import_log("pgbench", log, "v", tmp_path / "results")
    meta = load_run(run_dir).meta
    assert meta.samples == {"txn": 2}
    assert meta.workload_summary["failed"] == 1
    lat, start, worker = _ops(run_dir)["txn"]
    # the third line has a schedule lag (a --rate log): its time of 2500 µs counts from the
    # scheduled start, so the service time is 2490 µs and it began 10 µs after that start
    assert lat.tolist() == [1_500_000, 2_490_000]
    # end - latency, relative to the first start
    assert start.tolist() == [0, (1_100_000 - 2_500 + 10) * 1000 - (500_000 - 1_500) * 1000]
    assert worker.tolist() == [0, 1]


def test_import_cli_exit_codes(tmp_path: Path, capsys) -> None:
    log = tmp_path / "pgioperf.log"
    log.write_text(MMTESTS_LINES)
    results = tmp_path / "results"
    assert main(["import", "mmtests-pgioperf", str(log), "--variant", "a",
                 "--results", str(results), "--workload", "mm"]) == 0
    assert (results / "a/mm/1/run.json").exists()
    assert main(["import", "strace", str(log), "--variant", "a",
                 "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "pgioperf.log:1" in err and len(err.strip().splitlines()) == 1
    assert main(["import", "fio", str(tmp_path / "missing"), "--variant", "a",
                 "--results", str(results)]) == 2
    assert main(["import", "strace", str(log), "--variant", "../x",
                 "--results", str(results)]) == 2
    assert not (tmp_path / "x").exists()
