"""Finish the record of a run whose stallbench process was killed (kill -9, OOM, power cut).

The runner journals a `finalize_run` entry when a run starts; `stallbench cleanup` runs it for a
dead process: the workers' spool files are merged into ops.parquet (nothing recorded is lost) and
run.json is marked failed with the reason, never complete.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..core.hostfacts import utc_now
from ..core.journal import register_undo
from . import summaryfile
from .oprecorder import read_spools
from .opsfile import write_ops_file
from .rundirs import OPS_FILE, RUN_FILE
from .runmeta import Status, read_meta, write_meta


def recover_run(run_dir: Path, t0_ns: int | None) -> int:
    """Merge a killed run's spools (if any) and mark it failed; returns the ops recovered."""
    run_dir = Path(run_dir)
    meta_path = run_dir / RUN_FILE
    if not meta_path.exists():
        return 0
    meta = read_meta(meta_path)
    if meta.status != Status.RUNNING:
        return 0
    spool = run_dir / ".spool"
    recovered = 0
    if spool.is_dir() and t0_ns is not None and not (run_dir / OPS_FILE).exists():
        counts = summaryfile.write_with_ops(run_dir, meta, read_spools(spool, t0_ns),
                                            write_ops_file)
        recovered = sum(counts.values())
        meta.samples = {op: counts.get(op, 0) for op in meta.ops_declared or counts}
    shutil.rmtree(spool, ignore_errors=True)
    meta.status = Status.FAILED
    meta.reason = ("stallbench was killed before the run finished; "
                   f"{recovered} recorded ops recovered by `stallbench cleanup`")
    meta.end_utc = utc_now()
    write_meta(meta_path, meta)
    return recovered


@register_undo("finalize_run")
def _finalize_killed_run(action: dict[str, Any]) -> None:
    recover_run(Path(action["path"]), action.get("t0_ns"))
