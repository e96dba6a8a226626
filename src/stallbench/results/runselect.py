"""Which runs a BASELINE/CANDIDATE argument means: a variant name under RESULTS or a path to a
variant, workload or run directory (resolve_runs), the complete runs among some directories
(complete_runs), and the summaries of those runs prepared in parallel (prepare_summaries).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import RunDataError, UsageError
from .rundirs import default_results_dir, iter_run_dirs
from .runmeta import Status
from .store import Run, load_run


def complete_runs(paths: Iterable[str | os.PathLike]) -> list[Run]:
    """The complete runs among these run directories (damaged or unfinished ones left out):
    what --iterations auto and bisect compare after each round."""
    runs = []
    for path in paths:
        try:
            run = load_run(path)
        except RunDataError:
            continue
        if run.status == Status.COMPLETE:
            runs.append(run)
    return runs


def prepare_summaries(specs: list[str], results: Path | None) -> None:
    """summaryfile.prepare() (parallel rebuild of missing or stale summaries) for the runs that
    BASELINE/CANDIDATE arguments name (variants or paths)."""
    from . import summaryfile

    root = Path(results) if results else default_results_dir()
    dirs: list[Path] = []
    for spec in specs:
        base = Path(spec) if Path(spec).is_dir() else root / spec
        if base.is_dir():
            dirs += list(iter_run_dirs(base))
    summaryfile.prepare(dirs)


@dataclass
class Resolved:
    """The runs a BASELINE/CANDIDATE argument named, and those that could not be used."""

    label: str
    runs: list[Run]
    problems: list[str]


def resolve_runs(spec: str, results: Path | None = None, workload: str | None = None,
                 allow_incomplete: bool = False) -> Resolved:
    """A variant name under RESULTS, or a path to a variant, workload or run directory."""
    results = Path(results) if results else default_results_dir()
    candidate = Path(spec)
    if candidate.exists() and (candidate.is_dir()):
        base = candidate
    elif (results / spec).is_dir() and "/" not in spec:
        base = results / spec
    else:
        raise UsageError(f"{spec!r}: no such variant under {results} and no such directory")
    runs: list[Run] = []
    problems: list[str] = []
    for run_dir in iter_run_dirs(base):
        try:
            run = load_run(run_dir)
        except RunDataError as exc:
            problems.append(str(exc))
            continue
        if workload and run.workload != workload:
            continue
        if not run.complete and not allow_incomplete:
            problems.append(f"{run_dir}: {run.describe_status()}; left out")
            continue
        try:
            run.summary()       # a damaged ops.parquet leaves this run out, not the command
        except RunDataError as exc:
            problems.append(f"{exc}; left out")
            continue
        runs.append(run)
    if not runs:
        detail = f" ({problems[0]})" if problems else ""
        raise RunDataError(f"{spec!r}: no usable run{detail}")
    workloads = sorted({r.workload for r in runs})
    if len(workloads) > 1:
        raise UsageError(
            f"{spec!r} holds runs of several workloads ({', '.join(workloads)}): "
            "pick one with --workload"
        )
    label = runs[0].variant if len({r.variant for r in runs}) == 1 else spec
    return Resolved(label=label, runs=runs, problems=problems)
