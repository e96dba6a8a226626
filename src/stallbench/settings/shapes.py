"""The shape parsers of variant settings (variant.py's table uses them; env/ too): a value's
type, range and characters, never what this machine offers (env/ checks that)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ..core.errors import UsageError
from ..core.units import parse_duration, parse_size
from .fsoptions import check_mkfs_words, check_mount_words

FILESYSTEMS = ("ext2", "ext3", "ext4", "xfs", "btrfs")
SCHEDULERS = ("none", "mq-deadline", "kyber", "bfq")   # blk-mq's; a device offers a subset
SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
SCHEDULER_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
OPTION_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def check_fs_name(fs: object, what: str = "--fs") -> str:
    if not isinstance(fs, str) or fs not in FILESYSTEMS:
        raise UsageError(f"{what}: {fs!r} is not a supported filesystem; "
                         f"choose one of {', '.join(FILESYSTEMS)}")
    return fs


def check_sysctl(key: object, value: object, what: str = "--sysctl") -> tuple[str, str]:
    """Validate the shape of one sysctl setting (whether the kernel has it is checked in env/)."""
    if not isinstance(key, str) or not SYSCTL_KEY_RE.match(key) or len(key) > 200:
        raise UsageError(f"{what}: {key!r} is not a sysctl name (use e.g. vm.dirty_ratio)")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f"{what}: {key} needs a string or number value, got {value!r}")
    text = str(value).strip()
    if not text or CONTROL_RE.sub("", text.replace("\t", "")) != text.replace("\t", ""):
        raise UsageError(f"{what}: {key}={value!r} is not a usable value")
    if len(text) > 4096:
        raise UsageError(f"{what}: the value of {key} is too long")
    return key, text


def parse_sysctl_assignment(text: str, what: str = "--sysctl") -> tuple[str, str]:
    """'vm.dirty_ratio=10' -> ('vm.dirty_ratio', '10')."""
    key, sep, value = str(text).partition("=")
    if not sep:
        raise UsageError(f"{what} {text!r}: use KEY=VALUE, e.g. vm.dirty_ratio=10")
    return check_sysctl(key.strip(), value.strip(), what)


def check_scheduler_name(name: object, what: str = "--scheduler") -> str:
    if not isinstance(name, str) or not SCHEDULER_RE.match(name):
        raise UsageError(f"{what}: {name!r} is not an I/O scheduler name (e.g. mq-deadline, none)")
    return name


def check_mount_opts(opts: object, what: str = "--mount-opts") -> str:
    if not isinstance(opts, str):
        raise UsageError(f"{what}: expected a string like 'noatime,data=journal', got {opts!r}")
    if any(c.isspace() for c in opts) or CONTROL_RE.search(opts) or len(opts) > 1024:
        raise UsageError(f"{what}: {opts!r} must be one comma-separated list without spaces")
    check_mount_words(opts, what)
    return opts


def check_mkfs_opts(opts: object, what: str = "--mkfs-opts") -> str:
    """mkfs options may not name a device or path: mkfs only ever formats our own loop device."""
    if not isinstance(opts, str):
        raise UsageError(f"{what}: expected a string like '-O ^has_journal', got {opts!r}")
    if CONTROL_RE.search(opts.replace("\t", " ")) or len(opts) > 1024:
        raise UsageError(f"{what}: {opts!r} contains control characters or is too long")
    try:
        tokens = shlex.split(opts)
    except ValueError as exc:
        raise UsageError(f"{what}: {opts!r} cannot be split into arguments ({exc})") from None
    for token in tokens:
        if token.startswith("/dev") or "/dev/" in token or token.startswith("/"):
            raise UsageError(f"{what}: {token!r} looks like a device or path; stallbench formats "
                             "only the loop device it created, so mkfs options may not name one")
    check_mkfs_words(opts, what)
    return opts


MAX_VM_CPUS = 64
MIN_VM_MEMORY = 128 << 20


def check_vm_cpus(value: object, what: str = "--vm-cpus") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VM_CPUS:
        raise UsageError(f"{what}: expected a whole number of vCPUs from 1 to {MAX_VM_CPUS}, "
                         f"got {value!r}")
    return value


def check_vm_memory(value: int, what: str = "--vm-memory") -> int:
    if value < MIN_VM_MEMORY:
        raise UsageError(f"{what}: {value >> 20} MiB is too little for a guest running Python; "
                         f"give at least {MIN_VM_MEMORY >> 20}M")
    return value
IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")


def parse_swap_limit(value: object, what: str = "--swap-limit") -> int:
    """A size, where 0 (no swap at all) is allowed."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UsageError(f"{what}: expected a size like \"256M\" or 0, got {value!r}")
    if str(value).strip() in ("0", "0B", "0b"):
        return 0
    return parse_size(value, what)


def parse_io_max(value: object, what: str = "--io-max") -> dict[str, int]:
    """'rbps=4M,wiops=100' (or a table) -> {'rbps': 4194304, 'wiops': 100}."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str):
        items = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            key, sep, number = part.partition("=")
            if not sep:
                raise UsageError(f"{what}: {part!r}: use KEY=VALUE with KEY one of "
                                 f"{', '.join(IO_MAX_KEYS)}, e.g. rbps=4M")
            items.append((key.strip(), number.strip()))
    else:
        raise UsageError(f"{what}: expected e.g. \"rbps=4M,wiops=200\", got {value!r}")
    limits: dict[str, int] = {}
    for key, number in items:
        if key not in IO_MAX_KEYS:
            raise UsageError(f"{what}: {key!r} is not one of {', '.join(IO_MAX_KEYS)}")
        if isinstance(number, bool) or not isinstance(number, (str, int)):
            raise UsageError(f"{what}: {key} needs a number, got {number!r}")
        amount = parse_size(number, f"{what} {key}") if key.endswith("bps") else None
        if amount is None:
            if not str(number).isdigit():
                raise UsageError(f"{what}: {key}={number!r} must be a whole number of IOs/s")
            amount = int(number)
        if amount <= 0:
            raise UsageError(f"{what}: {key} must be positive")
        limits[key] = amount
    if not limits:
        raise UsageError(f"{what}: give at least one of {', '.join(IO_MAX_KEYS)}")
    return limits


def check_io_weight(value: object, what: str = "--io-weight") -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise UsageError(f"{what}: expected a whole number from 1 to 10000, got {value!r}")
    return value


def parse_io_latency(value: object, what: str = "--io-latency") -> int:
    """A latency target like '5ms' (a bare number is µs, as in io.latency) -> µs."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UsageError(f"{what}: expected a duration like \"5ms\", got {value!r}")
    text = str(value).strip()
    micros = int(text) if text.isdigit() else int(round(parse_duration(text, what) * 1e6))
    if micros <= 0:
        raise UsageError(f"{what}: must be positive")
    return micros


def check_plain_path(value: object, what: str) -> Path:
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what}: expected a path string, got {value!r}")
    if CONTROL_RE.search(value) or len(value) > 4096:
        raise UsageError(f"{what}: {value!r} contains control characters or is too long")
    path = Path(value).expanduser()
    if ".." in path.parts:
        raise UsageError(f"{what}: {value!r} contains '..'; give a path without it")
    return path
