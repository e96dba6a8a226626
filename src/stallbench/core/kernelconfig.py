"""A kernel's build configuration (CONFIG_* lines) and its identity: the canonical text (the
options set, one `KEY=VALUE` a line, sorted) and its sha256, the same whether the config came
from /proc/config.gz, /boot/config-RELEASE, a .deb's boot/config-* or a build's .config.

A run keeps the canonical text beside run.json (results/rundirs.py KERNEL_CONFIG_FILE) and its
hash in run.json (`kernel.config_sha256`; a guest's in `environment.vm.config_sha256`), so a
report can name the config and a bundle carry it."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

MAX_CONFIG_BYTES = 8 << 20   # a real config is ~300 KiB: anything larger is not one


def parse_config(text: str) -> dict[str, str]:
    """CONFIG_KEY -> value for each option set (lines `# CONFIG_X is not set` are not)."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            config[key] = value
    return config


def canonical_text(config: dict[str, str]) -> str:
    """One `KEY=VALUE` line per option set, the lines sorted bytewise (`LC_ALL=C sort`)."""
    return "".join(sorted(f"{key}={value}\n" for key, value in config.items()))


def config_digest(config: dict[str, str]) -> str:
    """sha256 of the canonical text: what a report names a config by."""
    return hashlib.sha256(canonical_text(config).encode()).hexdigest()


def read_config_file(path: Path) -> dict[str, str]:
    """A config file (gzip-compressed or not); {} when it cannot be read or holds no option."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as f:
                raw = f.read(MAX_CONFIG_BYTES + 1)
    except (OSError, EOFError, gzip.BadGzipFile):
        return {}
    if len(raw) > MAX_CONFIG_BYTES:
        return {}
    return parse_config(raw.decode("utf-8", "replace"))


def running_config() -> dict[str, str]:
    """The running kernel's config: /proc/config.gz, else /boot/config-RELEASE; {} when
    neither is there."""
    for path in (Path("/proc/config.gz"), Path("/boot") / f"config-{os.uname().release}"):
        config = read_config_file(path)
        if config:
            return config
    return {}
