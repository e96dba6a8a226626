"""Fleet mode end to end: real sshd "hosts" on 127.0.0.N, real Ansible, real rsync, real runs.

Oracles: the hosts' own files (each pulled ops.parquet equals the one the host wrote), sshd's own
log (no login during a host's measurement), the kernel's boot id, numpy counts over the pulled
rows, and the stub reboot's own log of boot ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fleet_support import Fleet, needs_fleet, stallbench_processes

from stallbench import __version__

pytestmark = [pytest.mark.fleet, pytest.mark.root, needs_fleet, pytest.mark.slow]

RANDREAD = """workload = "randread"
duration = "{duration}"
warmup = "0s"
iterations = {iterations}
monitors = "none"
[workload_options]
file_size = "4M"
"""


def sb(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=timeout)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def remote_runs(host_work: Path) -> list[Path]:
    return sorted(host_work.glob("*/results/*/*/*/run.json"))


def pulled(results: Path) -> list[dict]:
    runs = []
    for path in sorted(results.glob("*/*/*/run.json")):
        meta = json.loads(path.read_text())
        meta["_path"] = path.parent
        runs.append(meta)
    return runs


def mine(fleet: Fleet) -> list[str]:
    """Processes of this test's hosts (their sshd listeners aside)."""
    return [p for p in stallbench_processes(str(fleet.root)) if "[listener]" not in p]


def assert_nothing_left(fleet: Fleet, disk_full: tuple[str, ...] = ()) -> None:
    """No process, Ansible job or journal left; on a host whose disk filled (`disk_full`) the
    one journal entry a failed undo keeps for `stallbench cleanup` to retry: merging the run's
    spools into ops.parquet once there is room (nothing recorded is lost)."""
    deadline = time.monotonic() + 60
    while mine(fleet) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert mine(fleet) == []
    leftover_ansible = [p for p in stallbench_processes("ansible_async") if "async_wrapper" in p]
    assert leftover_ansible == []
    for host in fleet.hosts.values():
        journals = sorted(host.state.glob("journal-*.json"))
        if host.name in disk_full and journals:
            entries = [e for j in journals for e in json.loads(j.read_text())["entries"]]
            assert {e["kind"] for e in entries} == {"finalize_run"}, entries
            assert all(any(Path(e["path"], ".spool").iterdir()) for e in entries), entries
            continue
        assert list(host.state.glob("journal-*")) == [], host.name


@pytest.fixture
def fleet(tmp_path):
    with Fleet(tmp_path / "fleet") as f:
        yield f
    assert stallbench_processes(str(tmp_path / "fleet")) == []


