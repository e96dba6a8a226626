"""Runs pulled from a host (rsync'd into a mirror) -> RESULTS/<variant>/<workload>/<n>.

Iteration numbers are claimed in RESULTS as a local run claims them (mkdir), so runs of one
variant from several hosts never collide. The copy's run.json names the inventory host in
`host` (the host's own hostname stays in `fleet.hostname`), and records the boot id.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.names import check_name
from ..results.rundirs import claim_iteration, iter_run_dirs
from ..results.runmeta import RUN_FILE, read_meta, write_meta


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def import_runs(mirror: Path, results: Path, host: str, imported: set[str],
                fleet: dict[str, Any]) -> tuple[list[Path], list[str]]:
    """Import the run directories of `mirror` not imported yet; returns (paths, problems)."""
    paths: list[Path] = []
    problems: list[str] = []
    if not mirror.is_dir():
        return paths, problems
    for run_dir in iter_run_dirs(mirror):
        rel = run_dir.relative_to(mirror).as_posix()
        if rel in imported:
            continue
        imported.add(rel)
        try:
            meta = read_meta(run_dir / RUN_FILE)
            variant = check_name(meta.variant)
            workload = check_name(meta.workload, "workload name")
        except UsageError as exc:       # RunDataError too
            problems.append(f"{host}: {rel}: not imported (run.json unusable: {exc})")
            continue
        base = Path(results) / variant / workload
        base.mkdir(parents=True, exist_ok=True)
        target = claim_iteration(base)
        shutil.copytree(run_dir, target, copy_function=_link_or_copy, dirs_exist_ok=True)
        meta.fleet = {**fleet, "hostname": meta.host, "remote_iteration": meta.iteration,
                      "remote_path": f"{fleet.get('remote_results', '')}/{rel}"}
        meta.host = host
        meta.boot_id = fleet.get("boot_id")
        meta.iteration = int(target.name)
        write_meta(target / RUN_FILE, meta)   # a new file: the mirror's link is kept
        paths.append(target)
    return paths, problems
