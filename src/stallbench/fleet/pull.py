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

import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.names import check_name
from ..results.rundirs import claim_iteration, iter_run_dirs
from ..results.runmeta import RUN_FILE, read_meta, write_meta

WORK_DIR = ".work"           # a host's data files (~2x its memory): never pulled
# synchronize's options for the pull (archive off: no owners, groups, modes, devices)
PULL_OPTIONS: dict[str, Any] = {
    "archive": False, "recursive": True, "times": True, "links": True, "perms": False,
    "owner": False, "group": False,
    "rsync_opts": ["--no-devices", "--no-specials", f"--exclude=/{WORK_DIR}/"]}
# rsync's own line for what --no-devices / --no-specials left on the host
_SKIPPED_RE = re.compile(r'^skipping non-regular file "(?P<path>.+)"$')
_SET_ID = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def skipped_by_rsync(lines: list[str]) -> list[str]:
    """The paths (relative to the pulled folder) rsync reported as not regular files."""
    found = []
    for line in lines:
        match = _SKIPPED_RE.match(line.strip())
        if match:
            found.append(match.group("path"))
    return found


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    if mode & _SET_ID:
        return "set-id bits"
    return "not a regular file"


def copy_regular(source: Path, target: Path) -> list[str]:
    """Copy the regular files and folders of `source` into `target` (made), never following
    a link; returns what was left out, as 'path (what it is)' relative to `source`."""
    left_out: list[str] = []
    target.mkdir(exist_ok=True)
    for folder, dirs, files in os.walk(source, followlinks=False):
        here = Path(folder)
        into = target / here.relative_to(source)
        for name in sorted([*dirs, *files]):
            path = here / name
            info = path.lstat()
            rel = path.relative_to(source).as_posix()
            if stat.S_ISDIR(info.st_mode) and not info.st_mode & _SET_ID:
                (into / name).mkdir(exist_ok=True)
            elif stat.S_ISREG(info.st_mode) and not info.st_mode & _SET_ID:
                try:
                    os.link(path, into / name, follow_symlinks=False)
                except OSError:
                    shutil.copyfile(path, into / name, follow_symlinks=False)
            else:
                left_out.append(f"{rel} ({_kind(info.st_mode)})")
                if name in dirs:
                    dirs.remove(name)          # os.walk does not enter it
    return left_out


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
