"""Run generated playbooks with the real `ansible-playbook` and read its JSON callback.

A playbook is written as JSON (valid YAML); values that differ per host go in an extra-vars
file, so nothing from a plan or a host is pasted into the playbook text. Ansible renders every
string of a playbook and of a plain extra-vars file as a Jinja template on the controller, as
root (`{{ lookup('pipe', ...) }}` runs a command there): the extra-vars file is YAML whose
every string is tagged `!unsafe`, so a value travels as the text it is and the playbook names
it (`{{ sb_job }}`). Every playbook here has one play for one host (`--limit`): each host keeps
its own timeline (a host lost mid-run or rebooting holds up no other).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import UsageError

INSTALL_HINT = "pip install 'stallbench[fleet]' (Ansible, with the ansible.posix collection)"

# SSH with no ControlPersist: an idle master connection would sit on the measured host for the
# whole run, and linger on the controller after it. Keep-alives: a host that kexecs (or loses
# power) never closes its connections, and Ansible's reboot waited on the dead one for ever.
SSH_ARGS = "-o ControlMaster=no -o ControlPath=none -o ServerAliveInterval=10 " \
    "-o ServerAliveCountMax=3"


def find_tool(name: str) -> str:
    """ansible-playbook / ansible-inventory: next to this Python first (a venv), then PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if not found:
        raise UsageError(f"fleet mode needs {name}: {INSTALL_HINT}")
    return found


def check_ansible() -> None:
    """Refuse early, with the fix, when Ansible or its synchronize module is missing."""
    find_tool("ansible-playbook")
    try:
        import ansible_collections.ansible.posix  # noqa: F401
    except ImportError:
        if not _collection_installed():
            raise UsageError("fleet mode needs the ansible.posix collection (synchronize): "
                             f"{INSTALL_HINT}") from None


def _collection_installed() -> bool:
    for root in (Path.home() / ".ansible/collections", Path("/usr/share/ansible/collections")):
        if (root / "ansible_collections/ansible/posix").is_dir():
            return True
    return False


_FALSE = ("0", "false", "no", "off", "n", "f")


def host_key_warning() -> str | None:
    """One line when the user's environment turned Ansible's host key checking off (it then
    applies to every playbook here: a machine posing as a host gets root's commands)."""
    value = os.environ.get("ANSIBLE_HOST_KEY_CHECKING")
    if value is None or value.strip().lower() not in _FALSE:
        return None
    return (f"stallbench: ANSIBLE_HOST_KEY_CHECKING={value} in the environment: the hosts' SSH "
            "keys are not checked, so a machine posing as a host gets the plan and root's "
            "commands; unset it to check them")


def ansible_env(local_tmp: Path, forks: int = 1) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_SSH_ARGS": SSH_ARGS,
        "ANSIBLE_PIPELINING": "1",           # one SSH exec per module, no temp files
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCAL_TEMP": str(local_tmp),
        "ANSIBLE_FORKS": str(max(1, min(forks, 50))),
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "ANSIBLE_SYSTEM_WARNINGS": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1",
        "ANSIBLE_PYTHON_INTERPRETER": env.get("ANSIBLE_PYTHON_INTERPRETER", "auto_silent"),
    })
    env.pop("ANSIBLE_STDOUT_CALLBACKS", None)
    return env


@dataclass
class HostResult:
    """What one playbook did on one host."""

    host: str
    state: str = "ok"                 # ok | failed | unreachable | error
    message: str = ""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)   # task name -> result

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def task(self, name: str) -> dict[str, Any]:
        return self.tasks.get(name, {})


