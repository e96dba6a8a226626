"""Where did the time go, on causes injected into real runs (issue 22): the cause each line names
is checked against what the test itself set up and against the ops stallbench timed.

Oracles: the ops in ops.parquet (a page-cache read takes microseconds, a read that reached the
device tens of microseconds or more; reads under a riops throttle complete at that rate), the
memory cgroup's own failcnt in run.json, and the stacks the stacks monitor sampled.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
import pytest

from conftest import run_stallbench
from stallbench.env.iocgroup import find_io_controller

pytestmark = [pytest.mark.quiet, pytest.mark.root]

DEVICE_READ_NS = 30_000       # slower than this, a 4 KiB read did not come from the page cache
FILE = "96M"


def _run(results: Path, workload: str, variant: str, *args: str) -> Path:
    out = run_stallbench("run", workload, "--variant", variant, "--results", str(results),
                         "--no-progress", *args, timeout=300)
    assert out.returncode == 0, out.stderr
    return sorted((results / variant / workload).iterdir())[-1]


def _compare(results: Path, base: str, cand: str, whole: bool = False) -> dict:
    out = run_stallbench("compare", base, cand, "--results", str(results), "--format", "json",
                         check=True)
    data = json.loads(out.stdout)
    return data if whole else data["where"]


def _latency(run: Path, op: str | None = None) -> np.ndarray:
    table = pq.read_table(run / "ops.parquet")
    latency = table.column("latency_ns").to_numpy()
    if op is None:
        return latency
    names = table.column("op").cast("string").to_numpy(zero_copy_only=False)
    return latency[names == op]


def _device_time_share(latency: np.ndarray) -> float:
    return float(latency[latency > DEVICE_READ_NS].sum() / latency.sum())


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("causes")
    results, data = base / "results", base / "data"
    data.mkdir()
    common = ("--file-size", FILE, "--dir", str(data))
    # the file is written and read once from outside any limit: in the page cache from then on
    _run(results, "randread", "warm", *common, "--duration", "2", "--monitors", "none",
         "--no-drop-caches")
    runs = {"results": results}
    runs["cached"] = _run(results, "randread", "cached", *common, "--duration", "3",
                          "--no-drop-caches")
    runs["limit-on-cached"] = _run(results, "randread", "limit-on-cached", *common,
                                   "--duration", "3", "--memory", "32M", "--no-drop-caches")
    runs["cold-32M"] = _run(results, "randread", "cold-32M", *common, "--duration", "4",
                            "--memory", "32M", "--monitors", "default,stacks")
    return runs


def test_cached_reads_are_never_in_the_device(reads: dict[str, Path]) -> None:
    cached = reads["cached"]
    latency = _latency(cached)
    assert np.median(latency) < DEVICE_READ_NS / 3, "the oracle: these reads were cached"
    where = _compare(reads["results"], "cached", "cold-32M")
    verdict = where["device"]["cached"]["read"]
    assert verdict["verdict"] == "above the device: page cache", verdict
    assert verdict["from_device"] < 0.02
    # the cold reads in 32M did reach it: most of their time was in reads that took long
    cold = where["device"]["cold-32M"]["read"]
    assert _device_time_share(_latency(reads["cold-32M"])) > 0.5
    assert cold["verdict"] in ("waiting for the device", "partly the device, the rest above it")
    assert cold["from_device"] > 0.5


def test_a_limit_on_pages_cached_elsewhere_is_said_to_have_never_bound(reads: dict) -> None:
    limited = json.loads((reads["limit-on-cached"] / "run.json").read_text())
    assert limited["environment"]["memory"]["failcnt"] == 0        # the kernel's own count
    assert np.median(_latency(reads["limit-on-cached"])) < DEVICE_READ_NS / 3
    where = _compare(reads["results"], "cached", "limit-on-cached")
    said = [w for w in where["warnings"] if "never bound" in w]
    assert said and "limit-on-cached" in said[0] and "32 MiB" in said[0], where["warnings"]
    assert "page cache" in said[0]
    cold = _compare(reads["results"], "cached", "cold-32M")
    assert json.loads((reads["cold-32M"] / "run.json").read_text())[
        "environment"]["memory"]["failcnt"] > 0
    assert not [w for w in cold["warnings"] if "never bound" in w]


def test_the_recorder_does_not_reclaim_inside_the_limited_cgroup(reads: dict) -> None:
    run = reads["cold-32M"]
    meta = json.loads((run / "run.json").read_text())
    assert meta["environment"]["memory"]["failcnt"] > 0       # the limit did bind
    # the kernel's own I/O accounting of the reader: it wrote (nearly) nothing, so the page
    # cache charged to its cgroup is its reads' alone (the recorder's records, 16 bytes per
    # read, went through the parent); what is left is its summary at the end
    pid = int(meta["workload_summary"]["worker_pids"]["0"])
    rows = [r for r in pq.read_table(run / "monitors" / "delay.parquet").to_pylist()
            if r["tid"] == pid]
    assert rows[-1]["io_read_syscalls"] > 1000
    assert rows[-1]["io_write_char"] < 4096 < 16 * meta["samples"]["read"], rows[-1]
    # and no blocked stack of a worker is a write while the ops ran
    table = pq.read_table(run / "monitors" / "stacks.parquet").to_pylist()
    end = int((_op_ends(run)).max())
    during = [r["stack"] for r in table if r["t_ns"] <= end and r["stack"]]
    assert during, "no blocked stack sampled while the ops ran"
    own_writes = [s for s in during if "ksys_write" in s and "cgroup" not in s]
    assert not own_writes, own_writes[:3]
    assert any("filemap_read" in s for s in during)


def _op_ends(run: Path) -> np.ndarray:
    table = pq.read_table(run / "ops.parquet", columns=["start_ns", "latency_ns"])
    return table.column("start_ns").to_numpy() + table.column("latency_ns").to_numpy()


def test_reads_in_a_small_memcg_are_explained_by_block_io_with_its_share(tmp_path: Path) -> None:
    results, data = tmp_path / "results", tmp_path / "data"
    data.mkdir()
    common = ("--data-size", "192M", "--readers", "2", "--duration", "6", "--dir", str(data))
    _run(results, "pgioperf", "unlimited", *common)
    small = _run(results, "pgioperf", "memcg-48M", *common, "--memory", "48M")
    where = _compare(results, "unlimited", "memcg-48M")
    lines = [e["text"] for e in where["explanations"] if e["op"] == "read"]
    assert lines, where["explanations"]
    # one run each: a change the comparison did not decide is marked "if real" (same causes)
    found = re.match(r"read p99 \+\d+%(?::| \(not decided\): if real,)(?: the added time was "
                     r"(?:mostly )?spent waiting \([^)]*\);)? delay accounting: "
                     r"at least (\d+)% of the reader "
                     r"workers' op time was in (block I/O waits|direct reclaim|thrashing)",
                     lines[0])
    assert found, lines[0]
    share = int(found.group(1)) / 100
    # the oracle: the share of the readers' time that was in reads slow enough to have
    # waited for the device; I/O waits inside the ops cannot be more than that
    device = _device_time_share(_latency(small, "read"))
    assert 0.3 * device <= share <= device + 0.05, (share, device)
    assert "memcg reclaim" in lines[0] or "limit was hit" in lines[0], lines[0]
    # shares of op time: run-queue and block I/O waits never overlap, so together <= 100%
    for role in where["delay"]["memcg-48M"]:
        shares = {k: v["share"] or 0 for k, v in role["delays"].items()}
        assert all(v <= 1.0 for v in shares.values()), role
        assert shares.get("cpu", 0) + shares.get("blkio", 0) <= 1.0 + 1e-9, role
    # and the op time they are shares of is the ops stallbench timed (sampled steps: >= 80%)
    meta = json.loads((small / "run.json").read_text())
    roles = {int(k): v for k, v in meta["workload_summary"]["worker_roles"].items()}
    table = pq.read_table(small / "ops.parquet", columns=["worker", "latency_ns"])
    worker = table.column("worker").to_numpy()
    latency = table.column("latency_ns").to_numpy()
    for role in where["delay"]["memcg-48M"]:
        mine = np.isin(worker, [w for w, r in roles.items() if r == role["role"]])
        timed = latency[mine].sum()
        assert 0.8 * timed <= role["ops_latency_ns"] <= timed, (role["role"], timed)


def test_throttled_direct_reads_are_in_the_throttle_the_variant_set(tmp_path: Path) -> None:
    if find_io_controller() is None:
        pytest.skip("no I/O controller here")
    results = tmp_path / "results"
    common = ("--fs", "ext4", "--fs-size", "64M", "--file-size", "16M", "--direct",
              "--duration", "6", "--work-dir", str(tmp_path))
    _run(results, "randread", "free", *common)
    slow = _run(results, "randread", "riops-300", *common, "--io-max", "riops=300")
    meta = json.loads((slow / "run.json").read_text())
    rate = meta["samples"]["read"] / meta["duration_s"]
    assert 150 <= rate <= 330, rate                 # the oracle: the throttle bound the reads
    compared = _compare(results, "free", "riops-300", whole=True)
    where = compared["where"]
    throttle = "in the variant's I/O throttle riops=300, before the device"
    assert where["device"]["riops-300"]["read"]["verdict"] == throttle, where["device"]
    assert "throttle" not in (where["device"]["free"]["read"]["verdict"] or "")
    lines = [e["text"] for e in where["explanations"] if e["op"] == "read"]
    # the line says "if real" exactly when no row of the reads was called worse (under a busy
    # machine the rate's -90% may stay unclear: MACHINE BUSIER, not stationary); the p99 row
    # alone does not decide it (a throttled p99 often has too few samples for an interval)
    changes = compared["ops"]["read"]["variants"]["riops-300"]["change"]
    called = any(c.get("verdict") == "worse" for c in changes.values() if isinstance(c, dict))
    assert lines and ("(not decided): if real," in lines[0]) == (not called), (lines, changes)
    path = slow / "monitors" / "delay.parquet"
    fault, others = _blkio_fault(pq.read_table(path))
    delays = {role["role"]: role["delays"] for role in where["delay"]["riops-300"]}
    if fault != "rate":
        assert lines and "block I/O waits (the variant's I/O throttle riops=300)" in lines[0], \
            lines
    if fault == "uptime":
        # one step of the kernel's was the whole uptime (a wait it never stamped the start of:
        # 5008 s in this 6 s run, the suite of 2026-12-06): that step is dropped, the others
        # are the reader's waits, as the raw samples have them
        assert delays["reader"]["blkio"]["total_ns"] == others, delays
        return
    if fault is None:
        # the fault CI's fresh VM showed (block I/O accounted at ~30 s per second), injected
        # into this real run: the waits are left out, the device's counters still name the cause
        table = pq.read_table(path)
        column = table.schema.get_field_index("blkio_ns")
        scaled = pa.compute.multiply(table.column(column), 30)
        pq.write_table(table.set_column(column, "blkio_ns", scaled.cast(pa.int64())), path)
        where = _compare(results, "free", "riops-300")
        faulty = [w for w in where["warnings"]
                  if w.startswith("riops-300:") and "accounting fault" in w]
        assert faulty, where["warnings"]
        # 30 times a share of the wall time between 2/3 (some steps dropped) and 1
        rate = float(re.search(r"at (\d+\.\d) s per second", faulty[0]).group(1))
        assert 20.0 <= rate <= 31.5, faulty
        assert where["device"]["riops-300"]["read"]["verdict"] == throttle, where["device"]
        lines = [e["text"] for e in where["explanations"] if e["op"] == "read"]
    assert all("blkio" not in role["delays"] for role in where["delay"]["riops-300"]), where
    assert lines and throttle in lines[0] and "delay accounting was impossible" in lines[0], \
        lines


def _blkio_fault(table: pa.Table) -> tuple[str | None, int]:
    """The kernel's block I/O accounting of the run's one reader task, from its raw samples:
    'rate' when its waits beyond its largest step add up faster than time passes, 'uptime' when
    that one step is longer than the time since the run began (the rest possible), else None;
    and its waits in its other steps (ns)."""
    rows = sorted((r for r in table.to_pylist() if r["born_in_run"]), key=lambda r: r["t_ns"])
    values = np.array([r["blkio_ns"] or 0 for r in rows], dtype=np.int64)
    t_ns = np.array([r["t_ns"] for r in rows], dtype=np.float64)
    steps = np.diff(np.r_[0, values])
    largest = int(np.argmax(steps))
    if steps.sum() - steps[largest] > t_ns[-1] * 1.05 + 1e6:
        return "rate", 0
    if steps[largest] > t_ns[largest] * 1.05 + 1e6:
        return "uptime", int(steps.sum() - steps[largest])
    return None, 0


def test_an_op_only_the_candidate_runs_is_explained_as_new(tmp_path: Path) -> None:
    """fsyncs every 8 checkpoint writes (the default: never in a short run) bring a new op,
    checkpoint-fsync: all of its time is the change, and its line names the wait, or says that
    delay accounting saw none to name (jbd2's commit wait is no block I/O to it). Where the
    kernel accounted the checkpointer's block I/O waits faster than time passes (a fault seen
    on fresh VMs), there is no share to give, and the where section must say so instead."""
    results, data = tmp_path / "results", tmp_path / "data"
    data.mkdir()
    common = ("--data-size", "64M", "--readers", "1", "--duration", "3", "--dir", str(data))
    _run(results, "pgioperf", "base", *common)
    fsyncs = _run(results, "pgioperf", "fsync8", *common, "--checkpoint-fsync-every", "8")
    assert _latency(results / "base" / "pgioperf" / "1", "checkpoint-fsync").size == 0
    assert _latency(fsyncs, "checkpoint-fsync").size > 0
    where = _compare(results, "base", "fsync8")
    lines = [e["text"] for e in where["explanations"] if e["op"] == "checkpoint-fsync"]
    if not lines:
        faults = [w for w in where.get("warnings", [])
                  if re.match(r"fsync8: taskstats accounted blkio delay to a checkpointer worker "
                              r".* a kernel accounting fault", w)]
        assert faults, where
        return
    # ext4's fdatasync mostly sleeps in jbd2's commit wait, which taskstats does not count as
    # block I/O: in 4 of 6 runs here under 10% of the checkpointer's op time, which a new op
    # still gets a line for
    # the checkpointer runs checkpoint and checkpoint-fsync: the share is of the fsyncs' own
    # time, as far as that bounds the role's waits
    own = re.match(r"checkpoint-fsync \(new: not in the baseline\): delay accounting: at "
                   r"least (\d+)% of the checkpoint-fsync ops' time \(of the checkpointer "
                   r"workers' delays, as far as this op's own time bounds them\) was in block I/O "
                   r"waits \(fdatasync / journal commit waiting for the device\)", lines[0])
    fsync_ns = _latency(fsyncs, "checkpoint-fsync").sum()
    if own:
        # the oracle: what is attributed to the fsyncs is at most their time and at most the
        # role's waits inside all its ops
        role = next(r for r in where["delay"]["fsync8"] if r["role"] == "checkpointer")
        attributed = int(own.group(1)) / 100 * fsync_ns
        assert attributed <= fsync_ns
        assert attributed <= role["delays"]["blkio"]["in_ops_ns"] * 1.05 + 1e6, (role, attributed)
        return
    found = re.match(r"checkpoint-fsync \(new: not in the baseline\): delay accounting names no "
                    r"wait over 10% of the checkpointer workers' op time \(block I/O waits "
                    r"(\d+)%, run-queue waits \d+%\): the rest was on a CPU or asleep outside "
                    r"block I/O \(as an fsync does while it waits for the journal's commit",
                    lines[0])
    assert found, lines[0]
    # the oracle: the checkpointer's buffered writes rarely wait for the device, its fsyncs do;
    # the block I/O share of its op time cannot exceed the fsyncs' share of it
    share = int(found.group(1)) / 100
    assert share <= fsync_ns / (fsync_ns + _latency(fsyncs, "checkpoint").sum()) + 0.05, share
