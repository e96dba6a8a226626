"""What a results tree holds, from its run.json files alone (no ops are read): each run's facts
as a history reads them (variant, workload, iteration, status, host, kernel, date, plan hash,
commit), and per variant and workload what `stallbench list` shows. Nothing is written."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import RunDataError
from .rundirs import OPS_FILE, iter_run_dirs
from .store import Run, load_run


@dataclass
class RunFacts:
    """One run directory as a row of the history (`query`'s view `runs`)."""

    path: str
    variant: str
    workload: str
    iteration: int | None
    status: str
    host: str | None
    kernel: str | None
    date: str                  # start_utc
    end: str | None
    duration_s: float | None
    plan_hash: str | None
    commit: str | None
    others_cpus: float | None
    ops_file: str | None       # ops.parquet where there is one

    @classmethod
    def of(cls, run: Run) -> RunFacts:
        meta = run.meta
        plan = meta.plan or {}
        ops = run.path / OPS_FILE
        return cls(str(run.path), meta.variant, meta.workload, meta.iteration,
                   run.describe_status(), meta.host, (meta.kernel or {}).get("release"),
                   meta.start_utc, meta.end_utc, meta.duration_s, plan.get("hash"),
                   plan.get("commit"), (meta.machine_load or {}).get("others_cpus"),
                   str(ops) if ops.is_file() else None)


@dataclass
class Entry:
    """The runs of one variant and workload (`stallbench list`'s line)."""

    variant: str
    workload: str
    runs: int = 0
    status: Counter = field(default_factory=Counter)
    kernels: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    plans: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None


def scan(results: Path) -> tuple[list[Run], list[str]]:
    """Every run directory under `results` (run.json read), and the ones that could not be."""
    runs, problems = [], []
    for path in iter_run_dirs(Path(results)):
        try:
            runs.append(load_run(path))
        except RunDataError as exc:
            problems.append(str(exc))
    return runs, problems


def run_facts(results: Path) -> tuple[list[RunFacts], list[str]]:
    runs, problems = scan(results)
    return [RunFacts.of(run) for run in runs], problems


def entries(facts: list[RunFacts]) -> list[Entry]:
    """Per variant and workload, in name order."""
    by_key: dict[tuple[str, str], Entry] = {}
    for run in facts:
        entry = by_key.setdefault((run.variant, run.workload), Entry(run.variant, run.workload))
        entry.runs += 1
        entry.status[run.status.split(":")[0]] += 1
        _add(entry.kernels, run.kernel)
        _add(entry.hosts, run.host)
        _add(entry.plans, run.plan_hash)
        entry.first = min(filter(None, [entry.first, run.date]))
        entry.last = max(filter(None, [entry.last, run.date]))
    return [by_key[key] for key in sorted(by_key)]


def _add(values: list[Any], value: Any) -> None:
    if value and value not in values:
        values.append(value)
