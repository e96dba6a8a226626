"""Memory cgroups, system memory, sysctls, schedulers and the checks made before any change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from env_support import MIB, TinyWorkload, nothing_left, sysctl

from stallbench.core.errors import UsageError
from stallbench.core.journal import Journal
from stallbench.env import check_settings, environment
from stallbench.env.sysmem import meminfo, tolerance
from stallbench.settings.variant import VariantSettings

pytestmark = pytest.mark.machine


@pytest.fixture
def journal(tmp_path):
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as j:
        yield j


def _cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    return ""


@pytest.mark.root
def test_memory_limit_binds(tmp_path, journal):
    limit = 48 * MIB
    results = tmp_path / "results"
    workload = TinyWorkload(8 * MIB)
    settings = VariantSettings(name="memcg", fs="ext4", fs_size=256 * MIB, memory=limit)
    with environment(settings, journal, workload, results) as state:
        assert workload.memory_seen == limit       # data sizes follow the limit
        cgroup = Path(state.cgroup["path"])
        assert int((cgroup / "memory.limit_in_bytes").read_text()) == limit
        # a child writes 3x the limit through the page cache, then allocates 2x in anon memory
        script = (f"import os\nwith open({str(state.workdir / 'f')!r}, 'wb') as f:\n"
                  f"    for _ in range(144): f.write(b'x' * {MIB})\n"
                  f"print(open('/proc/self/cgroup').read(), flush=True)\n"
                  f"b = bytearray({2 * limit})\nfor i in range(0, len(b), 4096): b[i] = 1\n")
        child = subprocess.run([sys.executable, "-c", script], preexec_fn=state.child_setup,
                               capture_output=True, text=True, timeout=60)
        assert f"/{cgroup.name}" in child.stdout       # the kernel put the child in our cgroup
        assert child.returncode == -9                  # the OOM killer ended the anon hog
        assert (state.workdir / "f").stat().st_size == 144 * MIB
    memory = state.metadata["memory"]
    assert memory["limit"] == limit
    assert 0 < memory["peak"] <= limit
    assert memory["failcnt"] > 0
    assert memory["oom_kill"] >= 1
    assert not cgroup.exists()
    assert nothing_left(results) == []


@pytest.mark.root
def test_child_setup_moves_only_the_child(tmp_path, journal):
    with environment(VariantSettings(name="c"), journal, TinyWorkload(), tmp_path / "r") as st:
        child = subprocess.Popen(["sleep", "30"], preexec_fn=st.child_setup)
        try:
            assert _cgroup_of(child.pid).endswith(Path(st.cgroup["path"]).name)
            assert _cgroup_of(os.getpid()) != _cgroup_of(child.pid)
        finally:
            child.kill()
            child.wait()


@pytest.mark.root
def test_leftover_workload_process_is_killed_before_unmount(tmp_path, journal):
    results = tmp_path / "results"
    with environment(VariantSettings(name="left", fs="ext4"), journal, TinyWorkload(),
                     results) as state:
        child = subprocess.Popen(["sleep", "300"], cwd=state.workdir,
                                 preexec_fn=state.child_setup)
    assert child.wait(timeout=10) == -9
    assert nothing_left(results) == []


@pytest.mark.root
def test_sysctls_and_dirty_bytes_pair_are_restored(tmp_path, journal):
    before = {k: sysctl(k) for k in ("vm.dirty_ratio", "vm.dirty_bytes",
                                     "vm.dirty_background_ratio", "vm.swappiness")}
    settings = VariantSettings(name="s", sysctls={"vm.dirty_bytes": str(64 * MIB),
                                                  "vm.dirty_background_ratio": "3",
                                                  "vm.swappiness": "33"})
    with environment(settings, journal, TinyWorkload(), tmp_path / "r") as state:
        assert sysctl("vm.dirty_bytes") == str(64 * MIB)
        assert sysctl("vm.dirty_ratio") == "0"        # the kernel zeroes the partner
        assert sysctl("vm.swappiness") == "33"
        meta = state.metadata["sysctls"]
        assert meta["vm.swappiness"] == {"old": before["vm.swappiness"], "new": "33", "now": "33"}
        assert meta["vm.dirty_bytes"]["old vm.dirty_ratio"] == before["vm.dirty_ratio"]
    after = {k: sysctl(k) for k in before}
    assert after == before


@pytest.mark.root
def test_bad_sysctls_fail_before_any_change(tmp_path, journal):
    for sysctls, message in (({"vm.no_such_knob": "1"}, "no such sysctl"),
                             ({"vm.drop_caches": "3"}, "write-only"),
                             ({"kernel.osrelease": "x"}, "read-only")):
        with pytest.raises(UsageError, match=message):
            check_settings(VariantSettings(name="bad", sysctls=sysctls))
    before = sysctl("vm.swappiness")
    settings = VariantSettings(name="bad", sysctls={"vm.swappiness": "33",
                                                    "vm.dirty_ratio": "not-a-number"})
    with pytest.raises(UsageError, match="kernel refused"):
        with environment(settings, journal, TinyWorkload(), tmp_path / "r"):
            pass
    assert sysctl("vm.swappiness") == before


@pytest.mark.root
def test_scheduler_set_on_the_loop_device_and_restored(tmp_path, journal):
    results = tmp_path / "results"
    settings = VariantSettings(name="sched", fs="ext4", scheduler="mq-deadline")
    with environment(settings, journal, TinyWorkload(), results) as state:
        device = state.devices[0]
        path = Path(f"/sys/block/{device}/queue/scheduler")
        assert "[mq-deadline]" in path.read_text()
        old = state.metadata["scheduler"]["old"]
    assert f"[{old}]" in path.read_text()
    with pytest.raises(UsageError, match="not offered"):
        with environment(VariantSettings(name="s2", fs="ext4", scheduler="cfq-nope"), journal,
                         TinyWorkload(), results):
            pass
    assert nothing_left(results) == []


@pytest.mark.root
def test_system_memory_reservation_and_restore(tmp_path, journal):
    hugepages = Path("/proc/sys/vm/nr_hugepages")
    old = int(hugepages.read_text())
    available = meminfo()["MemAvailable"]
    # take away only ~1 GiB: other tests run beside this one on the same machine
    target = available - 1024 * MIB
    settings = VariantSettings(name="lowmem", system_memory=target)
    with environment(settings, journal, TinyWorkload(), tmp_path / "r") as state:
        meta = state.metadata["system_memory"]
        reserved_pages = int(hugepages.read_text()) - old
        page = meminfo()["Hugepagesize"]
        assert reserved_pages * page == meta["reserved"] > 0
        # other tests run beside this one, so MemAvailable is checked against the tolerance
        assert abs(meta["mem_available_after"] - target) <= tolerance(target)
        assert meta["reserved"] <= 2048 * MIB
        assert meminfo()["HugePages_Total"] == old + reserved_pages
    assert int(hugepages.read_text()) == old


def test_unsafe_settings_are_refused(tmp_path):
    cases = [
        (VariantSettings(name="a", dir=Path("/")), "system directory"),
        (VariantSettings(name="a", dir=Path("/proc")), "system directory"),
        (VariantSettings(name="a", dir=Path("/sys/kernel")), "inside /sys"),
        (VariantSettings(name="a", dir=Path("/boot")), "system directory"),
        (VariantSettings(name="a", dir=tmp_path / "missing"), "no such directory"),
        (VariantSettings(name="a", dir=Path("/tmp/../proc")), "'..'"),
        (VariantSettings(name="a", fs="ext4", dir=tmp_path), "not both"),
        (VariantSettings(name="a", fs="zfs"), "not a supported filesystem"),
        (VariantSettings(name="a", fs="ext4", mkfs_opts="-F /dev/vda"), "device or path"),
        (VariantSettings(name="a", fs="ext4", mount_opts="ro, remount"), "without spaces"),
        (VariantSettings(name="a", fs_size=64 * MIB), "only makes sense with --fs"),
        (VariantSettings(name="a", fs="xfs", fs_size=64 * MIB), "xfs needs at least"),
        (VariantSettings(name="a", system_memory=100 * MIB), "safe floor"),
        (VariantSettings(name="a", memory=MIB), "too small"),
        (VariantSettings(name="a/b"), "not allowed"),
    ]
    link = tmp_path / "root-link"
    link.symlink_to("/")
    cases.append((VariantSettings(name="a", dir=link), "system directory"))
    for settings, message in cases:
        with pytest.raises(UsageError, match=message):
            check_settings(settings)


def test_without_root_each_root_option_fails_before_any_change():
    """As user 'nobody': one line naming the option and what it needs, before any change."""
    options = [dict(fs="ext4"), dict(memory=64 * MIB), dict(system_memory=1 << 30),
               dict(sysctls={"vm.swappiness": "10"}), dict(scheduler="none")]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop privileges for good, then check (modules are already imported)
        code = 0
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            lines = []
            for kw in options:
                try:
                    check_settings(VariantSettings(name="x", **kw))
                    lines.append(f"ACCEPTED {kw}")
                except UsageError as exc:
                    lines.append(str(exc))
            os.write(write_end, "\n".join(lines).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        lines = f.read().splitlines()
    assert os.waitpid(pid, 0)[1] == 0
    assert len(lines) == 5, lines
    for line, flag in zip(lines, ["--fs", "--memory", "--system-memory", "--sysctl",
                                  "--scheduler"], strict=True):
        assert line.startswith(f"{flag} needs root ("), line
