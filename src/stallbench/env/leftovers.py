"""What a journal could not record: found by name, removed only if its owner is dead.

A run whose journal is gone leaves a loop device backed by `stallbench-<pid>-<n>-*.scratch.img`;
cgroups are `stallbench-<pid>-<n>`. The pid in the name is the owner; while a process with that
pid lives, the thing is left alone. Only scratch images (deleted at their run's end) are
detached and deleted here: a kept image (`--keep-image`: `-FS.img`, as every image of a
stallbench before the scratch name) is the user's, who may have attached it again to look inside.

A pid means something only in its PID namespace, and cgroups and loop devices are seen from
every one: a cleanup in a namespace of its own (a container, `unshare --pid`) finds no
/proc/<pid> for a live run of the host and would take its cgroup from under it (a test's
cleanup in a namespace once did, beside another test's run: its worker could not join the
cgroup). So names are judged only from the kernel's first PID namespace.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from .blockdev import mounts
from .loopfs import IMAGE_RE, MOUNT_RE, SCRATCH_SUFFIX, attached_loops, backing_file, unmount
from .memcg import CGROUP_NAME_RE, _undo_cgroup, cgroup_roots
from .tools import tool

# The inode number of the kernel's first PID namespace (include/linux/proc_ns.h,
# PROC_PID_INIT_INO, fixed since Linux 3.8).
PROC_PID_INIT_INO = 0xEFFFFFFC


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def in_first_pid_namespace() -> bool:
    try:
        return os.stat("/proc/self/ns/pid").st_ino == PROC_PID_INIT_INO
    except OSError:
        return False


def cleanup_orphans(log: Callable[[str], None] = print) -> int:
    """Remove stale stallbench cgroups, and the mounts, loop devices and files of scratch images;
    returns errors met. Outside the first PID namespace nothing (see above), said once when
    there is something it leaves."""
    if not in_first_pid_namespace():
        found = [p for c in cgroup_roots() for p in _children(c.root)
                 if CGROUP_NAME_RE.match(p.name)]
        found += [Path(b) for b in attached_loops().values() if IMAGE_RE.match(Path(b).name)]
        if found:
            log(f"{len(found)} cgroup(s) or image(s) named for a stallbench run's pid left "
                "alone: this cleanup runs in a PID namespace of its own, where another "
                "namespace's pids cannot be seen; run `stallbench cleanup` on the host")
        return 0
    errors = 0
    for controller in cgroup_roots():
        for path in _children(controller.root):
            match = CGROUP_NAME_RE.match(path.name)
            if not match:
                continue
            if _alive(int(match.group(1))):
                log(f"{path}: its stallbench run (pid {match.group(1)}) is still running; "
                    "left alone")
                continue
            try:
                _undo_cgroup({"path": str(path)})
                log(f"removed leftover cgroup {path}")
            except Exception as exc:  # noqa: BLE001 - go on with the rest
                errors += 1
                log(f"could not remove cgroup {path}: {exc}")

    for device, backing in sorted(attached_loops().items()):
        image = Path(backing)
        match = IMAGE_RE.match(image.name)
        if not match:
            continue
        if _alive(int(match.group(1))):
            log(f"/dev/{device} ({image}): its stallbench run (pid {match.group(1)}) is still "
                "running; left alone")
            continue
        if not image.name.endswith(SCRATCH_SUFFIX):
            log(f"/dev/{device} ({image}): a kept image (--keep-image), or an older "
                "stallbench's whose journal is gone; left alone (if it is a leftover: unmount "
                f"it, `losetup --detach /dev/{device}`, delete the file)")
            continue
        try:
            for info in mounts():
                if os.path.realpath(info.source) == f"/dev/{device}":
                    unmount(Path(info.mount_point))
                    log(f"unmounted leftover {info.mount_point}")
                    if MOUNT_RE.match(Path(info.mount_point).name):
                        with contextlib.suppress(OSError):
                            Path(info.mount_point).rmdir()
            if backing_file(device) == backing:
                subprocess.run([tool("losetup"), "--detach", f"/dev/{device}"], check=True,
                               capture_output=True, timeout=60)
                log(f"detached leftover loop device /dev/{device}")
            if image.exists():
                image.unlink()
                log(f"deleted leftover image {image}")
        except Exception as exc:  # noqa: BLE001
            errors += 1
            log(f"could not clean up /dev/{device} ({image}): {exc}")
    return errors


def _children(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
