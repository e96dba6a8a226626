"""Fake fleet hosts for the fleet tests: real sshd instances on loopback addresses.

Each host is an `sshd -D` of Debian's openssh-server on 127.0.0.N with its own host key, log,
work directory and STALLBENCH_STATE_DIR (so the hosts' journals never meet); one client key and
known_hosts per test. Every sshd is journaled (kind "kill", with its start time) before anything
else, so `stallbench cleanup` stops it even after the test process is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

import stallbench
from stallbench.core.journal import Journal, process_start_time

SSHD = "/usr/sbin/sshd"
# the stallbench under test, also over SSH (whose sessions start with sshd's own environment)
STALLBENCH = (f"env PYTHONPATH={Path(stallbench.__file__).resolve().parents[1]} "
              f"{sys.executable} -m stallbench")

needs_fleet = pytest.mark.skipif(
    not Path(SSHD).exists() or shutil.which("rsync") is None
    or not (Path(sys.executable).parent / "ansible-playbook").exists(),
    reason="needs openssh-server, rsync and stallbench[fleet] (Ansible)")


@dataclass
class FakeHost:
    name: str
    address: str
    port: int
    root: Path
    proc: subprocess.Popen | None = None
    entry: object | None = None

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def log(self) -> Path:
        return self.root / "sshd.log"

    def accepted(self) -> list[datetime]:
        """Times of the SSH logins sshd accepted (from its own log)."""
        times = []
        if not self.log.exists():
            return times
        for line in self.log.read_text().splitlines():
            if "Accepted publickey" in line:
                times.append(datetime.strptime(line[:26], "%Y-%m-%dT%H:%M:%S.%f")
                             .replace(tzinfo=UTC))
        return times


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)


class Fleet:
    """Up to a few fake hosts; use as a context manager (every sshd stopped on exit)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.journal = Journal()
        self.key = root / "client_key"
        _keygen(self.key)
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text("")
        self.hosts: dict[str, FakeHost] = {}
        if not Path("/run/sshd").is_dir():       # sshd's privilege separation directory
            self.journal.push("rmdir", path="/run/sshd")
            Path("/run/sshd").mkdir(mode=0o755)

    def add(self, name: str, address: str, start: bool = True,
            sshd_options: tuple[str, ...] = ()) -> FakeHost:
        """A host; `sshd_options`: more sshd_config lines (e.g. SetEnv PATH=...)."""
        root = self.root / name
        for sub in ("work", "state"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        host = FakeHost(name, address, _free_port(address), root)
        _keygen(root / "host_key")
        pub = (root / "host_key.pub").read_text().split()
        with open(self.known_hosts, "a") as f:
            f.write(f"[{address}]:{host.port} {pub[0]} {pub[1]}\n")
        (root / "authorized_keys").write_text((self.key.with_suffix(".pub")).read_text())
        (root / "sshd_config").write_text("\n".join([
            f"ListenAddress {address}:{host.port}", f"HostKey {root / 'host_key'}",
            "PidFile none", "UsePAM no", "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", f"AuthorizedKeysFile {root / 'authorized_keys'}",
            "StrictModes no", "LogLevel VERBOSE", "MaxStartups 50", "MaxSessions 50",
            "Subsystem sftp internal-sftp", *sshd_options, ""]))
        self.hosts[name] = host
        if start:
            self.start(host)
        return host

    def start(self, host: FakeHost) -> None:
        # -E: sshd's own log, each line stamped by the test (ISO time) for the timing checks
        host.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(host.root / "sshd_config")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        host.entry = self.journal.push("kill", pid=host.proc.pid,
                                       start_time=process_start_time(host.proc.pid))
        _stamp_lines(host.proc.stderr, host.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host.address, host.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd for {host.name} did not start: {host.log.read_text()}")

    def kill(self, host: FakeHost) -> None:
        """The host's network goes away: its sshd (listener and sessions) is killed."""
        if host.proc is None:
            return
        os.killpg(host.proc.pid, signal.SIGKILL)
        host.proc.wait(timeout=10)
        self.journal.forget(host.entry)
        host.proc = None

    def inventory(self, path: Path, extra_hosts: dict[str, dict] | None = None,
                  host_vars: dict[str, dict] | None = None, **group_vars) -> Path:
        hosts = {}
        for host in self.hosts.values():
            hosts[host.name] = {
                "ansible_host": host.address, "ansible_port": host.port,
                "stallbench_workdir": str(host.work),
                "stallbench_environment": {"STALLBENCH_STATE_DIR": str(host.state)},
            }
            hosts[host.name].update((host_vars or {}).get(host.name, {}))
        hosts.update(extra_hosts or {})
        variables = {
            "ansible_user": "root", "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} "
                                       "-o StrictHostKeyChecking=yes -o ConnectTimeout=5",
            "ansible_python_interpreter": "/usr/bin/python3",
            "stallbench": STALLBENCH, "stallbench_run_overhead": 2,
            # the tests compare what was pulled with the hosts' own files
            "stallbench_keep_results": True,
            "stallbench_reconnect_timeout": 3, **group_vars,
        }
        path.write_text(json.dumps({"all": {"hosts": hosts, "vars": variables}}, indent=1))
        return path

    def close(self) -> None:
        for host in self.hosts.values():
            if host.proc is not None:
                os.killpg(host.proc.pid, signal.SIGTERM)
                try:
                    host.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(host.proc.pid, signal.SIGKILL)
                    host.proc.wait()
                self.journal.forget(host.entry)
                host.proc = None
        self.journal.undo_all()
        self.journal.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stamp_lines(stream, log: Path) -> None:
    import threading

    def pump() -> None:
        with open(log, "a") as out:
            for line in stream:
                out.write(datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f ") + line)
                out.flush()

    threading.Thread(target=pump, daemon=True).start()


def stallbench_processes(marker: str) -> list[str]:
    """Command lines of processes whose command line or environment names `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(f"{pid} {cmdline}")
    return found
