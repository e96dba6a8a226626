"""Where the workload's tasks ran on a CPU, per variant: the profile monitor's samples as folded
stacks under their worker role ('reader;entry_SYSCALL_64_after_hwframe;...;leaf COUNT'), for the
differential on-CPU flame graph beside the blocked-time one and `export --format folded --stacks
on-cpu`. Loads run directories."""

from __future__ import annotations

import numpy as np

from ..analysis import monitornames
from ..results.store import Run
from .blocked import Profile
from .where.facts import task_roles


def run_stacks(run: Run) -> dict[str, int] | None:
    """One run's samples: 'role;stack' -> samples; None without the profile table."""
    table = run.monitor_table(monitornames.PROFILE)
    if table is None:
        return None
    counts: dict[str, int] = {}
    roles = task_roles(run, monitornames.PROFILE, table["pid"].to_numpy(),
                       table["tid"].to_numpy())
    for role, stack in zip(roles, table["stack"].to_pylist(), strict=True):
        key = f"{role.replace(';', ':')};{stack}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def profile(label: str, runs: list[Run]) -> Profile | None:
    """The on-CPU profile of these runs; None unless every one ran the profile monitor."""
    parts = []
    for run in runs:
        part = run_stacks(run)
        if part is None:
            return None
        parts.append(part)
    total: dict[str, int] = {}
    for part in parts:
        for stack, count in part.items():
            total[stack] = total.get(stack, 0) + count
    return Profile(label, monitornames.PROFILE, total, len(runs))


def sample_roles(run: Run, pids: np.ndarray, tids: np.ndarray) -> list[str]:
    """The worker role of each sample (perfetto's tracks name them)."""
    return task_roles(run, monitornames.PROFILE, pids, tids)
