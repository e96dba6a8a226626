"""I/O and memory cgroup knobs as variant settings (env/iocgroup.py, env/memknobs.py): a real
O_DIRECT read run on a loop filesystem throttled with --io-max, whose bytes/s from the recorded
ops match the limit and the kernel's own count of bytes served; memory knobs read back from the
kernel; knobs this machine lacks refused before anything changes; nothing left behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import run_stallbench
from stallbench.core.errors import UsageError
from stallbench.env.iocgroup import find_io_controller
from stallbench.env.memcg import find_memory_controller
from stallbench.plan.planfile import load_plan
from stallbench.settings.shapes import parse_io_max

pytestmark = pytest.mark.quiet

RECORD = 64 << 10
LIMIT = 4 << 20


def _run(tmp_path: Path, variant: str, *extra: str) -> subprocess.CompletedProcess:
    return run_stallbench("run", "randread", "--fs", "ext4", "--fs-size", "128M",
                          "--file-size", "48M", "--direct", "--record-size", "64K",
                          "--duration", "3", "--monitors", "none", "--no-progress",
                          "--results", str(tmp_path / "results"), "--variant", variant,
                          "--work-dir", str(tmp_path / "images"), *extra,
                          env={"STALLBENCH_STATE_DIR": str(tmp_path / "state")}, timeout=120)


def _meta(tmp_path: Path, variant: str) -> dict:
    run_dir = next((tmp_path / "results" / variant / "randread").iterdir())
    return json.loads((run_dir / "run.json").read_text())


@pytest.mark.root
def test_read_bps_throttle_slows_direct_reads_to_the_limit(tmp_path: Path) -> None:
    controller = find_io_controller()
    if controller is None:
        pytest.skip("no I/O cgroup controller on this machine")
    (tmp_path / "images").mkdir()
    free = _run(tmp_path, "free")
    assert free.returncode == 0, free.stderr
    throttled = _run(tmp_path, "throttled", "--io-max", f"rbps={LIMIT}")
    assert throttled.returncode == 0, throttled.stderr
    fast, slow = _meta(tmp_path, "free"), _meta(tmp_path, "throttled")
    rate = {name: m["samples"]["read"] * RECORD / m["duration_s"]
            for name, m in (("free", fast), ("throttled", slow))}
    # the oracle: bytes/s from the recorded ops against the limit
    # (never above it beyond blk-throttle's first slice; a busy machine may stay below it)
    assert 0.7 * LIMIT < rate["throttled"] < 1.1 * LIMIT, rate
    assert rate["free"] > 5 * rate["throttled"], rate
    io = slow["environment"]["io"]
    device = slow["environment"]["filesystem"]["loop_device"]
    assert io["device"] == device and io["version"] == controller.version
    if controller.version == 1:
        assert io["files"]["blkio.throttle.read_bps_device"]["now"] == f"{io['dev']} {LIMIT}"
        # the kernel's own count of bytes read by the cgroup: every recorded read, and at most
        # a little filesystem metadata (an inode or extent block) besides
        served = dict(line.rsplit(" ", 1) for line in io["io_service_bytes"].splitlines())
        extra = int(served[f"{io['dev']} Read"]) - slow["samples"]["read"] * RECORD
        assert 0 <= extra <= 64 << 10, extra
    assert "io" not in fast["environment"]
    assert not Path(io["cgroup"]).exists()
    assert not list((tmp_path / "state").glob("journal-*.json"))
    assert str(tmp_path) not in subprocess.run(["losetup", "-a"], capture_output=True,
                                               text=True).stdout


@pytest.mark.root
def test_memory_knobs_are_written_and_read_back(tmp_path: Path) -> None:
    controller = find_memory_controller()
    if controller is None:
        pytest.skip("no memory cgroup controller")
    (tmp_path / "work").mkdir()
    if controller.version == 1:
        knobs = ["--memory-soft-limit", "64M"]
        expect = {"memory.soft_limit_in_bytes": str(64 << 20)}
        if (controller.root / "memory.memsw.limit_in_bytes").exists():
            knobs += ["--swap-limit", "0"]
            expect["memory.memsw.limit_in_bytes"] = str(128 << 20)   # memory + 0 swap
    else:
        knobs = ["--memory-high", "96M"]
        expect = {"memory.high": str(96 << 20)}
    out = run_stallbench("run", "randread", "--dir", str(tmp_path / "work"), "--file-size",
                         "8M", "--duration", "1", "--memory", "128M", *knobs, "--monitors",
                         "none", "--no-progress", "--results", str(tmp_path / "results"),
                         "--variant", "knobs",
                         env={"STALLBENCH_STATE_DIR": str(tmp_path / "state")})
    assert out.returncode == 0, out.stderr
    memory = _meta(tmp_path, "knobs")["environment"]["memory"]
    assert {name: entry["now"] for name, entry in memory["knobs"].items()} == expect
    assert not Path(memory["cgroup"]).exists()


@pytest.mark.root
@pytest.mark.parametrize("args, message", [
    (["--io-latency", "5ms"], "io.latency is cgroup v2 only"),
    (["--io-weight", "100"], "no weight file"),
    (["--memory-high", "64M"], "nearest is --memory-soft-limit"),
    (["--swap-limit", "0"], "needs --memory too"),
])
def test_knobs_this_machine_lacks_are_refused_first(tmp_path: Path, args, message) -> None:
    io, memory = find_io_controller(), find_memory_controller()
    if io is None or io.version != 1 or memory is None or memory.version != 1:
        pytest.skip("these refusals are for a cgroup v1 machine (as this project's CI is)")
    if "--io-weight" in args and any((io.root / n).exists() for n in ("blkio.weight",
                                                                        "blkio.bfq.weight")):
        pytest.skip("this blkio controller has a weight file")
    (tmp_path / "work").mkdir()
    before = sorted(p.name for p in io.root.iterdir())
    out = run_stallbench("run", "randread", "--dir", str(tmp_path / "work"), "--file-size",
                         "8M", "--duration", "1", *args, "--monitors", "none",
                         "--no-progress", "--results", str(tmp_path / "results"),
                         env={"STALLBENCH_STATE_DIR": str(tmp_path / "state")})
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert sorted(p.name for p in io.root.iterdir()) == before
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob(
        "run.json"))


def test_plan_keys_and_bad_values(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('workload = "randread"\n[[variants]]\nname = "a"\nio_max = "rbps=1M,wiops=50"'
                    '\nswap_limit = 0\nio_latency = "5ms"\nio_weight = 200\n'
                    'memory_high = "64M"\n')
    variant = load_plan(plan).variants[0]
    assert variant.io_max == {"rbps": 1 << 20, "wiops": 50}
    assert (variant.swap_limit, variant.io_latency_us, variant.io_weight,
            variant.memory_high) == (0, 5000, 200, 64 << 20)
    plan.write_text('workload = "randread"\n[[variants]]\nname = "a"\nio_max = "rbs=1M"\n')
    with pytest.raises(UsageError, match=r"plan.toml:4: .*'rbs' is not one of"):
        load_plan(plan)
    with pytest.raises(UsageError, match="whole number"):
        parse_io_max("riops=1.5")


@pytest.mark.root
def test_kill_9_then_cleanup_removes_the_io_cgroup(tmp_path: Path) -> None:
    import signal

    from reliability_support import leftovers, sb, sb_start, wait_until

    controller = find_io_controller()
    if controller is None:
        pytest.skip("no I/O cgroup controller on this machine")
    state, work = tmp_path / "state", tmp_path / "images"
    work.mkdir()
    proc = sb_start("run", "randread", "--fs", "ext4", "--fs-size", "64M", "--file-size", "16M",
                    "--direct", "--duration", "60", "--io-max", "riops=50", "--monitors", "none",
                    "--no-progress", "--results", str(tmp_path / "results"), "--work-dir",
                    str(work), state=state)
    ours = f"stallbench-{proc.pid}-*"
    wait_until(lambda: list(controller.root.glob(ours))
               and (tmp_path / "results").rglob(".spool"), proc)
    cgroup = list(controller.root.glob(ours))[0]
    wait_until(lambda: (cgroup / "cgroup.procs").read_text().split(), proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert cgroup.exists()                        # the machine is still changed
    cleanup = sb("cleanup", state=state)
    assert cleanup.returncode == 0, cleanup.stderr
    assert not cgroup.exists()
    assert leftovers(proc.pid, work) == []
