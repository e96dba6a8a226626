"""Workloads, one module each. `get_workload` turns the command-line name into the class."""

from __future__ import annotations

import importlib

from ..core.errors import UsageError
from .base import Workload, WorkloadResult

_MODULES = {
    "pgioperf": "pgioperf",
    "randread": "randread",
    "pgbench": "pgbench",
    "fio": "fio",
    "command": "command",
}


def available_workloads() -> list[str]:
    return list(_MODULES)


def get_workload(name: str) -> type[Workload]:
    if name not in _MODULES:
        raise UsageError(
            f"unknown workload {name!r}; choose one of: {', '.join(available_workloads())}"
        )
    try:
        module = importlib.import_module(f".{_MODULES[name]}", __name__)
    except ModuleNotFoundError as exc:
        raise UsageError(f"workload {name!r} is not available in this build ({exc})") from exc
    return module.WORKLOAD


__all__ = ["Workload", "WorkloadResult", "available_workloads", "get_workload"]
