"""Kernel variants under faults: a kernel that cannot boot, kill -9 of stallbench while a guest
runs, Ctrl-C during the boot, SIGTERM during the guest's run (docs/reliability.md, rows 8a-8d)."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from reliability_support import run_meta, sb, sb_start, wait_until
from vm_support import guest_kernels, qemu_children, requires_vm

from conftest import alive

pytestmark = [pytest.mark.guest, requires_vm]


def _guest_args(results: Path, kernel: Path, duration: str, *extra: str) -> list[str]:
    return ["run", "randread", "--variant", "guest", "--results", str(results),
            "--kernel", str(kernel), "--vm-cpus", "1", "--vm-memory", "512M",
            "--file-size", "32M", "--duration", duration, "--monitors", "counters,psi,delay",
            "--no-progress", *extra]


def _nothing_left(results: Path, state: Path, qemus: list[int]) -> None:
    assert not [pid for pid in qemus if alive(pid)], "a QEMU process is still running"
    assert not list((results / ".work").glob("stallbench-vm-*")), "a disk image is left"
    assert not list(results.glob("*/*/*/.guest")), "an exchange directory is left"
    left = {p.name: p.read_text() for p in state.glob("journal-*.json")}
    assert not left, f"a journal is left: {left}"


def test_a_truncated_kernel_fails_its_variant_clearly_and_the_others_go_on(tmp_path):
    """The bzImage is cut in half: refused before it boots, with what is wrong; the local
    variant after it runs."""
    from stallbench.vm.kernel import resolve_kernel

    deb, _release = guest_kernels()[-1]
    whole = resolve_kernel(str(deb)).image
    truncated = tmp_path / "vmlinuz-truncated"
    truncated.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    (tmp_path / "data").mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(f"""workload = "randread"
