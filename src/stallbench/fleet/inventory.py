"""The hosts of a fleet run: the inventory, each host's settings, which variants run where.

The inventory is read by `ansible-inventory --list` (INI, YAML, scripts: whatever Ansible reads).
A list of SSH targets becomes a small generated inventory. Host variables that stallbench reads
(all optional, literal values):

  stallbench                  the command on the host (default: the stallbench that
                              `stallbench deploy` installed in stallbench_venv, else
                              `stallbench` on PATH), e.g. "/opt/sb/.venv/bin/stallbench"
  stallbench_venv             where `stallbench deploy` installs this controller's stallbench
                              (default /opt/stallbench/VERSION, this controller's version)
  stallbench_python           the Python that `stallbench deploy` makes that venv with (default
                              python3; the controller's major.minor, as the wheels are)
  stallbench_workdir          where plans and results live on the host
                              (default /var/lib/stallbench/fleet, root's alone: every folder
                              on the path must be root's and writable by no one else; one
                              subdirectory per fleet run, removed once its runs are pulled)
  stallbench_keep_results     keep the host's folder of a fleet run once its runs are pulled
                              (default false: removed, data files and all)
  stallbench_environment      environment for stallbench on the host (e.g. STALLBENCH_STATE_DIR)
  stallbench_boot_id_path     the boot id file (default /proc/sys/kernel/random/boot_id)
  stallbench_reboot_command   the reboot (default: Ansible's; `systemctl kexec` for kexec)
  stallbench_grub_reboot      the grub-reboot program (default grub-reboot)
  stallbench_kexec            the kexec program (default kexec)
  stallbench_run_overhead     seconds of setup per run, added to the planned time before the
                              one status check (default 10)
  stallbench_reconnect_timeout  how long to keep trying a host that stopped answering (600)
  stallbench_reboot_timeout   how long a reboot may take (600)
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.errors import UsageError
from ..core.version import __version__
from ..plan.plan import Plan
from ..settings.hosts import TARGET_RE
from .ansible import list_inventory

DEFAULT_WORKDIR = "/var/lib/stallbench/fleet"
DEFAULT_BOOT_ID = "/proc/sys/kernel/random/boot_id"
DEFAULT_VENV = f"/opt/stallbench/{__version__}"
# without a `stallbench` host variable: the deployed venv's stallbench ($0), else PATH's
DEPLOYED_OR_PATH = 'if [ -x "$0" ]; then exec "$0" "$@"; fi; exec stallbench "$@"'


@dataclass
class HostConfig:
    name: str
    command: list[str]
    workdir: str
    environment: dict[str, str]
    boot_id_path: str = DEFAULT_BOOT_ID
    reboot_command: str | None = None
    grub_reboot: str = "grub-reboot"
    kexec: str = "kexec"
    run_overhead_s: float = 10.0
    reconnect_timeout_s: float = 600.0
    reboot_timeout_s: float = 600.0
    variants: list[str] = field(default_factory=list)
    venv: str = DEFAULT_VENV
    python: str = "python3"
    keep_results: bool = False


@dataclass
class Inventory:
    path: Path
    hosts: dict[str, dict[str, Any]]          # name -> host variables
    groups: dict[str, list[str]]              # group -> its hosts (children expanded)
    aliases: dict[str, str] = field(default_factory=dict)  # SSH target as written -> name

    def expand(self, name: str) -> list[str]:
        if name in self.hosts:
            return [name]
        if name in self.aliases:
            return [self.aliases[name]]
        if name in self.groups:
            return list(self.groups[name])
        return []


def targets_inventory(targets: list[str], directory: Path) -> tuple[Path, dict[str, str]]:
    """SSH targets ([user@]host[:port]) -> a YAML (JSON) inventory file and target -> name."""
    parsed = [TARGET_RE.match(t) for t in targets]
    hosts_count: dict[str, int] = {}
    for match in parsed:
        hosts_count[match.group("host")] = hosts_count.get(match.group("host"), 0) + 1
    hosts: dict[str, dict[str, Any]] = {}
    aliases: dict[str, str] = {}
    for target, match in zip(targets, parsed, strict=True):
        host, user, port = match.group("host"), match.group("user"), match.group("port")
        name = host.strip("[]") if hosts_count[host] == 1 else f"{host.strip('[]')}_{port or 22}"
        if name in hosts:
            raise UsageError(f"hosts: {target!r} names the same host as another target")
        variables: dict[str, Any] = {"ansible_host": host.strip("[]")}
        if user:
            variables["ansible_user"] = user
        if port:
            variables["ansible_port"] = int(port)
        hosts[name] = variables
        aliases[target] = name
    path = directory / "targets-inventory.json"
    path.write_text(json.dumps({"all": {"hosts": hosts}}, indent=1))
    return path, aliases


def load_inventory(source: Path | list[str], directory: Path) -> Inventory:
    aliases: dict[str, str] = {}
    if isinstance(source, list):
        path, aliases = targets_inventory(source, directory)
    else:
        path = Path(source)
        if not path.exists():
            raise UsageError(f"{path}: no such inventory file (give --hosts INVENTORY or "
                             "hosts = [\"user@host\", ...] in the plan)")
    data = list_inventory(path, directory)
    hostvars = data.get("_meta", {}).get("hostvars", {})
    children: dict[str, list[str]] = {}
    direct: dict[str, list[str]] = {}
    for group, body in data.items():
        if group == "_meta" or not isinstance(body, dict):
            continue
        direct[group] = list(body.get("hosts", []))
        children[group] = list(body.get("children", []))
    groups = {group: _expand_group(group, direct, children, set()) for group in direct}
    names = list(dict.fromkeys([*hostvars, *(h for hs in direct.values() for h in hs)]))
    if not names:
        raise UsageError(f"{path}: the inventory has no hosts")
    return Inventory(path=path, hosts={n: dict(hostvars.get(n, {})) for n in names},
                     groups=groups, aliases=aliases)


def _expand_group(group: str, direct: dict[str, list[str]], children: dict[str, list[str]],
                  seen: set[str]) -> list[str]:
    if group in seen:
        return []
    seen.add(group)
    hosts = list(direct.get(group, []))
    for child in children.get(group, []):
        hosts.extend(_expand_group(child, direct, children, seen))
    return list(dict.fromkeys(hosts))


def host_config(name: str, variables: dict[str, Any]) -> HostConfig:
    def text(key: str, default: str) -> str:
        value = variables.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"inventory host {name}: {key} must be a non-empty string")
        return value

    def number(key: str, default: float) -> float:
        value = variables.get(key, default)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"inventory host {name}: {key} must be a number of seconds, "
                             f"got {value!r}") from None
        if not 0 <= number <= 7 * 86400:
            raise UsageError(f"inventory host {name}: {key} must be between 0 and 604800 s")
        return number

    environment = variables.get("stallbench_environment", {})
    if isinstance(environment, str):
        try:
            environment = json.loads(environment)
        except ValueError:
            environment = None
    if not isinstance(environment, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int)) for k, v in environment.items()):
        raise UsageError(f"inventory host {name}: stallbench_environment must be a mapping of "
                         "variable names to strings")
    given = text("stallbench_venv", DEFAULT_VENV)
    venv = given.rstrip("/")
    parts = PurePosixPath(venv).parts
    if not venv.startswith("/") or "\n" in venv or ".." in parts or len(parts) < 3:
        raise UsageError(f"inventory host {name}: stallbench_venv must be an absolute path of a "
                         f"directory of its own (like {DEFAULT_VENV}), got {given!r}")
    if "stallbench" in variables:
        command = shlex.split(text("stallbench", "stallbench"))
    else:
        command = ["sh", "-c", DEPLOYED_OR_PATH, f"{venv}/bin/stallbench"]
    reboot = variables.get("stallbench_reboot_command")
    keep = variables.get("stallbench_keep_results", False)
    if isinstance(keep, str) and keep.lower() in ("true", "yes", "1", "false", "no", "0"):
        keep = keep.lower() in ("true", "yes", "1")
    if not isinstance(keep, bool):
        raise UsageError(f"inventory host {name}: stallbench_keep_results must be true or "
                         f"false, got {keep!r}")
    return HostConfig(
        name=name, command=command, venv=venv,
        python=text("stallbench_python", "python3"),
        workdir=text("stallbench_workdir", DEFAULT_WORKDIR),
        environment={k: str(v) for k, v in environment.items()},
        boot_id_path=text("stallbench_boot_id_path", DEFAULT_BOOT_ID),
        reboot_command=str(reboot) if reboot else None,
        grub_reboot=text("stallbench_grub_reboot", "grub-reboot"),
        kexec=text("stallbench_kexec", "kexec"),
        run_overhead_s=number("stallbench_run_overhead", 10.0),
        reconnect_timeout_s=number("stallbench_reconnect_timeout", 600.0),
        reboot_timeout_s=number("stallbench_reboot_timeout", 600.0),
        keep_results=keep,
    )


def assign(plan: Plan, inventory: Inventory) -> dict[str, HostConfig]:
    """host name -> its settings and the variants it runs (in plan order)."""
    where = str(plan.source or "plan")
    per_host: dict[str, list[str]] = {}
    for index, variant in enumerate(plan.variants):
        if variant.hosts is None:
            hosts = list(inventory.hosts)
        else:
            hosts = []
            for name in variant.hosts:
                found = inventory.expand(name)
                if not found:
                    raise UsageError(f"{where}: variants[{index}].hosts: {name!r} is neither a "
                                     f"host nor a group of the inventory {inventory.path}")
                hosts.extend(found)
        for host in dict.fromkeys(hosts):
            per_host.setdefault(host, []).append(variant.name)
    by_name = {v.name: v for v in plan.variants}
    configs: dict[str, HostConfig] = {}
    for host, variants in per_host.items():
        booted = [v for v in variants if by_name[v].boot]
        if booted and len(booted) != len(variants):
            plain = next(v for v in variants if not by_name[v].boot)
            raise UsageError(f"{where}: host {host} runs variant {booted[0]!r} with a boot "
                             f"kernel and {plain!r} without: give every variant on that host a "
                             "boot entry (or run them on other hosts)")
        config = host_config(host, inventory.hosts.get(host, {}))
        config.variants = variants
        configs[host] = config
    if not configs:
        raise UsageError(f"{where}: no variant runs on any host")
    return configs
