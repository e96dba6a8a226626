"""Runs pulled from a host (rsync'd into a mirror) -> RESULTS/<variant>/<workload>/<n>.

Iteration numbers are claimed in RESULTS as a local run claims them (mkdir), so runs of one
variant from several hosts never collide. The copy's run.json names the inventory host in
`host` (the host's own hostname stays in `fleet.hostname`), and records the boot id.

What a host sends is not trusted: rsync brings regular files, folders and symlinks (as links,
never followed) with the controller's owner and without set-id bits, and leaves device nodes,
FIFOs and sockets on the host (PULL_OPTIONS); the import then takes regular files and folders
only, and names everything else it left out in the run's notes.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.names import check_name
from ..results.regular import copy_regular
from ..results.rundirs import RUN_FILE, claim_iteration, iter_run_dirs
from ..results.runmeta import read_meta, write_meta

WORK_DIR = ".work"           # a host's data files (~2x its memory): never pulled
# synchronize's options for the pull (archive off: no owners, groups, modes, devices)
PULL_OPTIONS: dict[str, Any] = {
    "archive": False, "recursive": True, "times": True, "links": True, "perms": False,
    "owner": False, "group": False,
    "rsync_opts": ["--no-devices", "--no-specials", f"--exclude=/{WORK_DIR}/"]}
# rsync's own line for what --no-devices / --no-specials left on the host
_SKIPPED_RE = re.compile(r'^skipping non-regular file "(?P<path>.+)"$')
def skipped_by_rsync(lines: list[str]) -> list[str]:
    """The paths (relative to the pulled folder) rsync reported as not regular files."""
    found = []
    for line in lines:
        match = _SKIPPED_RE.match(line.strip())
        if match:
            found.append(match.group("path"))
    return found


def import_runs(mirror: Path, results: Path, host: str, imported: set[str],
                fleet: dict[str, Any], skipped: list[str] | None = None
                ) -> tuple[list[Path], list[str]]:
    """Import the run directories of `mirror` not imported yet; returns (paths, problems).
    `skipped`: what rsync left on the host (paths relative to the mirror), for the notes."""
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
            if not stat.S_ISREG((run_dir / RUN_FILE).lstat().st_mode):
                raise UsageError(f"{RUN_FILE} is not a regular file")
            meta = read_meta(run_dir / RUN_FILE)
            variant = check_name(meta.variant)
            workload = check_name(meta.workload, "workload name")
        except (OSError, UsageError) as exc:       # RunDataError too
            problems.append(f"{host}: {rel}: not imported (run.json unusable: {exc})")
            continue
        base = Path(results) / variant / workload
        base.mkdir(parents=True, exist_ok=True)
        target = claim_iteration(base)
        left_out = copy_regular(run_dir, target)
        left_out += [f"{p.removeprefix(rel + '/')} (not a regular file)"
                     for p in skipped or () if p.startswith(rel + "/")]
        if left_out:
            note = (f"fleet pull: left out what the host sent that is not a regular file or "
                    f"folder: {', '.join(left_out)}")
            meta.notes = [*meta.notes, note]
            problems.append(f"{host}: {rel}: {note}")
        meta.fleet = {**fleet, "hostname": meta.host, "remote_iteration": meta.iteration,
                      "remote_path": f"{fleet.get('remote_results', '')}/{rel}"}
        meta.host = host
        meta.boot_id = fleet.get("boot_id")
        meta.iteration = int(target.name)
        write_meta(target / RUN_FILE, meta)   # a new file: the mirror's link is kept
        paths.append(target)
    return paths, problems
