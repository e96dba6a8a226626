"""Setting up fleet hosts (issue 23 items 12, 13) on real sshd hosts on 127.0.0.N: `stallbench
deploy` putting the controller's stallbench there, and the Python Ansible's modules run with.

Both hosts' SSH sessions have a broken `python3.13` first on PATH (a pyenv-like shim that
says "command not found", as root's login environment on this machine kind has), which is what
Ansible's interpreter discovery takes first. One deploy and one fleet run serve both items (a
deploy installs ~430 MB with pip: the cost of this test)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from fleet_support import STALLBENCH, Fleet, needs_fleet, stallbench_processes

import stallbench

pytestmark = [pytest.mark.fleet, pytest.mark.root, needs_fleet, pytest.mark.slow]

SHIM_MESSAGE = "pyenv: python3.13: command not found"
PLAN = """workload = "randread"
duration = "1s"
monitors = "none"
[workload_options]
file_size = "4M"
[[variants]]
name = "A"
"""


def sb(*args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **env})


def _host_lines(out: str) -> dict[str, str]:
    """host -> its summary line and the event lines under it."""
    found: dict[str, str] = {}
    current = None
    for line in out.splitlines():
        if line.startswith("  ") and not line.startswith("   ") and ": " in line:
            current = line.split(":")[0].strip()
            found[current] = line
        elif line.startswith("      ") and current:
            found[current] += "\n" + line
    return found


def _versions(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({d.metadata['Name'].lower():"
            " d.version for d in m.distributions()}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


@pytest.fixture
def fleet(tmp_path):
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3.13"
    shim.write_text(f'#!/bin/sh\necho "{SHIM_MESSAGE}" >&2\necho >&2\nexit 127\n')
    shim.chmod(0o755)
    path = f"SetEnv PATH={shims}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    with Fleet(tmp_path / "fleet") as f:
        f.add("h1", "127.0.0.2", sshd_options=(path,))
        f.add("h2", "127.0.0.3", sshd_options=(path,))
        f.shim = shim
        yield f
    assert stallbench_processes(str(tmp_path / "fleet")) == []


def _inventory(fleet: Fleet, path: Path, hosts: dict[str, dict]) -> Path:
    """Only these hosts, with these variables; no `stallbench` unless a host names it."""
    fleet.inventory(path, host_vars=hosts, ansible_python_interpreter="auto_silent")
    data = json.loads(path.read_text())
    del data["all"]["vars"]["stallbench"]
    data["all"]["hosts"] = {k: v for k, v in data["all"]["hosts"].items() if k in hosts}
    path.write_text(json.dumps(data))
    return path


def _deployed_exactly(venv: Path) -> None:
    """The venv holds this very code (file for file), imported from there, and the
    controller's versions of what it needs, and nothing it does not."""
    assert subprocess.run([str(venv / "bin/stallbench"), "--version"], capture_output=True,
                          text=True).stdout.strip() == f"stallbench {stallbench.__version__}"
    source = Path(stallbench.__file__).resolve().parent
    site, = venv.glob("lib/python3*/site-packages/stallbench")
    mine = {p.relative_to(source): p.read_bytes() for p in source.rglob("*.py")}
    theirs = {p.relative_to(site): p.read_bytes() for p in site.rglob("*.py")}
    assert mine == theirs
    versions = _versions(venv / "bin/python")
    for dep in ("numpy", "pyarrow", "scipy", "matplotlib", "rich", "pip"):
        assert versions[dep] == version(dep), dep
    assert "ansible-core" not in versions and "pytest" not in versions