class Runner:
    """Runs playbooks for the hosts of one fleet run; files go under `directory`."""

    def __init__(self, inventory: Path, directory: Path):
        self.inventory = inventory
        self.directory = directory
        self.playbook = find_tool("ansible-playbook")
        (directory / "tmp").mkdir(parents=True, exist_ok=True)
        self._counter = 0
        self._lock = threading.Lock()

    def run(self, host: str, step: str, tasks: list[dict[str, Any]],
            variables: dict[str, Any] | None = None, timeout: float = 900) -> HostResult:
        with self._lock:
            self._counter += 1
            stem = f"{self._counter:03d}-{_safe(host)}-{step}"
        book = self.directory / f"{stem}.playbook.json"
        extra = self.directory / f"{stem}.vars.yml"
        play = {"name": step, "hosts": host, "gather_facts": False, "tasks": tasks}
        book.write_text(json.dumps([play], indent=1))
        extra.write_text(unsafe_yaml(variables or {}) + "\n")
        argv = [self.playbook, "-i", str(self.inventory), str(book), "--limit", host,
                "-e", f"@{extra}"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=ansible_env(self.directory / "tmp"),
                                  stdin=subprocess.DEVNULL,
                                  start_new_session=True)   # Ctrl-C is ours to handle
        except subprocess.TimeoutExpired:
            return HostResult(host, "error", f"ansible-playbook ({step}) took over {timeout:.0f} s")
        (self.directory / f"{stem}.out.json").write_text(proc.stdout)
        if proc.stderr.strip():
            (self.directory / f"{stem}.stderr.txt").write_text(proc.stderr)
        return parse_output(host, proc.stdout, proc.stderr, proc.returncode)


def unsafe_yaml(value: Any) -> str:
    """`value` (JSON's types) as YAML in flow style with every string tagged `!unsafe`: Ansible
    takes such a string as text, never as a template."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_yaml_string(str(k))}: {unsafe_yaml(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(unsafe_yaml(v) for v in value) + "]"
    if isinstance(value, str):     # Ansible reads `!unsafe ""` as null; "" is no template
        return f"!unsafe {_yaml_string(value)}" if value else '""'
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    raise TypeError(f"no YAML for {type(value).__name__}")


def _yaml_string(text: str) -> str:
    """A YAML double-quoted scalar: JSON's escapes, and every character beyond printable ASCII
    escaped (YAML reads JSON's surrogate pairs and some line breaks differently)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(c if " " <= c <= "~" else
                   f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                   for c in quoted)


def parse_output(host: str, stdout: str, stderr: str, returncode: int) -> HostResult:
    """The ansible.posix.json callback's document -> this host's results, task by task."""
    result = HostResult(host)
    try:
        start = stdout.index("{")
        document = json.loads(stdout[start:])
    except ValueError:
        tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
        return HostResult(host, "error", f"ansible-playbook exit {returncode}: {tail}")
    for play in document.get("plays", []):
        for task in play.get("tasks", []):
            name = task.get("task", {}).get("name", "")
            outcome = task.get("hosts", {}).get(host)
            if outcome is None:
                continue
            result.tasks[name] = outcome
            if outcome.get("unreachable"):
                result.state, result.message = "unreachable", _message(outcome)
            elif outcome.get("failed") and not outcome.get("ignore_errors"):
                result.state, result.message = "failed", f"{name}: {_message(outcome)}"
    stats = document.get("stats", {}).get(host, {})
    if result.state == "ok" and stats.get("unreachable"):
        result.state, result.message = "unreachable", "unreachable"
    if result.state == "ok" and returncode not in (0,) and not result.tasks:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        result.state, result.message = "error", f"ansible-playbook exit {returncode}: {tail}"
    return result


_SSH_NOISE = re.compile(r"^(Shared connection|Connection) to \S+ closed\.$")


def _message(outcome: dict[str, Any]) -> str:
    for key in ("stderr", "stdout", "msg"):
        text = outcome.get(key)
        if isinstance(text, str) and text.strip():
            lines = [line.strip() for line in text.strip().splitlines()
                     if line.strip() and not _SSH_NOISE.match(line.strip())]
            if lines:
                return lines[-1][:500]
    if "rc" in outcome:
        return f"exit code {outcome['rc']}"
    return "failed"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:60]


def list_inventory(inventory: Path, directory: Path) -> dict[str, Any]:
    """`ansible-inventory --list`: the real parser, for INI, YAML and inventory scripts."""
    tool = find_tool("ansible-inventory")
    try:
        proc = subprocess.run([tool, "-i", str(inventory), "--list"], capture_output=True,
                              text=True, timeout=120, env=ansible_env(directory / "tmp"),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{inventory}: ansible-inventory took over 120 s") from None
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    if proc.returncode != 0 or not isinstance(data, dict):
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise UsageError(f"{inventory}: not a usable Ansible inventory "
                         f"({lines[-1].strip() if lines else 'no output'})")
    return data