duration = "1s"
[options]
file_size = "8M"
[[variants]]
name = "broken"
kernel = "{truncated}"
[[variants]]
name = "local"
dir = "{tmp_path / 'data'}"
""")
    results, state = tmp_path / "results", tmp_path / "state"
    out = sb("run", "--plan", str(plan), "--results", str(results), "--no-progress",
             state=state, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    broken = run_meta(results / "broken" / "randread" / "1")
    assert broken["status"] == "failed"
    half = whole.stat().st_size // 2
    assert f"kernel image is truncated ({half} bytes" in broken["reason"]
    assert f"broken randread 1/1: failed ({truncated}: kernel image is truncated" in out.stderr
    assert run_meta(results / "local" / "randread" / "1")["status"] == "complete"
    _nothing_left(results, state, [])


def _wait_for_guest(run_dir, proc) -> None:
    """Until the guest is up and its workload running (its console says so)."""
    wait_until(lambda: (run_dir / "console.log").exists()
               and b"stallbench-guest: up" in (run_dir / "console.log").read_bytes(), proc,
               timeout=120, poll=0.2)


def test_kill_9_while_the_guest_runs_then_cleanup_leaves_nothing(tmp_path):
    deb, _release = guest_kernels()[-1]
    results, state = tmp_path / "results", tmp_path / "state"
    proc = sb_start(*_guest_args(results, deb, "60"), state=state)
    run_dir = results / "guest" / "randread" / "1"
    _wait_for_guest(run_dir, proc)
    qemus = wait_until(lambda: qemu_children(proc.pid), proc)
    journal = json.loads(next(state.glob("journal-*.json")).read_text())
    kinds = [e["kind"] for e in journal["entries"]]
    assert {"kill", "unlink", "rmtree", "finalize_run"} <= set(kinds), kinds
    image = Path(next(e["path"] for e in journal["entries"] if e["kind"] == "unlink"))
    assert image.exists()
    time.sleep(3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # QEMU dies with stallbench (PR_SET_PDEATHSIG); the disk image and the run wait for cleanup
    wait_until(lambda: not any(alive(pid) for pid in qemus), timeout=20, poll=0.1)
    assert image.exists()
    assert run_meta(run_dir)["status"] == "running"
    cleanup = sb("cleanup", state=state)
    assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
    assert "undone: unlink" in cleanup.stdout and "undone: kill" in cleanup.stdout
    meta = run_meta(run_dir)
    assert meta["status"] == "failed"
    assert "stallbench was killed before the run finished" in meta["reason"]
    assert not image.exists()
    _nothing_left(results, state, qemus)
    again = sb("cleanup", state=state)
    assert "undone" not in again.stdout


def test_ctrl_c_during_the_boot_stops_qemu_and_removes_everything(tmp_path):
    deb, _release = guest_kernels()[0]
    results, state = tmp_path / "results", tmp_path / "state"
    proc = sb_start(*_guest_args(results, deb, "30"), state=state)
    qemus = wait_until(lambda: qemu_children(proc.pid), proc, timeout=120, poll=0.05)
    run_dir = results / "guest" / "randread" / "1"
    console = run_dir / "console.log"
    assert b"stallbench-guest: up" not in (console.read_bytes() if console.exists() else b"")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    meta = run_meta(run_dir)
    assert meta["status"] == "interrupted"
    assert meta["reason"] == "stopped by SIGINT before the run finished"
    _nothing_left(results, state, qemus)


def test_sigterm_during_the_guest_run_keeps_what_the_guest_recorded(tmp_path):
    """The signal reaches the guest's stallbench as a Ctrl-C on its console: its workers stop,
    the ops recorded so far come back, the run says which signal stopped it."""
    deb, release = guest_kernels()[0]
    results, state = tmp_path / "results", tmp_path / "state"
    proc = sb_start(*_guest_args(results, deb, "60"), state=state)
    run_dir = results / "guest" / "randread" / "1"
    _wait_for_guest(run_dir, proc)
    qemus = qemu_children(proc.pid)
    # the guest's workers are recording: their spool files (in the exchange directory) grow
    spool = run_dir / ".guest" / "results" / "guest" / "randread" / "1" / ".spool"
    wait_until(lambda: spool.is_dir() and any(p.stat().st_size for p in spool.glob("w*")),
               proc, timeout=180, poll=0.2)
    time.sleep(1)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, out + err
    assert time.monotonic() - started < 60
    meta = run_meta(run_dir)
    assert meta["status"] == "interrupted", meta["reason"]
    assert meta["reason"] == "stopped by SIGTERM"
    assert meta["kernel"]["release"] == release
    ops = pq.read_table(run_dir / "ops.parquet")
    assert ops.num_rows == meta["counted"]["read"] > 0
    _nothing_left(results, state, qemus)


def test_a_guest_that_cannot_start_or_does_not_boot_in_time_is_reported_with_its_console(
        tmp_path):
    """A kernel without its modules (no virtio, no 9p) boots but cannot reach the host's files;
    a boot that takes longer than the boot timeout is stopped. Both say why, with the last
    console lines, and leave nothing behind."""
    from stallbench.vm.kernel import resolve_kernel

    deb, release = guest_kernels()[-1]
    tree = tmp_path / "tree"
    (tree / "boot").mkdir(parents=True)
    shutil.copyfile(resolve_kernel(str(deb)).image, tree / "boot" / f"vmlinuz-{release}")
    results, state = tmp_path / "results", tmp_path / "state"
    out = sb(*_guest_args(results, tree, "5", "--variant", "nomodules"), state=state,
             timeout=180)
    assert out.returncode == 1, out.stdout + out.stderr
    reason = run_meta(results / "nomodules" / "randread" / "1")["reason"]
    assert reason.startswith("the guest could not start: cannot mount the host's root over "
                             "virtio-9p"), reason
    # among the last console lines (a loaded host's guest can print RCU stall warnings too)
    assert f"stallbench-guest: init {release}" in reason.split("; last console lines: ", 1)[1]

    out = sb(*_guest_args(results, deb, "5", "--variant", "slow"), state=state, timeout=180,
             STALLBENCH_VM_BOOT_TIMEOUT="0.2")
    assert out.returncode == 1, out.stdout + out.stderr
    reason = run_meta(results / "slow" / "randread" / "1")["reason"]
    assert reason.startswith(f"{release} did not boot within 0.2 s; last console lines: ")
    _nothing_left(results, state, [])
