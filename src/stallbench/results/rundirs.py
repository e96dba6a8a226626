"""The run directory's layout: RESULTS/<variant>/<workload>/<iteration>/ and its file names,
the results directory's default, the atomic claim of an iteration (mkdir) and the
walk over run directories. No numpy or pyarrow: the command line reads the default for help.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..core.errors import UsageError

RUN_FILE = "run.json"
OPS_FILE = "ops.parquet"
SUMMARY_FILE = "summary.parquet"      # derived from ops.parquet (results/summaryfile.py)
# in a bundle made without --ops, beside each run's summary: its ops were left out on purpose,
# so the summary stands for them (a run that only lost its ops.parquet is damaged)
OPS_LEFT_OUT_FILE = "ops.parquet.left-out"
MONITOR_DIR = "monitors"
STACKS_FILE = "stacks.folded"
KERNEL_CONFIG_FILE = "kernel.config"  # the run's kernel's config (core/kernelconfig.py's text)
# the trace monitors' tables, the one read first: trace-full records what trace does and more
# (syscalls, block requests); a run with both has two recordings of the same D states, and
# every reader takes the same one so that their totals agree
TRACE_TABLES = ("trace_full", "trace")

RESULTS_ENV = "STALLBENCH_RESULTS"
RESULTS_DEFAULT = "results"
RESULTS_HELP = f"results directory (default: ${RESULTS_ENV} or ./{RESULTS_DEFAULT})"


def default_results_dir() -> Path:
    """$STALLBENCH_RESULTS, else ./results."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS_DEFAULT)


def claim_iteration(base: Path) -> Path:
    """The next free iteration directory under base, created (mkdir is the atomic claim)."""
    existing = [int(p.name) for p in base.iterdir() if p.name.isdigit()]
    number = max(existing, default=0) + 1
    while True:
        candidate = base / str(number)
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            number += 1


def refuse_symlinks(root: Path, path: Path) -> None:
    """Refuse to write through a symlink inside the results directory that leaves it."""
    root_real = root.resolve()
    real = path.resolve()
    if real != root_real and root_real not in real.parents:
        raise UsageError(f"{path} leads outside the results directory {root} (symlink?): refusing")


def iter_run_dirs(path: Path) -> Iterator[Path]:
    """Run directories at or below `path` (a run, a workload or a variant directory)."""
    path = Path(path)
    if (path / RUN_FILE).exists() or (path / OPS_FILE).exists():   # no run.json: reported
        yield path
        return
    if not path.is_dir():
        return
    for child in sorted(path.iterdir(), key=natural_key):
        if child.name.startswith(".") or not child.is_dir() or child.is_symlink():
            continue
        yield from iter_run_dirs(child)


def natural_key(p: Path) -> tuple[int, int, str]:
    """Iteration directories in numeric order, then any others by name."""
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)