def test_deploy_then_a_run_whose_discovered_python_does_not_run(fleet, tmp_path):
    """Item 12: `stallbench deploy` to h1, which has no stallbench: a venv of its own with the
    controller's stallbench, from wheels made here (pip runs there with --no-index); again: up
    to date. The fleet run after it, with no `stallbench` host variable, runs that venv's
    stallbench (before: no such command, and the run failed its probe).
    Item 13: h1 leaves the interpreter to Ansible's discovery, which finds the broken
    python3.13: the host's /usr/bin/python3 is used and the summary says so. h2 names the
    broken one in the inventory: refused before anything starts, naming it, the host and the
    variable to set. (Before: "start: Module result deserialization failed: No start of json
    char found" for both.)"""
    h1 = fleet.hosts["h1"]
    venv = h1.root / "opt" / "sb"
    cache = tmp_path / "wheel-cache"
    targets = _inventory(fleet, tmp_path / "deploy.json", {
        "h1": {"stallbench_venv": str(venv)},
        "h2": {"stallbench_venv": str(fleet.hosts["h2"].root / "sb"),
               "stallbench_python": str(fleet.shim)}})       # refused before the wheels
    refused = f"  h2: FAILED: deploy: {fleet.shim} does not run ({SHIM_MESSAGE})"
    try:
        out = sb("deploy", "--hosts", str(targets), STALLBENCH_WHEEL_CACHE=str(cache))
        assert out.returncode == 1, out.stdout + out.stderr
        assert f"  h1: ok: installed stallbench {stallbench.__version__} in {venv}" \
            in out.stdout, out.stdout
        assert refused in out.stdout
        assert "deploy: 1 of 2 host(s) failed: h2" in out.stderr
        assert not (fleet.hosts["h2"].root / "sb").exists()
        _deployed_exactly(venv)
        again = sb("deploy", "--hosts", str(targets), STALLBENCH_WHEEL_CACHE=str(cache))
        assert again.returncode == 1, again.stdout + again.stderr
        assert f"  h1: ok: stallbench {stallbench.__version__} in {venv}: up to date" \
            in again.stdout and refused in again.stdout
        # no other stallbench on h1: the run can only use the deployed one
        ssh = subprocess.run(["ssh", "-i", str(fleet.key), "-p", str(h1.port), "-o",
                              f"UserKnownHostsFile={fleet.known_hosts}", "-o", "BatchMode=yes",
                              f"root@{h1.address}", "command -v stallbench || echo none"],
                             capture_output=True, text=True, timeout=60)
        assert ssh.stdout.strip() == "none", ssh.stdout + ssh.stderr

        both = _inventory(fleet, tmp_path / "inventory.json", {
            "h1": {"stallbench_venv": str(venv)},
            "h2": {"stallbench": STALLBENCH, "ansible_python_interpreter": str(fleet.shim)}})
        plan = tmp_path / "plan.toml"
        plan.write_text(PLAN)
        results = tmp_path / "results"
        run = sb("run", "--plan", str(plan), "--hosts", str(both), "--results", str(results))
        assert run.returncode == 1, run.stdout[-3000:] + run.stderr
        hosts = _host_lines(run.stdout)
        assert "h1: ok: 1/1 runs complete pulled" in hosts["h1"], run.stdout
        assert "Ansible's interpreter discovery found " in hosts["h1"]
        assert f"python3.13, which does not run ({SHIM_MESSAGE}): using /usr/bin/python3 " \
            "(set ansible_python_interpreter for h1 in the inventory to choose)" in hosts["h1"]
        assert "h2: FAILED: 0/0 runs complete pulled (A; 0 status check(s)): no Python for " \
            f"Ansible's modules on h2: ansible_python_interpreter {fleet.shim} does not run " \
            f"({SHIM_MESSAGE}); set ansible_python_interpreter for h2 in the inventory" \
            in hosts["h2"], run.stdout
        metas = [json.loads(p.read_text()) for p in results.glob("A/randread/*/run.json")]
        assert [(m["host"], m["status"], m["stallbench_version"]) for m in metas] \
            == [("h1", "complete", stallbench.__version__)]
        for host in fleet.hosts.values():
            assert list(host.state.glob("journal-*")) == [], host.name
    finally:
        shutil.rmtree(venv, ignore_errors=True)
        shutil.rmtree(f"{venv}.wheels", ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