def test_three_hosts_every_run_pulled_one_comparison_compare_and_check_per_host(fleet,
                                                                                 tmp_path):
    for i, name in enumerate(("h1", "h2", "h3")):
        fleet.add(name, f"127.0.0.{i + 2}")
    inventory = fleet.inventory(tmp_path / "inventory.yml", stallbench_run_overhead=3)
    plan = tmp_path / "plan.toml"
    plan.write_text(RANDREAD.format(duration="1s", iterations=2) + """
[[variants]]
name = "A"
hosts = ["h1", "h2"]

[[variants]]
name = "B"
hosts = ["h2", "h3"]
""")
    results = tmp_path / "results"
    started = time.monotonic()
    run = sb("run", "--plan", str(plan), "--hosts", str(inventory), "--results", str(results))
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    print(f"3-host fleet run: {elapsed:.1f} s")

    # every host's runs, pulled: RESULTS/<variant>/<workload>/<n>, host and boot id recorded
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    runs = pulled(results)
    by_host = {(m["variant"], m["host"]) for m in runs}
    assert sorted(by_host) == [("A", "h1"), ("A", "h2"), ("B", "h2"), ("B", "h3")]
    assert len(runs) == 8 and all(m["status"] == "complete" for m in runs)
    assert sorted(int(m["_path"].name) for m in runs if m["variant"] == "A") == [1, 2, 3, 4]
    assert all(m["boot_id"] == boot_id and m["kernel"]["release"] == os.uname().release
               for m in runs)
    for meta in runs:
        original = Path(meta["fleet"]["remote_path"])
        assert original.is_relative_to(fleet.hosts[meta["host"]].work)
        assert pq.read_table(meta["_path"] / "ops.parquet").equals(
            pq.read_table(original / "ops.parquet"))
        assert json.loads((original / "run.json").read_text())["samples"] == meta["samples"]

    # one comparison of everything, hosts apart
    assert run.stdout.count("stallbench compare") == 1
    for label in ("baseline  A@h1", "candidate A@h2", "candidate B@h2", "candidate B@h3"):
        assert label in run.stdout
    assert "shown per host" in run.stderr
    for host in ("h1", "h2", "h3"):
        assert f"  {host}: ok:" in run.stdout

    # nothing of ours touched a host while it measured: sshd's own log of logins
    for name, host in fleet.hosts.items():
        mine = [m for m in runs if m["host"] == name]
        first = min(utc(m["start_utc"]) for m in mine)
        last = max(utc(m["end_utc"]) for m in mine)
        logins = host.accepted()
        during = [t for t in logins if first < t < last]
        assert during == [], (name, first, last, logins)
        assert any(t < first for t in logins) and any(t > last for t in logins)

    # compare: per host by default and says so; pooled when asked
    split = sb("compare", "A", "B", "--results", str(results), "--format", "json")
    assert split.returncode == 0, split.stderr
    labels = json.loads(split.stdout)["ops"]["read"]["variants"]
    assert sorted(labels) == ["A@h1", "A@h2", "B@h2", "B@h3"]
    assert "A: runs from 2 hosts, shown per host (A@h1, A@h2)" in split.stderr
    pooled = sb("compare", "A", "B", "--results", str(results), "--format", "json",
                "--pool-hosts")
    assert pooled.returncode == 0, pooled.stderr
    variants = json.loads(pooled.stdout)["ops"]["read"]["variants"]
    assert sorted(variants) == ["A", "B"]
    for name in ("A", "B"):
        rows = sum(pq.read_table(m["_path"] / "ops.parquet").num_rows
                   for m in runs if m["variant"] == name)
        assert variants[name]["samples"] == rows
    assert variants["A"]["samples"] == labels["A@h1"]["samples"] + labels["A@h2"]["samples"]

    # check: one host named (same machine both sides), pooled, or refused when ambiguous
    gate = ("--metric", "read:p50", "--max-regression", "50%", "--results", str(results))
    pair = sb("compare", "A@h2", "B@h2", "--results", str(results), "--format", "json")
    change = json.loads(pair.stdout)["ops"]["read"]["variants"]["B@h2"]["change"]["p50_ns"]
    same_host = sb("check", "A@h2", "B@h2", *gate)
    expected = 0 if change["high"] <= 0.5 else (1 if change["low"] > 0.5 else 125)
    assert same_host.returncode == expected, same_host.stdout + same_host.stderr
    assert same_host.stdout.startswith(f"read:p50  {change['change'] * 100:+.1f}%")
    assert sb("check", "A", "B", "--pool-hosts", *gate).returncode in (0, 1, 125)
    ambiguous = sb("check", "A", "B", *gate)
    assert ambiguous.returncode == 2
    assert ambiguous.stderr.count("\n") == 1 and "A@h1" in ambiguous.stderr \
        and "--pool-hosts" in ambiguous.stderr
    missing = sb("check", "A@h3", "B@h3", *gate)
    assert missing.returncode == 2 and "no runs from host 'h3'" in missing.stderr
    assert_nothing_left(fleet)


def _mount_small_tmpfs(fleet: Fleet, path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    fleet.journal.push("umount", target=str(path))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)


def _when_running(work: Path, action, stop: threading.Event) -> None:
    """Once the host's first run is measuring (run.json says running and its workers have
    spooled operations), act."""
    while not stop.is_set():
        for path in work.glob("*/results/*/*/*/run.json"):
            try:
                meta = json.loads(path.read_text())
                spooled = any(p.stat().st_size > 0
                              for p in (path.parent / ".spool").glob("*.spool"))
            except (OSError, ValueError):
                continue
            if meta.get("status") == "running" and spooled:
                time.sleep(0.3)
                action(meta)
                return
        time.sleep(0.1)


