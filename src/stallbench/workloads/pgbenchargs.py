"""pgbench's argument values, parsed (pgbench.py declares the options): PostgreSQL settings
(--pg-setting), scripts with weights (--script FILE@WEIGHT, --builtin NAME@WEIGHT), and the op
name of each script in pgbench's script_no order."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..core.errors import UsageError

DEFAULT_SETTINGS = {
    "shared_buffers": "16MB",
    "max_wal_size": "256MB",
    "fsync": "on",
    "synchronous_commit": "on",
}
BUILTINS = ("tpcb-like", "simple-update", "select-only")
PROTOCOLS = ("simple", "extended", "prepared")
_SCRIPT_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")
_SETTING_RE = re.compile(r"^[a-z_][a-z0-9_.]*$")


def parse_pg_settings(items: Any) -> dict[str, str]:
    """--pg-setting key=value (repeatable) or a plan-file table -> {key: value}."""
    settings: dict[str, str] = {}
    if items is None:
        return settings
    if isinstance(items, dict):
        pairs = [(str(k), v) for k, v in items.items()]
    elif isinstance(items, (list, tuple)):
        pairs = []
        for item in items:
            key, sep, value = str(item).partition("=")
            if not sep:
                raise UsageError(f"pgbench: --pg-setting {item!r}: use KEY=VALUE, "
                                 "e.g. shared_buffers=128MB")
            pairs.append((key, value))
    else:
        raise UsageError("pgbench: pg_setting must be a list of KEY=VALUE or a table")
    for key, value in pairs:
        key = key.strip()
        if not _SETTING_RE.match(key):
            raise UsageError(f"pgbench: {key!r} is not a PostgreSQL setting name")
        if key in ("listen_addresses", "unix_socket_directories", "port", "data_directory"):
            raise UsageError(f"pgbench: {key} is managed by stallbench (Unix socket only)")
        value = str(value).strip()
        if not value or any(c in value for c in "\n\r\x00"):
            raise UsageError(f"pgbench: setting {key}: empty or multi-line value")
        settings[key] = value
    return settings


def as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, Path)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise UsageError(f"pgbench: {what} must be a FILE[@WEIGHT] string or a list of them")


def split_weight(text: str, what: str) -> tuple[str, int | None]:
    """'file.sql@5' -> ('file.sql', 5); a name without '@' has no weight."""
    name, sep, weight = text.rpartition("@")
    if not sep:
        return text, None
    if not weight.isdigit() or not 0 <= int(weight) <= 1_000_000 or not name:
        raise UsageError(f"pgbench: {what} {text!r}: the weight after @ must be a whole number "
                         "(e.g. update.sql@3)")
    return name, int(weight)


def parse_script(item: Any) -> tuple[Path, int | None]:
    if not isinstance(item, (str, Path)):
        raise UsageError(f"pgbench: --script {item!r}: expected FILE[@WEIGHT]")
    name, weight = split_weight(str(item), "--script")
    path = Path(name).expanduser()
    if not path.is_file():
        raise UsageError(f"pgbench: --script {name}: no such file (give a pgbench script, "
                         "see pgbench's -f)")
    try:
        path.read_bytes()[:1]
    except OSError as exc:
        raise UsageError(f"pgbench: --script {name}: cannot read it ({exc.strerror})") from None
    return path.resolve(), weight


def positive_number(value: Any, what: str, limit: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= limit:
        raise UsageError(f"pgbench: {what} must be a positive number, got {value!r}")
    return float(value)


def script_ops(builtin: str | None, scripts: list[tuple[Path, int | None]]) -> list[str]:
    """Op names in pgbench's script_no order (built-in first, as in the argument list);
    [] when there is one script: its op is plain `txn`."""
    names = ([builtin] if builtin else []) + [p.stem for p, _ in scripts]
    if len(names) <= 1:
        return []
    ops: list[str] = []
    for name in names:
        op = "txn-" + (_SCRIPT_NAME_RE.sub("_", name) or "script")
        while op in ops:
            op += "'"
        ops.append(op)
    return ops
