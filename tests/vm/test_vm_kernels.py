"""Kernel variants for real: two Debian kernels booted under QEMU on this host, the same
workload and monitors run inside each guest, the runs brought back and compared."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import sb
from vm_support import guest_kernels, qemu_pids, requires_vm

import stallbench

pytestmark = [pytest.mark.guest, requires_vm, pytest.mark.slow]
MONITORS = ("counters", "psi", "delay")


def _plan(tmp_path: Path, workload: str, kernels, options: str, iterations: int,
          new_settings: str, duration: str = "3s") -> Path:
    (old, old_release), (new, new_release) = kernels
    text = f"""
workload = "{workload}"
duration = "{duration}"
iterations = {iterations}
monitors = ["counters", "psi", "delay", "diskstats", "profile"]
[options]
{options}

[[variants]]
name = "old"
kernel = "{old}"
vm_cpus = 1
vm_memory = "512M"

[[variants]]
name = "new"
kernel = "{new}"
vm_cpus = 1
vm_memory = "512M"
{new_settings}
"""
    path = tmp_path / f"{workload}.toml"
    path.write_text(text)
    return path


def _ops_per_op(run_dir: Path) -> dict[str, int]:
    ops = np.array(pq.read_table(run_dir / "ops.parquet").column("op").to_pylist())
    names, counts = np.unique(ops, return_counts=True)
    return dict(zip(names.tolist(), counts.tolist(), strict=True))


def _check_guest_run(run_dir: Path, release: str, fs: str = "ext4") -> dict:
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete", (run_dir, meta["status"], meta["reason"])
    # the guest's kernel and command line, not the host's
    assert meta["kernel"]["release"] == release
    assert meta["kernel"]["release"] != os.uname().release
    assert "delayacct" in meta["kernel"]["cmdline"]
    assert meta["kernel"]["cmdline"] != Path("/proc/cmdline").read_text().strip()
    vm = meta["environment"]["vm"]
    assert vm["hypervisor"] in ("kvm", "tcg")
    assert vm["vcpus"] == 1 and vm["memory"] == 512 << 20
    assert vm["host"]["name"] == socket.gethostname()
    assert vm["host"]["kernel"]["release"] == os.uname().release
    if vm["hypervisor"] == "tcg":
        assert any("emulated" in note and "not comparable" in note for note in meta["notes"])
    # a kernel built with CONFIG_PVH (its own config says so) is started at its PVH entry
    config = Path(vm["image"]).parent / f"config-{release}"
    if "CONFIG_PVH=y" in config.read_text().splitlines():
        assert vm["boot"] == "PVH entry of the uncompressed kernel", vm["boot"]
    # the workload's files were on the guest's virtual disk, seen by the guest's block layer
    assert meta["environment"]["filesystem"]["source"] == "/dev/vda"
    assert meta["environment"]["filesystem"]["type"] == fs
    assert meta["environment"]["devices"] == ["vda"]
    # every op the guest's workers counted is in ops.parquet (counted with numpy)
    recorded = _ops_per_op(run_dir)
    assert recorded == {op: n for op, n in meta["counted"].items() if n}
    assert sum(recorded.values()) > 0
    # the monitors ran inside the guest: their tables are the guest's
    for name in MONITORS:
        assert meta["monitors"][name]["status"] == "ok", (name, meta["monitors"][name])
        table = pq.read_table(run_dir / "monitors" / f"{name}.parquet")
        assert table.num_rows > 0, name
    assert meta["monitors"]["delay"]["tasks"] > 0
    diskstats = pq.read_table(run_dir / "monitors" / "diskstats.parquet").to_pydict()
    assert set(diskstats.get("device", ["vda"])) <= {"vda"}
    assert not (run_dir / ".guest").exists()
    return meta


def test_two_guest_kernels_pgioperf_interleaved_and_compared(tmp_path):
    """One plan (each guest boot costs seconds under TCG): the new kernel's variant also
    changes the filesystem, mount options, memory limit, I/O scheduler and a sysctl."""
    results = tmp_path / "results"
    before = qemu_pids()
    plan = _plan(tmp_path, "pgioperf", guest_kernels(),
                 'readers = 2\ndata_size = "32M"\nwal_size = "16M"', iterations=1,
                 new_settings='sysctls = { "vm.dirty_background_ratio" = 3 }\nfs = "xfs"\n'
                              'mount_opts = "noatime"\nmemory = "256M"\nscheduler = "none"',
                 duration="2s")
    out = sb("run", "--plan", str(plan), "--results", str(results), "--no-progress",
             state=tmp_path / "state", timeout=400)
    assert out.returncode == 0, out.stdout + out.stderr
    (_, old_release), (_, new_release) = guest_kernels()
    metas = {}
    for variant, release, fs in (("old", old_release, "ext4"), ("new", new_release, "xfs")):
        metas[variant, 1] = _check_guest_run(results / variant / "pgioperf" / "1", release, fs=fs)
    # the first round in the plan's order (later rounds' random order:
    # tests/run/test_runner_order.py)
    order = sorted(metas, key=lambda k: metas[k]["start_utc"])
    assert order == [("old", 1), ("new", 1)]
    # the variant's settings acted in the guest: the sysctl (the guest's own previous value
    # recorded), xfs mounted noatime on its disk, a cgroup v2 memory limit, the I/O scheduler
    # of its virtio disk
    env = metas["new", 1]["environment"]
    assert env["sysctls"]["vm.dirty_background_ratio"]["now"] == "3"
    assert "noatime" in env["filesystem"]["mount_options"].split(",")
    assert env["memory"]["cgroup_version"] == 2 and env["memory"]["limit"] == 256 << 20
    assert env["scheduler"]["device"] == "vda" and env["scheduler"]["now"] == "none"
    # the comparison names both kernels, and says so once when the CPU was emulated
    assert f"kernel {old_release}" in out.stdout and f"kernel {new_release}" in out.stdout
    tcg = [m for m in metas.values() if m["environment"]["vm"]["hypervisor"] == "tcg"]
    assert out.stdout.count("emulated (QEMU TCG") == (1 if tcg else 0)
    compare = sb("compare", "old", "new", "--results", str(results), "--format", "json",
                 state=tmp_path / "state")
    assert compare.returncode == 0, compare.stderr
    data = json.loads(compare.stdout)
    # the comparison counts the reads after the warm-up, which counts from the run's first op
    # (a guest's workload starts seconds after its clock): numpy on the raw ops
    run_dir = results / "new" / metas["new", 1]["workload"] / "1"
    ops = pq.read_table(run_dir / "ops.parquet", columns=["op", "start_ns"])
    reads = np.asarray(ops.column("op").to_pylist()) == "read"
    warmup_ns = stallbench.load_run(run_dir).summary().warmup_ns
    after = int((reads & (ops.column("start_ns").to_numpy() >= warmup_ns)).sum())
    assert data["ops"]["read"]["variants"]["new"]["samples"] == after
    assert not (qemu_pids() - before)
    assert not list((results / ".work").glob("stallbench-vm-*"))
    _check_guest_profile(results / "old" / "pgioperf" / "1")


def _check_guest_profile(run_dir: Path) -> None:
    """The profile monitor ran in the guest, with the guest kernel's symbols (Debian ships no
    System.map in its image package: the guest's /proc/kallsyms is the only table): every
    kernel frame is named, the readers' read calls go through the kernel's read path in order,
    and some frames are functions the host's kernel does not have (6.1's, not 6.18's)."""
    meta = json.loads((run_dir / "run.json").read_text())
    profile = meta["monitors"]["profile"]
    assert profile["status"] == "ok", profile
    tcg = meta["environment"]["vm"]["hypervisor"] == "tcg"
    assert profile["event"] == "cpu-clock" if tcg else profile["event"] in ("cycles", "cpu-clock")
    stacks = pq.read_table(run_dir / "monitors" / "profile.parquet").column("stack").to_pylist()
    assert len(stacks) == profile["samples"] > 0
    kernel = {frame for stack in stacks if "entry_SYSCALL_64_after_hwframe" in stack
              for frame in stack.split("entry_SYSCALL_64_after_hwframe;", 1)[1].split(";")}
    assert kernel and "[unknown]" not in kernel
    path = ("do_syscall_64", "vfs_read", "filemap_read")
    assert any(_in_order(stack.split(";"), path) for stack in stacks), stacks[:5]
    with open("/proc/kallsyms") as f:
        host = {fields[2] for line in f if len(fields := line.split()) >= 3}
    assert kernel - host, "every frame is also a function of the host's kernel"


def _in_order(frames: list[str], names: tuple[str, ...]) -> bool:
    found = iter(frames)
    return all(name in found for name in names)
