"""The fleet keys of a plan: `hosts` (top level and per variant) and a variant's `boot`.

Only the shape is checked here, while the plan is read; whether a name is in the inventory is
checked by fleet/inventory.py before anything runs. Imports nothing heavy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..core.errors import UsageError

# [user@]host[:port]; host a name, an IPv4 address or [IPv6]
TARGET_RE = re.compile(r"^(?:(?P<user>[A-Za-z0-9._-]{1,64})@)?"
                       r"(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])"
                       r"(?::(?P<port>[0-9]{1,5}))?$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
BOOT_KEYS = ("entry", "kexec", "initrd", "append", "release")
# the plan schema's `boot` (planschema.plan_json_schema): what check_boot accepts
_ONE_LINE = {"type": "string", "minLength": 1, "maxLength": 4096,
             "pattern": f"^[^{_CONTROL_RE.pattern[1:-1]}]+$"}
BOOT_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["release"],
    "description": "fleet: {entry, release} for grub-reboot, or {kexec, initrd, append, release}",
    "properties": {key: _ONE_LINE for key in BOOT_KEYS},
    "oneOf": [{"required": ["entry"], "not": {"anyOf": [
                  {"required": ["kexec"]}, {"required": ["initrd"]}, {"required": ["append"]}]}},
              {"required": ["kexec"], "not": {"required": ["entry"]}}],
}
MAX_HOSTS = 1000


def check_target(value: object, what: str) -> str:
    if not isinstance(value, str) or not TARGET_RE.match(value):
        raise UsageError(f"{what}: {value!r} is not a host name or SSH target "
                         "(use e.g. \"db1\", \"root@10.0.0.7\" or \"bench@db2:2222\")")
    port = TARGET_RE.match(value).group("port")
    if port is not None and not 1 <= int(port) <= 65535:
        raise UsageError(f"{what}: {value!r}: port must be between 1 and 65535")
    return value


def _target_list(value: object, what: str) -> list[str]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value:
        raise UsageError(f"{what}: expected a list of host names like [\"db1\", \"db2\"]")
    if len(value) > MAX_HOSTS:
        raise UsageError(f"{what}: more than {MAX_HOSTS} hosts")
    names = [check_target(item, what) for item in value]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"{what}: {twice!r} is named twice")
    return names


def check_plan_hosts(value: object, what: str = "hosts",
                     base: Path | None = None) -> Path | list[str]:
    """`hosts = "inventory.ini"` (relative to the plan file) or `hosts = ["root@a", "b:2222"]`."""
    if isinstance(value, str):
        if _CONTROL_RE.search(value) or len(value) > 4096:
            raise UsageError(f"{what}: {value!r} is not a usable path")
        path = Path(value).expanduser()
        return path if path.is_absolute() or base is None else base / path
    if not isinstance(value, list):
        raise UsageError(f"{what}: expected an inventory file path (\"inventory.ini\") or a "
                         "list of SSH targets ([\"root@db1\", \"db2:2222\"])")
    return _target_list(value, what)


def check_hosts_option(value: str) -> Path | list[str]:
    """`--hosts INVENTORY`: an inventory file, or a comma-separated list of SSH targets."""
    if Path(value).exists() or "/" in value:
        if not Path(value).is_file():
            raise UsageError(f"--hosts {value}: no such inventory file")
        return Path(value)
    return _target_list(value, "--hosts")


def check_variant_hosts(value: object, what: str) -> list[str]:
    """A variant's `hosts`: names of inventory hosts or groups (or SSH targets)."""
    return _target_list(value, what)


def check_boot(value: object, what: str) -> dict[str, str]:
    """`boot = { entry = "GRUB ENTRY", release = "6.1.0-18-amd64" }` or
    `boot = { kexec = "/boot/vmlinuz-6.1", initrd = "/boot/initrd.img-6.1", release = ... }`."""
    if not isinstance(value, dict):
        raise UsageError(f"{what}: expected a table like {{ entry = \"...\", release = \"...\" }}")
    for key, item in value.items():
        if key not in BOOT_KEYS:
            raise UsageError(f"{what}.{key}: unknown key; known keys: {', '.join(BOOT_KEYS)}")
        if not isinstance(item, str) or not item.strip() or _CONTROL_RE.search(item) \
                or len(item) > 4096:
            raise UsageError(f"{what}.{key}: expected a non-empty one-line string, got {item!r}")
    if ("entry" in value) == ("kexec" in value):
        raise UsageError(f"{what}: give either entry (a GRUB menu entry for a one-shot "
                         "grub-reboot) or kexec (a kernel image on the host), not both or none")
    if "release" not in value:
        raise UsageError(f"{what}: give release, the `uname -r` the booted kernel must report "
                         "(a mismatch is refused)")
    if "entry" in value and ({"initrd", "append"} & set(value)):
        raise UsageError(f"{what}: initrd and append only go with kexec")
    return {key: str(item) for key, item in value.items()}


def describe_boot(boot: dict[str, Any]) -> str:
    if "entry" in boot:
        return f"grub-reboot {boot['entry']!r}"
    return f"kexec {boot['kexec']}"