def test_failures_name_the_host_keep_the_others_and_leave_nothing_running(fleet, tmp_path):
    ok = fleet.add("ok", "127.0.0.2")
    lost = fleet.add("lost", "127.0.0.3")
    killed = fleet.add("killed", "127.0.0.4")
    full = fleet.add("full", "127.0.0.5")
    flaky = fleet.add("flaky", "127.0.0.7")
    rebooted = fleet.add("rebooted", "127.0.0.8")
    boot_id = rebooted.root / "boot_id"
    boot_id.write_text("1c0ffee0-0000-4000-8000-000000000001\n")
    _mount_small_tmpfs(fleet, full.work, "6M")
    old_version = _stub(tmp_path / "old-stallbench", 'echo "stallbench 0.0.1"\n')
    same_sshd = {"ansible_host": ok.address, "ansible_port": ok.port}   # another "host" there
    inventory = fleet.inventory(
        tmp_path / "inventory.yml",
        extra_hosts={"gone": {"ansible_host": "127.0.0.6", "ansible_port": 9},  # no sshd
                     "old": {**same_sshd, "stallbench": old_version},
                     "missing": {**same_sshd, "stallbench": "/nonexistent/bin/stallbench"}},
        host_vars={"flaky": {"stallbench_reconnect_timeout": 60},
                   "rebooted": {"stallbench_boot_id_path": str(boot_id)}})
    plan = tmp_path / "plan.toml"
    plan.write_text(RANDREAD.format(duration="3s", iterations=2) + '\n[[variants]]\nname = "A"\n')
    results = tmp_path / "results"
    stop = threading.Event()
    actors = [
        threading.Thread(target=_when_running, args=(lost.work, lambda m: fleet.kill(lost), stop)),
        threading.Thread(target=_when_running,
                         args=(killed.work, lambda m: os.kill(int(m["pid"]), 9), stop)),
        threading.Thread(target=_when_running, args=(flaky.work, lambda m: fleet.kill(flaky),
                                                     stop)),
        threading.Thread(target=_when_running, args=(  # the kernel's boot id changes mid-run
            rebooted.work, lambda m: boot_id.write_text("1c0ffee0-0000-4000-8000-00000000000b\n"),
            stop)),
    ]
    for actor in actors:
        actor.start()
    proc = subprocess.Popen([sys.executable, "-m", "stallbench", "run", "--plan", str(plan),
                             "--hosts", str(inventory), "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_lines = []
    try:
        for line in proc.stdout:
            out_lines.append(line)
            if line.startswith("flaky: not answering"):   # its status check failed: back now
                fleet.start(flaky)
        stderr = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        stop.set()
        for actor in actors:
            actor.join()
        if proc.poll() is None:
            proc.kill()
    out = "".join(out_lines)
    assert proc.returncode == 1, out + stderr
    assert "7 of 9 host(s) failed: full, gone, killed, lost, missing, old, rebooted; the other " \
        "hosts' results are kept" in stderr
    lines = {line.split(":")[0].strip(): line for line in out.splitlines()
             if line.startswith("  ") and ": " in line}
    assert "ok: ok: 2/2 runs complete pulled" in lines["ok"]
    assert "FAILED" in lines["gone"] and "unreachable at start" in lines["gone"]
    assert f"runs stallbench 0.0.1, this controller stallbench {__version__}: install the same " \
        "version" in lines["old"]
    assert "stallbench is not usable there" in lines["missing"] \
        and "/nonexistent/bin/stallbench" in lines["missing"]
    assert "connection lost during segment 1" in lines["lost"] and "nothing pulled" in lines["lost"]
    assert "its stallbench was killed (signal 9) during the run" in lines["killed"]
    assert "disk full on the host" in lines["full"] and "No space left on device" in lines["full"]
    assert "`stallbench cleanup` there: undone: finalize_run" in out
    assert "the host rebooted during the run (boot id 1c0ffee0-0000-4000-8000-000000000001 -> " \
        "1c0ffee0-0000-4000-8000-00000000000b)" in lines["rebooted"]
    assert "  flaky: ok: 2/2 runs complete pulled" in out
    flaky_events = _events(out, "flaky")
    assert "connection lost (" in flaky_events and "back again" in flaky_events
    assert "`stallbench cleanup` there:" in flaky_events

    runs = pulled(results)
    hosts = sorted({m["host"] for m in runs})
    assert hosts == ["flaky", "full", "killed", "ok", "rebooted"]  # lost, gone: nothing
    good = [m for m in runs if m["host"] == "ok"]
    assert len(good) == 2 and all(m["status"] == "complete" for m in good)
    for meta in good:
        assert pq.read_table(meta["_path"] / "ops.parquet").equals(
            pq.read_table(Path(meta["fleet"]["remote_path"]) / "ops.parquet"))
    dead = [m for m in runs if m["host"] == "killed"]
    assert len(dead) == 1 and dead[0]["status"] == "failed"
    assert "killed" in dead[0]["reason"]
    assert "recovered by `stallbench cleanup`" in dead[0]["reason"]
    assert pq.read_table(dead[0]["_path"] / "ops.parquet").num_rows > 0
    # nothing left running on any host; the lost host's stallbench ends its plan by itself
    assert_nothing_left(fleet, disk_full=("full",))
    assert len(remote_runs(lost.work)) == 2
    # Ansible's job file stays on the lost host (it could not be reached to remove it); the
    # test removes it, as the user would when the host is back
    jobs = [p for p in (Path.home() / ".ansible_async").glob("j*")
            if str(fleet.root) in p.read_text(errors="replace")]
    assert jobs and all(str(lost.work) in p.read_text() for p in jobs)
    for job in jobs:
        job.unlink()


def _events(out: str, host: str) -> str:
    """The indented event lines under a host's summary line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {host}: "))
    events = []
    for line in lines[start + 1:]:
        if not line.startswith("      "):
            break
        events.append(line.strip())
    return "\n".join(events)


def _stub(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_boot_entries_reboot_one_boot_per_run_and_a_wrong_kernel_is_refused(fleet, tmp_path):
    release = os.uname().release
    hosts = {}
    for name, address in (("k", "127.0.0.2"), ("wrong", "127.0.0.3")):
        host = fleet.add(name, address)
        boot_id = host.root / "boot_id"
        boot_id.write_text(str(uuid.uuid4()) + "\n")
        grub = _stub(host.root / "grub-reboot", f'echo "$1" >> {host.root}/grub.log\n')
        # the "reboot": a new boot id, as the kernel gives after a real one
        reboot = _stub(host.root / "reboot", f"cat /proc/sys/kernel/random/uuid > {boot_id}\n"
                       f"cat {boot_id} >> {host.root}/boot_ids.log\n")
        hosts[name] = {"stallbench_boot_id_path": str(boot_id), "stallbench_grub_reboot": grub,
                       "stallbench_reboot_command": reboot}
    inventory = fleet.inventory(tmp_path / "inventory.yml")
    data = json.loads(inventory.read_text())
    for name, variables in hosts.items():
        data["all"]["hosts"][name].update(variables)
    inventory.write_text(json.dumps(data))
    plan = tmp_path / "plan.toml"
    plan.write_text(RANDREAD.format(duration="0.5s", iterations=1) + f"""
[[variants]]
name = "K1"
hosts = ["k"]
boot = {{ entry = "stallbench-test-1", release = "{release}" }}

[[variants]]
name = "K2"
hosts = ["k"]
boot = {{ entry = "stallbench-test-2", release = "{release}" }}

[[variants]]
name = "KX"
hosts = ["wrong"]
boot = {{ entry = "stallbench-test-x", release = "0.0-not-this-kernel" }}
""")
    results = tmp_path / "results"
    run = sb("run", "--plan", str(plan), "--hosts", str(inventory), "--results", str(results))
    assert run.returncode == 1, run.stdout + run.stderr
    k, wrong = fleet.hosts["k"].root, fleet.hosts["wrong"].root
    # one-shot boot entries in plan order, one boot per run (the A B A B order over iterations:
    # tests/fleet/test_fleet_plan.py::test_boot_variants_get_one_segment_per_boot_interleaved)
    assert (k / "grub.log").read_text().split() == ["stallbench-test-1", "stallbench-test-2"]
    boots = (k / "boot_ids.log").read_text().split()
    assert len(set(boots)) == 2
    runs = sorted((m for m in pulled(results) if m["host"] == "k"),
                  key=lambda m: m["fleet"]["segment"])
    assert [m["variant"] for m in runs] == ["K1", "K2"]
    assert [m["boot_id"] for m in runs] == boots          # each run under its own boot
    assert all(m["status"] == "complete" for m in runs)
    # the wrong kernel: rebooted once, refused, nothing run
    assert len((wrong / "boot_ids.log").read_text().split()) == 1
    assert not any(m["host"] == "wrong" for m in pulled(results))
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("  wrong:"))
    assert "FAILED" in line and "'0.0-not-this-kernel'" in line and "refused" in line
    assert f"uname -r says {release!r}" in line
    assert "1 of 2 host(s) failed: wrong" in run.stderr
    assert_nothing_left(fleet)


def test_ctrl_c_on_the_controller_stops_every_hosts_run_and_pulls_what_it_kept(fleet, tmp_path):
    host = fleet.add("h", "127.0.0.2")
    inventory = fleet.inventory(tmp_path / "inventory.yml")
    plan = tmp_path / "plan.toml"
    plan.write_text(RANDREAD.format(duration="60s", iterations=1) + '\n[[variants]]\nname = "A"\n')
    results = tmp_path / "results"
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "stallbench", "run", "--plan", str(plan),
                             "--hosts", str(inventory), "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    _when_running(host.work, lambda meta: proc.send_signal(2), stop)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert time.monotonic() - started < 55           # the 60 s run did not go on
    assert "SIGINT: stopping stallbench on every host" in out
    assert "stopped on request" in out and "interrupted;" in err
    (meta,) = pulled(results)
    assert meta["status"] == "interrupted" and "SIGTERM" in meta["reason"]
    rows = pq.read_table(meta["_path"] / "ops.parquet").num_rows
    assert rows == sum(meta["samples"].values()) > 0
    assert_nothing_left(fleet)
