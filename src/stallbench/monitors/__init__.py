"""Monitors, one module each. `parse_monitor_list` turns the --monitors list into names,
`monitor_class` a name into its class."""

from __future__ import annotations

import importlib

from ..analysis import monitornames as names
from ..core.errors import UsageError
from .base import Monitor, MonitorResult

# the one list of monitors (their names are analysis/monitornames.py's): (name, module, in the
# default set, in "all"); "all" leaves
# trace-full out, which records what trace does and more at a higher cost. Each module's
# MONITORS maps its classes' `name` to them (tests/monitors/test_monitor_parsing.py checks they
# agree).
_REGISTRY = (
    (names.COUNTERS, "counters", True, True),
    (names.PSI, "psi", True, True),
    (names.DISKSTATS, "diskstats", True, True),
    (names.DELAY, "delay", True, True),
    (names.RECLAIM, "reclaim", True, True),
    (names.STACKS, "stacks", False, True),
    (names.TRACE, "trace", False, True),
    (names.TRACE_FULL, "trace", False, False),
    (names.PROFILE, "profile", False, True),
    (names.PERFSTAT, "perfstat", False, True),
)
_MODULES = {name: module for name, module, _default, _all in _REGISTRY}


def monitor_class(name: str) -> type[Monitor]:
    module = importlib.import_module(f".{_MODULES[name]}", __name__)
    return module.MONITORS[name]


def monitor_names() -> list[str]:
    """Every monitor name --monitors accepts."""
    return list(_MODULES)


def monitors_help() -> str:
    """The --monitors help text, from the registry."""
    default = default_monitor_names()
    added = [n for n in parse_monitor_list("all") if n not in default]
    return (f"default ({','.join(default)}), all (adds {', '.join(added)}), none, or a comma "
            f"list of: {', '.join(_MODULES)}")


def default_monitor_names() -> list[str]:
    return [name for name, _module, default, _all in _REGISTRY if default]


def parse_monitor_list(text: str | list[str] | None) -> list[str]:
    """'default', 'all', 'none' or a comma list -> monitor names (validated)."""
    if text is None:
        return default_monitor_names()
    items = text if isinstance(text, list) else [t.strip() for t in str(text).split(",")]
    names: list[str] = []
    for item in items:
        if item in ("", "none"):
            continue
        if item == "default":
            names += default_monitor_names()
        elif item == "all":
            names += [name for name, _module, _default, in_all in _REGISTRY if in_all]
        elif item in _MODULES:
            names.append(item)
        else:
            raise UsageError(f"unknown monitor {item!r}; choose from: {', '.join(_MODULES)}, "
                             "default, all, none")
    return list(dict.fromkeys(names))


__all__ = ["Monitor", "MonitorResult", "monitor_class", "parse_monitor_list",
           "default_monitor_names", "monitor_names", "monitors_help"]
