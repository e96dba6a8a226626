"""Fleet hosts on the other side of a trust boundary (issue 34 items 1-5): real sshd hosts on
127.0.0.N whose sshd runs every command through tests/trust/fleet_hostile.py, which answers with
crafted values, as a compromised host would; hosts whose work folder another local user made
first; and the user's environment turning host key checking off.

Oracles: files the crafted Jinja would create on the controller (a command run there as root),
the kinds and modes of what the pull wrote (lstat), the secret file's own link count and text,
the folders' own contents, rsync's own list of what it transferred.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_support import Fleet, needs_fleet, stallbench_processes

import stallbench

pytestmark = [pytest.mark.fleet, pytest.mark.root, needs_fleet, pytest.mark.slow]

HOSTILE = Path(__file__).with_name("fleet_hostile.py")
SOURCE = str(Path(stallbench.__file__).resolve().parents[1])   # the code under test
PLAN = """workload = "randread"
duration = "0.5s"
monitors = "none"
[workload_options]
file_size = "1M"
[[variants]]
name = "A"
"""


def test_crafted_host_values_run_nothing_here_and_the_pull_takes_regular_files_only(tmp_path):
    here = tmp_path / "controller"           # the controller's working directory
    here.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("SECRET of the controller\n")
    secret_dir = tmp_path / "secret-dir"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("SECRET key\n")
    interpreter = tmp_path / "py"             # a working Python whose path is a template
    interpreter.mkdir()
    jinja_python = interpreter / "{{ lookup('pipe', 'touch pwned-python') }}"
    jinja_python.symlink_to("/usr/bin/python3")
    crafts = {
        "job": f'{{{{ lookup("pipe", "touch {here}/pwned-job") }}}}',
        "file": f'/root/.ansible_async/{{{{ lookup("pipe", "touch {here}/pwned-file") }}}}',
        "python": f'"{jinja_python}"',
    }
    with Fleet(tmp_path / "fleet") as fleet:
        for index, mode in enumerate(("job", "file", "python", "plant")):
            conf = tmp_path / f"hostile-{mode}.json"
            root = fleet.root / mode
            conf.write_text(json.dumps({"mode": mode, "craft": crafts.get(mode, ""),
                                        "work": str(root / "work"), "secret": str(secret),
                                        "secret_dir": str(secret_dir)}))
            fleet.add(mode, f"127.0.0.{index + 2}",
                      sshd_options=(f"ForceCommand {sys.executable} {HOSTILE} {conf}",))
        # item 3: a work folder another user made first, and one under a folder anyone writes
        squatted = tmp_path / "squatted"
        squatted.mkdir(mode=0o755)
        os.chown(squatted, 65534, 65534)              # nobody's
        open_parent = tmp_path / "open"
        open_parent.mkdir()
        open_parent.chmod(0o777)                      # world-writable, not sticky
        for index, name in enumerate(("squatted", "open")):
            fleet.add(name, f"127.0.0.{index + 6}")
        inventory = fleet.inventory(tmp_path / "inventory.yml", host_vars={
            "plant": {"stallbench_keep_results": False},
            "squatted": {"stallbench_workdir": str(squatted)},
            "open": {"stallbench_workdir": str(open_parent / "work")}})
        plan = tmp_path / "plan.toml"
        plan.write_text(PLAN)
        results = tmp_path / "results"
        run = subprocess.run([sys.executable, "-m", "stallbench", "run", "--plan", str(plan),
                              "--hosts", str(inventory), "--results", str(results)],
                             capture_output=True, text=True, timeout=150, cwd=here,
                             env={**os.environ, "PYTHONPATH": SOURCE,
                                  "ANSIBLE_HOST_KEY_CHECKING": "False"})
        out = run.stdout + run.stderr
        jobs = [p for p in (Path.home() / ".ansible_async").glob("j*")
                if str(fleet.root) in p.read_text(errors="replace")]
        for job in jobs:                   # the refused hosts' job files stay there
            job.unlink()
        _wait_for_nothing_left(fleet)

    # item 1: no crafted value became a template on the controller
    assert sorted(p.name for p in here.iterdir() if p.name.startswith("pwned")) == [], out
    assert run.returncode == 1, out
    lines = {line.split(":")[0].strip(): line for line in run.stdout.splitlines()
             if line.startswith("  ") and ": " in line}
    assert "the host answered a job id that is not Ansible's" in lines["job"], out
    assert "the host answered a job file that is not Ansible's" in lines["file"], out
    assert "the host answered a Python that is not a plain absolute path" in lines["python"], out
    assert "refused" in lines["job"] and "refused" in lines["python"]
    assert "5 of 6 host(s) failed: file, job, open, python, squatted" in run.stderr

    # item 3: refused before anything was written there
    assert f"workdir: {squatted} belongs to uid 65534, not to root" in lines["squatted"], out
    assert f"workdir: {open_parent} is writable by other users (mode 777)" in lines["open"], out
    assert list(squatted.iterdir()) == [] and list(open_parent.iterdir()) == []
    # item 5: host key checking turned off by the environment is said, in one line
    assert run.stdout.count("ANSIBLE_HOST_KEY_CHECKING=False in the environment") == 1, out

    # item 2: regular files and folders only, none set-id, nothing of the controller's secrets
    (meta_path,) = results.glob("A/randread/*/run.json")
    pulled = meta_path.parent
    for path in [pulled, *pulled.rglob("*")]:
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode), path
        assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID), path
        if stat.S_ISREG(info.st_mode):
            # (the secrets' own words: a kernel config has CONFIG_SECRETMEM)
            data = path.read_bytes()
            assert b"SECRET of the controller" not in data and b"SECRET key" not in data, path
    assert secret.stat().st_nlink == 1 and (secret_dir / "key").stat().st_nlink == 1
    meta = json.loads(meta_path.read_text())
    assert meta["status"] == "complete" and meta["host"] == "plant"
    (note,) = [n for n in meta["notes"] if n.startswith("fleet pull: left out")]
    for name in ("planted-null", "planted-fifo", "planted-link (symlink)",
                 "monitors/planted-dir (symlink)"):
        assert name in note, note
    assert "plant: ok: 1/1 runs complete pulled" in run.stdout

    # item 4: the data files stayed on the host, and the host's folder of the run is gone once
    # pulled (rsync's own list of what it sent: the run's files, nothing of .work)
    (pull_log,) = results.glob(".fleet/*/ansible/*-plant-status.out.json")
    sent = [line.split(" ", 1)[1] for line in _task(pull_log, "pull")["stdout_lines"]
            if line[:1] in "<>ch." and " " in line]       # rsync's %i %n lines
    assert "A/randread/1/ops.parquet" in sent and not any(".work" in p for p in sent), sent
    assert list((tmp_path / "fleet" / "plant" / "work").iterdir()) == []


def _task(playbook_output: Path, name: str) -> dict:
    """One task's result for the one host of an ansible.posix.json document."""
    document = json.loads(playbook_output.read_text())
    for play in document["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                return next(iter(task["hosts"].values()))
    raise KeyError(name)


def _wait_for_nothing_left(fleet: Fleet) -> None:
    """The refused hosts' runs were sent SIGTERM: they end and undo their changes."""
    import time

    deadline = time.monotonic() + 60
    def mine() -> list[str]:
        return [p for p in stallbench_processes(str(fleet.root)) if "[listener]" not in p
                and "sshd" not in p]
    while mine() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert mine() == []
    for host in fleet.hosts.values():
        assert list(host.state.glob("journal-*")) == [], host.name
    assert os.path.isdir(fleet.root)
