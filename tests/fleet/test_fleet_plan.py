"""Fleet plans: the `hosts` and `boot` keys, each host's part of the plan, bad input.

The host's plan is checked by reading it back with the real plan reader; inventories are read
by the real `ansible-inventory`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from stallbench.fleet.subplan import segments
from stallbench.plan.planfile import load_plan

pytestmark = pytest.mark.fleet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HAS_ANSIBLE = (Path(sys.executable).parent / "ansible-inventory").exists()

PLAN = """workload = "randread"
duration = "2s"
iterations = 3
monitors = ["counters"]
hosts = "inventory.ini"

[workload_options]
file_size = "4M"
record-size = "8K"

[[variants]]
name = "a"
hosts = ["db"]
sysctls = { "vm.dirty_ratio" = 5 }

[[variants]]
name = "b"
hosts = ["nvme1"]
memory = "512M"
drop_caches = false
mount_opts = "noatime"
fs = "ext4"
[variants.workload_options]
threads = 2
"""


def sb(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_the_example_fleet_plan_loads():
    plan = load_plan(EXAMPLES / "fleet-kernels.toml")
    assert [v.hosts for v in plan.variants] == [["db"], ["db"], ["nvme1"], ["nvme1"]]
    assert plan.variants[0].boot["release"] == "6.1.0-18-amd64"
    assert plan.variants[2].boot is None


def test_a_hosts_part_of_the_plan_reads_back_as_the_same_variants(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    assert plan.hosts == tmp_path / "inventory.ini"
    (segment,) = segments(plan, ["b"])
    assert segment.iterations == 3 and segment.boot is None and segment.planned_s == 6.0
    host_file = tmp_path / "host.toml"
    host_file.write_text(segment.text)
    host = load_plan(host_file)
    assert host.hosts is None and [v.name for v in host.variants] == ["b"]
    original = asdict(plan.variants[1])
    original["hosts"] = None
    assert asdict(host.variants[0]) == original
    assert host.workload_options == plan.workload_options
    assert (host.duration_s, host.iterations, host.monitors) == (2.0, 3, ["counters"])
    both = segments(plan, ["a", "b"])[0]
    (tmp_path / "both.toml").write_text(both.text)
    again = load_plan(tmp_path / "both.toml")
    assert again.variants[0].sysctls == {"vm.dirty_ratio": "5"}


def test_boot_variants_get_one_segment_per_boot_interleaved(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text('workload = "randread"\niterations = 2\nduration = "1s"\n'
                    '[[variants]]\nname = "k1"\nboot = { entry = "one", release = "6.1" }\n'
                    '[[variants]]\nname = "k2"\nboot = { kexec = "/boot/vmlinuz-6.12", '
                    'initrd = "/boot/initrd.img-6.12", release = "6.12" }\n')
    plan = load_plan(path)
    parts = segments(plan, ["k1", "k2"])
    assert [(s.variants, s.iterations, s.boot["release"]) for s in parts] == [
        (["k1"], 1, "6.1"), (["k2"], 1, "6.12"), (["k1"], 1, "6.1"), (["k2"], 1, "6.12")]
    for part in parts:
        (tmp_path / "p.toml").write_text(part.text)
        assert load_plan(tmp_path / "p.toml").variants[0].boot is None


BAD_PLANS = {
    "hosts = 3": "hosts: expected an inventory file path",
    '[[variants]]\nname = "a"\nhosts = ["a b"]': "is not a host name or SSH target",
    '[[variants]]\nname = "a"\nhosts = []': "expected a list of host names",
    '[[variants]]\nname = "a"\nhosts = ["x", "x"]': "'x' is named twice",
    '[[variants]]\nname = "a"\nboot = { entry = "e", kexec = "/k", release = "1" }':
        "give either entry",
    '[[variants]]\nname = "a"\nboot = { entry = "e" }': "give release",
    '[[variants]]\nname = "a"\nboot = { entry = "e", release = "1", initrd = "/i" }':
        "initrd and append only go with kexec",
    '[[variants]]\nname = "a"\nboot = { entry = "e", release = "1", colour = "x" }':
        "unknown key",
    '[[variants]]\nname = "a"\nboot = "grub"': "expected a table",
    '[[variants]]\nname = "a"\nhosts = ["root@h:99999"]': "port must be between",
}


@pytest.mark.parametrize("body", list(BAD_PLANS))
def test_bad_fleet_keys_are_one_line_exit_2(tmp_path, body):
    path = tmp_path / "plan.toml"
    path.write_text('workload = "randread"\n' + body + "\n")
    result = sb("run", "--plan", str(path), "--results", str(tmp_path / "r"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and BAD_PLANS[body] in result.stderr
    assert f"{path}:" in result.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.skipif(not HAS_ANSIBLE, reason="needs stallbench[fleet] (Ansible)")
@pytest.mark.parametrize("case", ["unknown host", "mixed boot", "no inventory", "not inventory",
                                  "hosts without plan"])
def test_bad_fleet_input_is_one_line_exit_2_and_writes_nothing(tmp_path, case):
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[db]\ndb1 ansible_host=127.0.0.9\ndb2\n[nvme]\nnvme1\n")
    plan = tmp_path / "plan.toml"
    body = 'workload = "randread"\n[[variants]]\nname = "a"\nhosts = ["db"]\n'
    args = ["run", "--plan", str(plan), "--hosts", str(inventory)]
    expected = ""
    if case == "unknown host":
        body += '[[variants]]\nname = "b"\nhosts = ["db9"]\n'
        expected = "variants[1].hosts: 'db9' is neither a host nor a group of the inventory"
    elif case == "mixed boot":
        body += '[[variants]]\nname = "b"\nhosts = ["db1"]\nboot = { entry = "x", release = "1" }\n'
        expected = "host db1 runs variant 'b' with a boot kernel and 'a' without"
    elif case == "no inventory":
        args[-1] = str(tmp_path / "nowhere" / "inv.ini")
        expected = "no such inventory file"
    elif case == "not inventory":
        inventory.write_text("[db\nthis is = not an inventory ]]\n")
        expected = "not a usable Ansible inventory"
    else:
        args = ["run", "--hosts", str(inventory), "randread"]
        expected = "--hosts goes with --plan FILE"
    plan.write_text(body)
    result = sb(*args, "--results", str(tmp_path / "r")) if case != "hosts without plan" \
        else sb(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.skipif(not HAS_ANSIBLE, reason="needs stallbench[fleet] (Ansible)")
def test_ssh_targets_and_groups_resolve_through_ansible_inventory(tmp_path):
    from stallbench.fleet.inventory import assign, load_inventory

    path = tmp_path / "plan.toml"
    path.write_text('workload = "randread"\nhosts = ["root@10.1.2.3", "bench@db2:2222"]\n'
                    '[[variants]]\nname = "a"\nhosts = ["root@10.1.2.3"]\n'
                    '[[variants]]\nname = "b"\n')
    plan = load_plan(path)
    inventory = load_inventory(plan.hosts, tmp_path)
    assert inventory.hosts["10.1.2.3"]["ansible_user"] == "root"
    assert inventory.hosts["db2"]["ansible_port"] == 2222
    hosts = assign(plan, inventory)
    assert {name: cfg.variants for name, cfg in hosts.items()} == {
        "10.1.2.3": ["a", "b"], "db2": ["b"]}
    # an INI inventory with nested groups and host variables, read by ansible-inventory itself
    ini = tmp_path / "inventory.ini"
    ini.write_text("[db]\ndb1 stallbench_run_overhead=3\n[nvme]\nnvme1\n[disks:children]\n"
                   "db\nnvme\n[all:vars]\nstallbench_workdir=/srv/sb\n")
    path.write_text('workload = "randread"\n[[variants]]\nname = "a"\nhosts = ["disks"]\n'
                    '[[variants]]\nname = "b"\nhosts = ["db1"]\n')
    hosts = assign(load_plan(path), load_inventory(ini, tmp_path))
    assert {name: cfg.variants for name, cfg in hosts.items()} == {
        "db1": ["a", "b"], "nvme1": ["a"]}
    assert hosts["db1"].run_overhead_s == 3 and hosts["nvme1"].workdir == "/srv/sb"


@pytest.mark.skipif(not HAS_ANSIBLE, reason="needs stallbench[fleet] (Ansible)")
@pytest.mark.parametrize("venv, expected", [
    ("/", "inventory host db1: stallbench_venv must be an absolute path of a directory of its "
          "own (like /opt/stallbench/"),
    ("/opt/../usr/x", "got '/opt/../usr/x'"),
    (None, "deploy: the following arguments are required: --hosts"),
])
def test_bad_deploy_input_is_one_line_exit_2(tmp_path, venv, expected):
    """`stallbench deploy` refuses a venv path that is no directory of its own (it replaces
    what deploy made there) before any host is touched or any wheel made."""
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(f"[db]\ndb1 ansible_host=127.0.0.9 stallbench_venv={venv}\n")
    result = sb("deploy", *(["--hosts", str(inventory)] if venv else []))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr
    assert "wheels" not in result.stderr
