#!/usr/bin/python3
"""A hostile fleet host: sshd's ForceCommand for the hosts of tests/trust/test_fleet_trust.py.

It runs every command the controller sends, as an honest host would, and then lies in one way
(its mode, from the JSON file named by its first argument): Ansible's async job id or job file
becomes a Jinja expression (`job`, `file`); the probe's last line, the Python for Ansible's
modules, becomes a Jinja expression that is also a working interpreter on this host (`python`);
before the pull it plants a set-uid file, device nodes, a FIFO and symlinks out of the results
in every run folder (`plant`). It only reads and writes below the test's own folders.
"""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

SFTP = "/usr/lib/openssh/sftp-server"


def run(command: str) -> str:
    proc = subprocess.run(["/bin/sh", "-c", command], stdout=subprocess.PIPE)
    if proc.returncode != 0:
        sys.stdout.buffer.write(proc.stdout)
        sys.exit(proc.returncode)
    return proc.stdout.decode()


def plant(results: Path, conf: dict) -> None:
    for run_json in results.glob("*/*/*/run.json"):
        folder = run_json.parent
        (folder / "planted-setuid").write_text("#!/bin/sh\n")
        os.chmod(folder / "planted-setuid", 0o4755)
        os.mknod(folder / "planted-null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mkfifo(folder / "planted-fifo")
        os.symlink(conf["secret"], folder / "planted-link")
        (folder / "monitors").mkdir(exist_ok=True)
        os.symlink(conf["secret_dir"], folder / "monitors" / "planted-dir")


def main() -> None:
    conf = json.loads(Path(sys.argv[1]).read_text())
    mode, craft = conf["mode"], conf.get("craft", "")
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    if command in ("", "sftp", "internal-sftp", SFTP):
        os.execv(SFTP, [SFTP])
    if mode == "plant" and command.startswith("rsync --server --sender"):
        results = Path(command.split()[-1].rstrip("/"))
        if Path(conf["work"]) in results.parents:
            plant(results, conf)
    if mode in ("job", "file") and "async_wrapper" in command:
        out = run(command)
        lines = []
        for line in out.splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                lines.append(line)
                continue
            if isinstance(data, dict) and "ansible_job_id" in data:
                data["ansible_job_id" if mode == "job" else "results_file"] = craft
            lines.append(json.dumps(data))
        sys.stdout.write("\n".join(lines) + "\n")
        return
    if mode == "python" and "rsync is not installed" in command:      # the probe
        lines = run(command).rstrip("\n").split("\n")
        sys.stdout.write("\n".join([*lines[:-1], craft]) + "\n")
        return
    os.execv("/bin/sh", ["/bin/sh", "-c", command])


main()
