"""Which block device lies under a directory: /proc/self/mountinfo and /sys/dev/block."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class MountInfo:
    mount_point: str
    major_minor: str
    fstype: str
    source: str
    mount_options: str   # this mount's own (mountinfo field 6: rw,relatime,...)
    super_options: str   # the filesystem's, shared by every mount of it (rw,discard,...)

    @property
    def options(self) -> str:
        """Both lists as one, for membership tests ("memory" in a cgroup v1 mount)."""
        return f"{self.mount_options},{self.super_options}"


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1:i + 4]) == 3 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts() -> list[MountInfo]:
    result = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            rest = right.split()
            if len(fields) < 6 or len(rest) < 3:
                continue
            result.append(MountInfo(mount_point=_unescape(fields[4]), major_minor=fields[2],
                                    fstype=rest[0], source=_unescape(rest[1]),
                                    mount_options=fields[5], super_options=rest[2]))
    return result


def mount_of(path: Path) -> MountInfo | None:
    """The mount that holds `path` (the last, i.e. topmost, of the longest matching prefix)."""
    real = os.path.realpath(path)
    best: MountInfo | None = None
    for info in mounts():
        mp = info.mount_point
        if real == mp or real.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point):
                best = info
    return best


def proc_mounts_entry(mount_point: Path) -> tuple[str, str, str] | None:
    """(source, fstype, options) of the topmost /proc/mounts line for exactly this mount point."""
    real = os.path.realpath(mount_point)
    found = None
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and _unescape(parts[1]) == real:
                found = (_unescape(parts[0]), parts[2], parts[3])
    return found


def disk_of_sysfs(name: str) -> str:
    """For a partition (sda1) its disk (sda); a whole disk maps to itself."""
    sys_path = Path("/sys/class/block") / name
    if (sys_path / "partition").exists():
        return Path(os.path.realpath(sys_path)).parent.name
    return name


def devices_under(path: Path) -> list[str]:
    """Block devices (whole disks, e.g. ['vda'] or ['loop3']) that hold `path`; [] if none."""
    info = mount_of(path)
    names: list[str] = []
    if info is not None:
        major, _, minor = info.major_minor.partition(":")
        if major != "0":
            link = Path(f"/sys/dev/block/{major}:{minor}")
            if link.exists():
                names.append(Path(os.path.realpath(link)).name)
        if not names and info.source.startswith("/dev/"):
            # btrfs and others report an anonymous device number: use the mount source
            name = Path(os.path.realpath(info.source)).name
            if (Path("/sys/class/block") / name).exists():
                names.append(name)
    disks = []
    for name in names:
        disk = disk_of_sysfs(name)
        slaves = Path("/sys/class/block") / disk / "slaves"
        if disk.startswith(("dm-", "md")) and slaves.is_dir():
            disks.extend(sorted(disk_of_sysfs(s.name) for s in slaves.iterdir()))
        disks.append(disk)
    return list(dict.fromkeys(disks))
