"""Monitors on real processes of this machine, checked against independent readings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from stallbench.core.context import EnvState, RunContext
from stallbench.core.journal import Journal, cleanup_stale
from stallbench.monitors import monitor_class
from stallbench.monitors.counters import parse_vmstat
from stallbench.monitors.diskstats import device_of_path, parse_diskstats
from stallbench.monitors.trace import find_tracefs
from stallbench.run.undo import undo_kinds

pytestmark = [pytest.mark.quiet, pytest.mark.root]

MEMCG_ROOT = Path("/sys/fs/cgroup/memory")
DELAYACCT = Path("/proc/sys/kernel/task_delayacct")

READER = textwrap.dedent("""
    import mmap, os, random, sys, time
    path, direct, cgroup, seconds = sys.argv[1], sys.argv[2] == "1", sys.argv[3], float(sys.argv[4])
    if cgroup != "-":
        with open(os.path.join(cgroup, "tasks"), "w") as f:
            f.write(str(os.getpid()))
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    size = os.fstat(fd).st_size
    buf = mmap.mmap(-1, 4096)
    rng = random.Random(1)
    n = busy = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter_ns()
        os.preadv(fd, [buf], rng.randrange(size // 4096) * 4096)
        busy += time.perf_counter_ns() - t
        n += 1
    print(n, busy, time.process_time_ns(), flush=True)
""")


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("state")
    old = os.environ.get("STALLBENCH_STATE_DIR")
    os.environ["STALLBENCH_STATE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("STALLBENCH_STATE_DIR", None)
    else:
        os.environ["STALLBENCH_STATE_DIR"] = old


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data"
    with open(path, "wb") as f:
        for _ in range(96):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    return path


def _drop_file_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def _run_monitored(names: list[str], data_file: Path, direct: bool, cgroup: Path | None,
                   seconds: float, state_dir: Path) -> dict:
    _drop_file_cache(data_file)
    vmstat_before = parse_vmstat(Path("/proc/vmstat").read_text())
    with Journal(state_dir) as journal:
        ctx = RunContext(run_dir=data_file.parent, env=EnvState(
            workdir=data_file.parent,
            cgroup={"version": 1, "path": str(cgroup)} if cgroup else None), duration_s=seconds,
            journal=journal)
        ctx.start_clock()
        monitors = {}
        for name in names:
            cls = monitor_class(name)
            assert cls.unavailable(ctx) is None, name
            monitors[name] = cls()
            monitors[name].start(ctx)
        child = subprocess.Popen([sys.executable, "-c", READER, str(data_file),
                                  "1" if direct else "0", str(cgroup or "-"), str(seconds)],
                                 stdout=subprocess.PIPE, text=True)
        ctx.processes.add(child.pid)
        out, _ = child.communicate(timeout=60)
        results = {name: m.stop() for name, m in monitors.items()}
        journal_entries_after_stop = list(journal.entries)
    n, busy, cpu = (int(x) for x in out.split())
    return {"results": results, "reads": n, "busy_ns": busy, "cpu_ns": cpu, "pid": child.pid,
            "vmstat_before": vmstat_before,
            "vmstat_after": parse_vmstat(Path("/proc/vmstat").read_text()),
            "journal_after_stop": journal_entries_after_stop}


@pytest.fixture(scope="module")
def starved(data_file: Path, state_dir: Path, tmp_path_factory):
    """A buffered random reader in a 16 MiB memory cgroup, every monitor watching it."""
    path = MEMCG_ROOT / f"stallbench-test-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    sysctl_before = DELAYACCT.read_text()
    try:
        (path / "memory.limit_in_bytes").write_text(str(16 << 20))
        run = _run_monitored(["counters", "psi", "diskstats", "delay", "stacks", "trace"],
                             data_file, False, path, 3.0, state_dir)
        run["memcg_stat_after"] = parse_vmstat((path / "memory.stat").read_text())
        run["sysctl_before"] = sysctl_before
        yield run
    finally:
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_counters_agree_with_proc_vmstat(starved: dict) -> None:
    table = starved["results"]["counters"].tables["counters"]
    first = table.slice(0, 1).to_pylist()[0]
    last = table.slice(table.num_rows - 1, 1).to_pylist()[0]
    for key in ("pgpgin", "pgfault", "workingset_refault_file"):
        assert starved["vmstat_before"][key] <= first[f"vmstat.{key}"]
        assert last[f"vmstat.{key}"] <= starved["vmstat_after"][key]
    # the reader missed the cache for most reads: pages came in, memcg reclaimed them
    assert last["vmstat.pgpgin"] - first["vmstat.pgpgin"] > starved["reads"] // 4
    assert last["memcg.failcnt"] > 0
    assert last["memcg.pgpgin"] <= starved["memcg_stat_after"]["pgpgin"]
    summary = starved["results"]["counters"].summary
    assert summary["deltas"]["memcg.pgpgin"] == last["memcg.pgpgin"] - first["memcg.pgpgin"]


def test_delay_accounting_of_a_memory_starved_reader(starved: dict) -> None:
    result = starved["results"]["delay"]
    table = result.tables["delay"].to_pylist()
    rows = [r for r in table if r["tid"] == starved["pid"]]
    assert rows, "the reader's own task was sampled"
    last = rows[-1]
    assert last["freepages_ns"] > 0         # memcg reclaim in the read path
    blkio = _reported_blkio(starved)
    assert blkio is None or 0 < blkio <= starved["busy_ns"]   # waited on reads, never longer
    assert result.summary["totals_ns"]["freepages"] >= last["freepages_ns"]
    assert any(r["exited"] for r in rows), "the exit record kept the final totals"
    # restored: the journal no longer holds the sysctl, the value is what it was
    assert DELAYACCT.read_text() == starved["sysctl_before"]


def test_blocked_stacks_show_page_lock_waits(starved: dict) -> None:
    result = starved["results"]["stacks"]
    stacks = result.tables["stacks"].column("stack").to_pylist()
    assert any("filemap_read" in s and "folio_wait_bit_common" in s for s in stacks)
    folded = result.folded_stacks or ""
    lines = [line.rpartition(" ") for line in folded.splitlines()]
    assert sum(int(n) for _s, _sp, n in lines) == len(stacks)
    assert all(s.split(";")[-1] != "entry_SYSCALL_64_after_hwframe" for s, _, _ in lines)


def test_trace_records_memcg_reclaim_and_removes_its_instance(starved: dict) -> None:
    result = starved["results"]["trace"]
    rows = result.tables["trace"].to_pylist()
    reclaim = [r for r in rows if r["kind"] == "memcg reclaim"]
    assert reclaim and all(r["duration_ns"] >= 0 and r["pid"] == starved["pid"] for r in reclaim)
    dstate = [r for r in rows if r["category"] == "dstate" and r["duration_ns"] >= 0]
    assert any("folio_wait_bit_common" in r["stack"] for r in dstate)
    # D sleeps of the reader cannot add up to more than the time it spent in reads
    reader_d = sum(r["duration_ns"] for r in dstate if r["tid"] == starved["pid"])
    assert 0 < reader_d <= starved["busy_ns"] * 1.05
    root = find_tracefs()    # None when the monitor mounted tracefs itself and unmounted it
    assert root is None or not [d for d in os.listdir(f"{root}/instances") if d.startswith(
        f"stallbench-{os.getpid()}-")]
    assert starved["journal_after_stop"] == [] or all(
        e.action["kind"] == "umount" for e in starved["journal_after_stop"])


def test_psi_totals_grow_and_stay_within_independent_readings(starved: dict) -> None:
    table = starved["results"]["psi"].tables["psi"].to_pylist()
    series = [r["total_ns"] for r in table if r["scope"] == "system" and r["resource"] == "io"
              and r["kind"] == "some"]
    assert len(series) >= 3 and series == sorted(series)
    now = int(Path("/proc/pressure/io").read_text().split("total=")[1].split()[0]) * 1000
    assert series[-1] <= now
    assert "cgroup v1" in starved["results"]["psi"].summary["note"]


def test_diskstats_count_every_direct_read(data_file: Path, state_dir: Path) -> None:
    run = _run_monitored(["diskstats", "delay"], data_file, True, None, 1.5, state_dir)
    device = device_of_path(data_file)
    table = run["results"]["diskstats"].tables["diskstats"].to_pylist()
    rows = [r for r in table if r["device"] == device]
    assert rows[-1]["reads"] - rows[0]["reads"] >= run["reads"]
    assert parse_diskstats(Path("/proc/diskstats").read_text())[device][0] >= rows[-1]["reads"]
    delay = [r for r in run["results"]["delay"].tables["delay"].to_pylist()
             if r["tid"] == run["pid"]]
    # its time on a CPU: the exit record against the reader's own clock read just before its
    # exit (CLOCK_PROCESS_CPUTIME_ID); the interpreter's teardown comes after that reading
    exits = [r for r in delay if r["exited"]]
    assert exits and run["cpu_ns"] <= exits[-1]["oncpu_ns"] <= run["cpu_ns"] + 200_000_000
    blkio = _reported_blkio(run)
    assert blkio is None or 0 < blkio <= run["busy_ns"]


def _reported_blkio(run: dict) -> int | None:
    """The reader's block I/O waits as the delay monitor reports them (run.json's totals_ns),
    never the kernel's raw counter: on 6.18 that took a zero start for a wait of this reader,
    born after accounting was switched on (CI: 31695 s, the uptime, in a 1.5 s run), and the
    monitor drops such a step. None where it found the waits accounted faster than time
    passes and left them out, saying so (impossible_per_s)."""
    summary = run["results"]["delay"].summary
    if "blkio" in summary.get("impossible_per_s", {}):
        assert "blkio" not in summary["totals_ns"] or summary["totals_ns"]["blkio"] == 0
        return None
    return summary["totals_ns"]["blkio"]


STARTER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from stallbench.core.context import EnvState, RunContext
    from stallbench.core.journal import Journal
    from stallbench.monitors import monitor_class
    journal = Journal(Path(sys.argv[1]))
    ctx = RunContext(run_dir=Path(sys.argv[1]), env=EnvState(workdir=Path(sys.argv[1])),
                     duration_s=60, journal=journal)
    ctx.start_clock()
    for name in ("delay", "trace"):
        monitor_class(name)().start(ctx)
    print("started", flush=True)
    time.sleep(120)
""")


