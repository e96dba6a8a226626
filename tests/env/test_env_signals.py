"""Exceptions, SIGTERM and kill -9 inside an environment: the machine is put back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from env_support import MIB, TinyWorkload, loop_listing, nothing_left, sysctl, where_stuck

from stallbench.core.errors import UsageError
from stallbench.core.journal import Journal
from stallbench.env import environment
from stallbench.env.sysmem import meminfo
from stallbench.settings.variant import VariantSettings

pytestmark = [pytest.mark.machine, pytest.mark.root]
TESTS = Path(__file__).parent
SRC = TESTS.parents[1] / "src"

# A run that sets up everything env/ can change, starts a workload child in the cgroup holding a
# file open on the loop filesystem, prints what it made and sleeps until killed.
SCRIPT = """
import faulthandler, json, signal, subprocess, sys, time
from pathlib import Path
faulthandler.register(signal.SIGUSR1, all_threads=True)
sys.path[:0] = [{tests!r}, {src!r}]
from env_support import TinyWorkload
from stallbench.env import environment
from stallbench.core.journal import Journal
from stallbench.settings.variant import VariantSettings
settings = VariantSettings(**json.loads({settings!r}))
with Journal(Path({state!r})) as journal:
    with environment(settings, journal, TinyWorkload(), Path({results!r})) as state:
        child = subprocess.Popen(["sh", "-c", "exec 3>data; sleep 600"], cwd=state.workdir,
                                 preexec_fn=state.child_setup)
        print(json.dumps({{"workdir": str(state.workdir), "cgroup": state.cgroup["path"],
                          "devices": state.devices, "child": child.pid,
                          "image": state.metadata["filesystem"]["image"]}}), flush=True)
        time.sleep(600)
"""


def _settings(system_memory: int | None) -> dict:
    settings = {"name": "killed", "fs": "ext4", "memory": 64 * MIB, "scheduler": "mq-deadline",
                "sysctls": {"vm.dirty_background_ratio": "4"}}
    if system_memory:
        settings["system_memory"] = system_memory
    return settings


def _start(tmp_path: Path, settings: dict) -> tuple[subprocess.Popen, dict]:
    tmp_path.mkdir(exist_ok=True)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    script = SCRIPT.format(tests=str(TESTS), src=str(SRC), settings=json.dumps(settings),
                           state=str(state), results=str(tmp_path / "results"))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        pytest.fail(f"the run did not come up: {proc.stderr.read()}")
    return proc, json.loads(line)


def _ended(proc: subprocess.Popen, state: Path, timeout: float = 150) -> int:
    """The run's exit status once it ended. One that does not end in `timeout` (longer than
    the kernel's 120 s hung-task report) fails the test with where it is stuck, after it is
    killed and `stallbench cleanup` has undone its journal, so that the tests after it do not
    meet its sysctls, cgroup and mount."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stuck = where_stuck(proc.pid)
        proc.send_signal(signal.SIGUSR1)          # faulthandler: the Python stacks, on stderr
        time.sleep(1)
        proc.kill()
        cleanup = subprocess.run([sys.executable, "-m", "stallbench", "cleanup"],
                                 capture_output=True, text=True, timeout=300,
                                 env={**os.environ, "STALLBENCH_STATE_DIR": str(state)})
        try:
            _, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            stderr = "(still running after kill -9)"
        pytest.fail(f"the run did not end in {timeout:.0f} s after SIGTERM:\n{stuck}\n"
                    f"its stderr:\n{stderr}\ncleanup:\n{cleanup.stdout}{cleanup.stderr}")


def _assert_machine_restored(tmp_path: Path, made: dict, before: dict) -> None:
    assert nothing_left(tmp_path / "results") == []
    assert made["image"] not in loop_listing()
    assert not Path(made["image"]).exists()
    assert not Path(made["cgroup"]).exists()
    assert not any(made["workdir"] in line for line in Path("/proc/mounts").read_text()
                   .splitlines())
    assert not Path(f"/proc/{made['child']}").exists() or \
        Path(f"/proc/{made['child']}/stat").read_text().split()[2] == "Z"
    device = made["devices"][0]
    assert f"[{before['scheduler']}]" in Path(f"/sys/block/{device}/queue/scheduler").read_text()
    assert sysctl("vm.dirty_background_ratio") == before["dirty_background_ratio"]
    assert int(Path("/proc/sys/vm/nr_hugepages").read_text()) == before["hugepages"]


def _before() -> dict:
    return {"scheduler": "none", "dirty_background_ratio": sysctl("vm.dirty_background_ratio"),
            "hugepages": int(Path("/proc/sys/vm/nr_hugepages").read_text())}


def test_kill_9_then_stallbench_cleanup_restores_everything(tmp_path):
    before = _before()
    target = meminfo()["MemAvailable"] - 1536 * MIB
    proc, made = _start(tmp_path, _settings(target))
    assert int(Path("/proc/sys/vm/nr_hugepages").read_text()) > before["hugepages"]
    assert sysctl("vm.dirty_background_ratio") == "4"
    proc.kill()
    proc.wait(timeout=10)
    # everything is still there after the kill ...
    assert made["image"] in loop_listing()
    assert Path(made["cgroup"]).exists()
    cleanup = subprocess.run([sys.executable, "-m", "stallbench", "cleanup"],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "STALLBENCH_STATE_DIR": str(tmp_path / "state")})
    assert cleanup.returncode == 0, cleanup.stderr
    for word in ("sysctl", "detach_loop", "cgroup", "loop_umount", "nr_hugepages"):
        assert word in cleanup.stdout, cleanup.stdout
    # ... and gone after `stallbench cleanup`
    _assert_machine_restored(tmp_path, made, before)
    again = subprocess.run([sys.executable, "-m", "stallbench", "cleanup"], capture_output=True,
                           text=True, timeout=60,
                           env={**os.environ, "STALLBENCH_STATE_DIR": str(tmp_path / "state")})
    assert again.returncode == 0 and "undone" not in again.stdout


