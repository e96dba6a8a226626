"""Taking a folder someone else wrote (a fleet host's run, a guest's exchange folder): its
regular files and folders only, never following a link, never a device node, FIFO, socket or
file with set-id bits; what was left out is returned by name for the run's notes."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

_SET_ID = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    if mode & _SET_ID:
        return "set-id bits"
    return "not a regular file"


def copy_regular(source: Path, target: Path, move: bool = False,
                 leave: tuple[str, ...] = ()) -> list[str]:
    """Copy (hard link where it can) or `move` the regular files and folders of `source` into
    `target` (made), never following a link, except the top-level names in `leave`; returns
    what was left out, as 'path (what it is)' relative to `source`."""
    left_out: list[str] = []
    target.mkdir(exist_ok=True)
    for folder, dirs, files in os.walk(source, followlinks=False):
        here = Path(folder)
        into = target / here.relative_to(source)
        for name in sorted([*dirs, *files]):
            if here == source and name in leave:
                continue
            path = here / name
            info = path.lstat()
            rel = path.relative_to(source).as_posix()
            if stat.S_ISDIR(info.st_mode) and not info.st_mode & _SET_ID:
                (into / name).mkdir(exist_ok=True)
            elif stat.S_ISREG(info.st_mode) and not info.st_mode & _SET_ID:
                if move:
                    os.replace(path, into / name)
                    continue
                try:
                    os.link(path, into / name, follow_symlinks=False)
                except OSError:
                    shutil.copyfile(path, into / name, follow_symlinks=False)
            else:
                left_out.append(f"{rel} ({_kind(info.st_mode)})")
                if name in dirs:
                    dirs.remove(name)          # os.walk does not enter it
    return left_out