def test_kill_9_then_cleanup_restores_sysctl_and_removes_instance(tmp_path: Path,
                                                                  tracefs_root: str) -> None:
    before = DELAYACCT.read_text()
    if before.strip() == "1":
        pytest.skip("task_delayacct is already on: nothing to restore")
    proc = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        root = find_tracefs()
        instances = [d for d in os.listdir(f"{root}/instances")
                     if d.startswith(f"stallbench-{proc.pid}-")]
        assert instances and DELAYACCT.read_text().strip() == "1"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    errors = cleanup_stale(tmp_path, log=lambda _m: None, undo_kinds=undo_kinds)
    assert errors == 0
    assert DELAYACCT.read_text() == before
    assert not [d for d in os.listdir(f"{find_tracefs()}/instances")
                if d.startswith(f"stallbench-{proc.pid}-")]
    assert not list(tmp_path.glob("journal-*.json"))


def _unavailable_as(uid: int | None) -> dict[str, str | None]:
    """Each monitor's unavailable() in a forked child that has dropped to `uid` (and its group,
    no supplementary groups) before asking; None: as this process (root)."""
    ctx = RunContext(run_dir=Path("/"), env=EnvState(workdir=Path("/")), duration_s=1,
                     journal=None)
    classes = {name: monitor_class(name) for name in
               ("counters", "psi", "diskstats", "delay", "stacks", "trace", "trace-full")}
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                 # the child: never back into pytest
        code = 1
        try:
            os.close(read_end)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            reasons = {name: cls.unavailable(ctx) for name, cls in classes.items()}
            reasons["euid"] = os.geteuid()
            os.write(write_end, json.dumps(reasons).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data
    return json.loads(data)


def test_unavailable_when_not_root_is_one_line() -> None:
    """As nobody (uid 65534): the monitors that need root (taskstats' CAP_NET_ADMIN and the
    delayacct sysctl, tracefs, /proc/PID/stack) say so in one line; the others answer as they
    do for root, since /proc/vmstat, /proc/pressure and /proc/diskstats are world-readable."""
    nobody = _unavailable_as(65534)
    assert nobody.pop("euid") == 65534
    for name in ("delay", "stacks", "trace", "trace-full"):
        reason = nobody[name]
        assert isinstance(reason, str) and reason and "\n" not in reason, (name, reason)
        assert "root" in reason, (name, reason)
    as_root = _unavailable_as(None)
    assert as_root.pop("euid") == 0
    for name in ("counters", "psi", "diskstats"):
        assert nobody[name] == as_root[name], name
        assert nobody[name] is None or "\n" not in nobody[name]