def test_sigterm_inside_the_environment_leaves_nothing(tmp_path):
    before = _before()
    proc, made = _start(tmp_path, _settings(None))
    proc.send_signal(signal.SIGTERM)
    assert _ended(proc, tmp_path / "state") != 0
    assert list((tmp_path / "state").glob("journal-*.json")) == []
    _assert_machine_restored(tmp_path, made, before)


def test_exception_inside_the_environment_leaves_nothing(tmp_path):
    before = _before()
    (tmp_path / "state").mkdir()
    results = tmp_path / "results"
    settings = VariantSettings(**_settings(None))
    with Journal(tmp_path / "state") as journal:
        with pytest.raises(RuntimeError, match="workload crashed"):
            with environment(settings, journal, TinyWorkload(), results) as state:
                made = {"workdir": str(state.workdir), "cgroup": state.cgroup["path"],
                        "devices": state.devices,
                        "image": state.metadata["filesystem"]["image"], "child": 0}
                raise RuntimeError("workload crashed")
        assert journal.entries == []
    _assert_machine_restored(tmp_path, made, before)


def test_a_second_run_works_beside_or_refuses(tmp_path):
    """Loop filesystems and cgroups get unique names; a sysctl held by one run is refused."""
    proc, made = _start(tmp_path / "a", _settings(None))
    try:
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "state").mkdir()
        with Journal(tmp_path / "b" / "state") as journal:
            beside = VariantSettings(name="beside", fs="ext4", memory=64 * MIB)
            with environment(beside, journal, TinyWorkload(), tmp_path / "b" / "results") as st:
                assert st.devices != made["devices"] and st.cgroup["path"] != made["cgroup"]
            clash = VariantSettings(name="clash", sysctls={"vm.dirty_background_ratio": "9"})
            with pytest.raises(UsageError, match="another stallbench run is changing sysctl"):
                with environment(clash, journal, TinyWorkload(), tmp_path / "b" / "results"):
                    pass
            assert sysctl("vm.dirty_background_ratio") == "4"   # the first run's value stands
        # cleanup while the first run lives leaves it alone
        out = subprocess.run([sys.executable, "-m", "stallbench", "cleanup"], capture_output=True,
                             text=True, timeout=60,
                             env={**os.environ,
                                  "STALLBENCH_STATE_DIR": str(tmp_path / "a" / "state")})
        assert "still in progress" in out.stdout
        assert made["image"] in loop_listing()
    finally:
        proc.send_signal(signal.SIGTERM)
        _ended(proc, tmp_path / "a" / "state")
    assert nothing_left(tmp_path / "a" / "results") == []


def test_cleanup_finds_leftovers_no_journal_recorded(tmp_path):
    """A run killed between losetup and journaling the device: found by its image's name."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    image = tmp_path / f"stallbench-{dead.pid}-1-x-ext4.scratch.img"
    with open(image, "wb") as f:
        f.truncate(32 * MIB)
    mount_point = tmp_path / f"stallbench-{dead.pid}-1.mnt"
    mount_point.mkdir()
    cgroup = Path(f"/sys/fs/cgroup/memory/stallbench-{dead.pid}-1")
    device = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                            text=True, check=True).stdout.strip()
    try:
        subprocess.run(["mkfs.ext4", "-q", device], check=True, capture_output=True)
        subprocess.run(["mount", device, str(mount_point)], check=True)
        cgroup.mkdir()
        sleeper = subprocess.Popen(["sleep", "600"], cwd=mount_point)
        (cgroup / "cgroup.procs").write_text(str(sleeper.pid))
        out = subprocess.run([sys.executable, "-m", "stallbench", "cleanup"], capture_output=True,
                             text=True, timeout=120,
                             env={**os.environ, "STALLBENCH_STATE_DIR": str(tmp_path / "st")})
        assert out.returncode == 0
        assert sleeper.wait(timeout=10) == -9
        assert not cgroup.exists()
        assert str(mount_point) not in Path("/proc/mounts").read_text()
        assert str(image) not in loop_listing()
        assert not image.exists() and not mount_point.exists()
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True)
        subprocess.run(["losetup", "-d", device], capture_output=True)
        if cgroup.exists():
            cgroup.rmdir()


def test_signal_during_teardown_is_held_until_cleanup_finished(tmp_path, monkeypatch):
    """A SIGTERM that arrives while the machine is being put back runs only afterwards."""
    from stallbench.core import journal as journal_module

    (tmp_path / "state").mkdir()
    results = tmp_path / "results"
    original = journal_module.UNDO_ACTIONS["sysctl"]

    def undo_then_signal(action):
        os.kill(os.getpid(), signal.SIGTERM)   # lands in the middle of the teardown
        original(action)

    monkeypatch.setitem(journal_module.UNDO_ACTIONS, "sysctl", undo_then_signal)
    before = sysctl("vm.dirty_background_ratio")
    seen_by_handler = []

    def handler(signum, frame):
        seen_by_handler.append((sysctl("vm.dirty_background_ratio"), nothing_left(results)))

    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        with Journal(tmp_path / "state") as journal:
            settings = VariantSettings(name="t", fs="ext2",
                                       sysctls={"vm.dirty_background_ratio": "4"})
            with environment(settings, journal, TinyWorkload(), results):
                pass
    finally:
        signal.signal(signal.SIGTERM, old_term)
    # the handler ran once, after the loop filesystem (set up before the sysctl) was gone
    assert seen_by_handler == [(before, [])]
