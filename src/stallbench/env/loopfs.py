"""--fs ext2|ext3|ext4|xfs|btrfs: a fresh filesystem in an image file on a loop device.

Only ever formats a loop device this run attached to an image file this run created; the device
is checked to be backed by that image right before mkfs, and the mkfs and mount options are
checked before the image exists (settings/fsoptions.py: no word of them names a device). Every
step is journaled first: unlink image <- detach loop <- rmdir mount point <- unmount.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.display import format_size
from ..core.context import ProcessSet
from ..core.errors import UsageError
from ..core.journal import Journal, process_start_time, register_undo
from ..core.signals import held_while_starting
from ..settings.fsoptions import check_mkfs_words, check_mount_words
from .blockdev import mount_of, proc_mounts_entry
from .tools import tool

MIB = 1 << 20
MIN_SIZE = {"ext2": 16 * MIB, "ext3": 16 * MIB, "ext4": 16 * MIB, "xfs": 320 * MIB,
            "btrfs": 128 * MIB}
_FORCE = {"ext2": ["-F", "-q"], "ext3": ["-F", "-q"], "ext4": ["-F", "-q"], "xfs": ["-f", "-q"],
          "btrfs": ["-f", "-q"]}
IMAGE_RE = re.compile(r"^stallbench-(\d+)-(\d+)(?:-[A-Za-z0-9._+@=,:-]*)?\.img$")
# an image the run deletes at its end: only these may `stallbench cleanup` delete without a
# journal (a kept image, or one an older stallbench made, ends in -FS.img: the user's)
SCRATCH_SUFFIX = ".scratch.img"
MOUNT_RE = re.compile(r"^stallbench-(\d+)-(\d+)\.mnt$")
_counter = itertools.count(1)


@dataclass
class LoopFilesystem:
    mount_point: Path
    device: str          # e.g. "loop3"
    image: Path


# Free space (statvfs f_bavail) of a fresh filesystem as a share of its size, measured with
# the mkfs defaults of e2fsprogs 1.47.0, xfsprogs 6.1.0 and btrfs-progs 6.2 (BENCHMARKS.md,
# "loop filesystem sizes"); (size in MiB, share). Inode tables, journal or log, reserved blocks and
# metadata chunks take the rest: small ext* use 1 KiB blocks and an inode per 4 KiB, btrfs keeps
# two copies of its metadata. Between two sizes the lower share counts.
FREE_SHARE = {
    "ext2": ((16, .878), (24, .878), (64, .867), (80, .868), (128, .875), (256, .879),
             (320, .881), (400, .881), (512, .933), (768, .933), (1024, .933), (2048, .932),
             (4096, .932), (8192, .932), (16384, .931), (65536, .933)),
    "ext3": ((16, .815), (24, .836), (64, .804), (80, .818), (128, .844), (256, .847),
             (320, .855), (400, .861), (512, .902), (768, .912), (1024, .901), (2048, .901),
             (4096, .916), (8192, .924), (16384, .923), (65536, .925)),
    "ext4": ((16, .788), (24, .809), (64, .784), (80, .798), (128, .824), (256, .832),
             (320, .843), (400, .851), (512, .881), (768, .891), (1024, .885), (2048, .892),
             (4096, .91), (8192, .92), (16384, .922), (65536, .925)),
    "xfs": ((320, .743), (400, .783), (512, .818), (768, .868), (1024, .899), (2048, .946),
            (4096, .969), (16384, .987), (65536, .991)),
    "btrfs": ((128, .367), (160, .493), (192, .578), (256, .683), (320, .746), (400, .797),
              (512, .841), (768, .877), (1024, .883), (2048, .891), (4096, .87), (8192, .935),
              (16384, .967), (65536, .968)),
}
SIZE_MARGIN = 0.95        # other mkfs versions and options differ a little
HEADROOM = 1.05           # room beyond the workload's files (markers, its own small files)


def free_share(fs: str, size: int) -> float:
    """The share of a fresh `fs` of `size` bytes that is free (conservative, see FREE_SHARE)."""
    points = FREE_SHARE[fs]
    mib = size / MIB
    below = [share for at, share in points if at <= mib]
    above = [share for at, share in points if at >= mib]
    if not below:
        return points[0][1]
    if not above:
        return points[-1][1]
    return min(below[-1], above[0])


def default_size(fs: str, needed: int) -> int:
    """The smallest image (whole MiB, at least MIN_SIZE) whose fresh filesystem has room for
    `needed` bytes plus headroom, once the filesystem's own overhead is taken off."""
    want = needed * HEADROOM + MIB

    def whole_mib(n: float) -> int:
        return max(MIN_SIZE[fs], -(-int(n) // MIB) * MIB)

    size = whole_mib(want)
    for _ in range(64):   # the share depends on the size: settle, then only ever grow
        if free_share(fs, size) * SIZE_MARGIN * size >= want:
            break
        size = max(whole_mib(want / (free_share(fs, size) * SIZE_MARGIN)), size + MIB)
    return size


def backing_file(device: str) -> str | None:
    try:
        text = Path(f"/sys/block/{device}/loop/backing_file").read_text().strip()
    except OSError:
        return None
    return text.removesuffix(" (deleted)")


def attached_loops() -> dict[str, str]:
    """{loop device name: backing file} for every attached loop device."""
    result = {}
    for entry in Path("/sys/block").glob("loop*"):
        backing = backing_file(entry.name)
        if backing:
            result[entry.name] = backing
    return result


def _run(argv: list[str], what: str, timeout: float = 300) -> str:
    proc = None
    try:
        with held_while_starting():
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, stdin=subprocess.DEVNULL)
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:
        # reap the tool before its change is undone: subprocess.run does not wait after
        # Ctrl-C, and a losetup killed in its ioctl attaches the device after the undo looked
        if proc is not None:
            proc.kill()
            proc.wait()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise UsageError(f"{what}: {argv[0]} did not finish in {timeout:.0f} s") from None
        raise
    if proc.returncode != 0:
        detail = (stderr.strip() or stdout.strip()).splitlines()
        raise UsageError(f"{what}: {' '.join(argv)} failed: "
                         f"{detail[-1] if detail else f'exit {proc.returncode}'}")
    return stdout


@contextlib.contextmanager
def loop_filesystem(fs: str, size: int, mkfs_opts: str, mount_opts: str, work_dir: Path,
                    keep_image: bool, label: str, journal: Journal, metadata: dict[str, Any],
                    cgroup: str | None = None) -> Iterator[LoopFilesystem]:
    """`cgroup`: the run's memory cgroup, whose processes may be stopped to unmount."""
    check_mkfs_words(mkfs_opts, "--mkfs-opts", fs)     # again: settings made in code too
    check_mount_words(mount_opts, "--mount-opts", fs)
    work_dir.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(work_dir)
    free = st.f_bavail * st.f_frsize
    if free < size:
        raise UsageError(f"--fs-size {format_size(size)}: the image file needs that much but "
                         f"{work_dir} has only {format_size(free)} free; use --work-dir on a "
                         "larger filesystem or a smaller --fs-size")
    with contextlib.ExitStack() as stack:
        while True:
            stem = f"stallbench-{os.getpid()}-{next(_counter)}"
            suffix = ".img" if keep_image else SCRATCH_SUFFIX
            image = work_dir.resolve() / f"{stem}-{label}-{fs}{suffix}"
            entry = None if keep_image else journal.push("unlink", path=str(image))
            try:
                fd = os.open(image, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                if entry:
                    journal.forget(entry)
                continue
            if entry:
                stack.callback(journal.undo, entry)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
            break
        mount_point = work_dir.resolve() / f"{stem}.mnt"
        metadata.update({"type": fs, "size": size, "mkfs_opts": mkfs_opts,
                         "mount_opts": mount_opts, "image": str(image), "image_kept": keep_image})

        entry = journal.push("detach_loop", image=str(image), device=None)
        stack.callback(journal.undo, entry)
        device = _attach(image)
        journal.update(entry, device=device)
        if backing_file(device) != str(image):
            raise UsageError(f"loop device {device} is not backed by {image}; "
                             "refusing to format it")
        metadata["loop_device"] = device
        metadata["loop_direct_io"] = _read_flag(f"/sys/block/{device}/loop/dio")

        _run([tool(f"mkfs.{fs}"), *_FORCE[fs], *shlex.split(mkfs_opts), f"/dev/{device}"],
             f"--fs {fs} --mkfs-opts {mkfs_opts!r}")
        if fs in ("ext2", "ext3", "ext4"):
            metadata["features"] = _ext_features(device)

        entry = journal.push("rmdir", path=str(mount_point))
        stack.callback(journal.undo, entry)
        mount_point.mkdir()
        entry = journal.push("loop_umount", target=str(mount_point), device=device,
                             owner=os.getpid(), owner_start=process_start_time(os.getpid()),
                             cgroup=cgroup)
        stack.callback(journal.undo, entry)
        argv = [tool("mount"), "-t", fs]
        if mount_opts:
            argv += ["-o", mount_opts]
        _run([*argv, f"/dev/{device}", str(mount_point)],
             f"--fs {fs} --mount-opts {mount_opts!r}", timeout=120)
        shown = proc_mounts_entry(mount_point)
        if shown is None or Path(shown[0]).name != device:
            raise UsageError(f"mounting /dev/{device} on {mount_point} did not show up in "
                             "/proc/mounts")
        metadata["proc_mounts_type"] = shown[1]
        metadata["mounted_options"] = shown[2]
        info = mount_of(mount_point)
        if info is not None and info.mount_point == str(mount_point):
            metadata["mount_options"] = info.mount_options
            metadata["superblock_options"] = info.super_options
        metadata["mount_point"] = str(mount_point)
        yield LoopFilesystem(mount_point=mount_point, device=device, image=image)


def _attach(image: Path) -> str:
    """losetup --find --show, with direct I/O to the image where the host filesystem allows it
    (so pages are not cached twice, once for the loop device and once for the image)."""
    losetup = tool("losetup")
    try:
        out = _run([losetup, "--find", "--show", "--direct-io=on", str(image)], "losetup")
    except UsageError:
        out = _run([losetup, "--find", "--show", str(image)], "losetup")
    return Path(out.strip()).name


def _read_flag(path: str) -> bool | None:
    try:
        return Path(path).read_text().strip() == "1"
    except OSError:
        return None


def _ext_features(device: str) -> list[str]:
    try:
        out = _run([tool("dumpe2fs"), "-h", f"/dev/{device}"], "dumpe2fs", timeout=60)
    except UsageError:
        return []
    for line in out.splitlines():
        if line.startswith("Filesystem features:"):
            return line.split(":", 1)[1].split()
    return []


# -- undo -----------------------------------------------------------------------------------------


@register_undo("detach_loop")
def _undo_detach(action: dict[str, Any]) -> None:
    """Detach the loop device(s) backed by our image; a device now backed by anything else is
    someone else's and is left alone."""
    image = action["image"]
    candidates = [action["device"]] if action.get("device") else []
    candidates += [dev for dev, backing in attached_loops().items() if backing == image]
    for device in dict.fromkeys(candidates):
        if backing_file(device) == image:
            _run([tool("losetup"), "--detach", f"/dev/{device}"], "losetup --detach", timeout=60)


@register_undo("loop_umount")
def _undo_loop_umount(action: dict[str, Any]) -> None:
    unmount(Path(action["target"]), lambda: run_processes(action))


def run_processes(action: dict[str, Any]) -> set[int]:
    """The processes of the run that made a filesystem: those in its cgroup, and the
    descendants of its stallbench process while that is still the same process."""
    own: set[int] = set()
    if action.get("cgroup"):
        with contextlib.suppress(OSError, ValueError):
            own.update(int(pid) for pid in
                       Path(action["cgroup"], "cgroup.procs").read_text().split())
    owner = action.get("owner")
    if owner and process_start_time(int(owner)) == action.get("owner_start"):
        tree = ProcessSet()
        tree.add(int(owner))
        own.update(pid for pid in tree.pids() if pid != int(owner))
    return own


def unmount(mount_point: Path, own: Callable[[], set[int]] = set) -> None:
    """Unmount. If busy, stop the processes using the filesystem that belong to the run (`own`)
    and try again. Anyone else's (an engineer's shell that cd'd in) are left running: OSError
    naming them, the filesystem stays mounted for `stallbench cleanup` to retry later."""
    umount = tool("umount")
    others: list[int] = []
    for attempt in range(3):
        if proc_mounts_entry(mount_point) is None:
            return
        proc = subprocess.run([umount, str(mount_point)], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode == 0:
            continue
        users = processes_using(mount_point)
        ours = own() if users else set()
        others = [pid for pid in users if pid not in ours]
        for pid in users:
            if pid in ours:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.2 * (attempt + 1))
    if proc_mounts_entry(mount_point) is None:
        return
    others = [pid for pid in others if os.path.exists(f"/proc/{pid}")]
    if others:
        raise OSError(f"{mount_point} is still in use by {describe_processes(others)}, which "
                      "this run did not start: left running and the filesystem left mounted; "
                      "when they are gone (cd out of it), run `stallbench cleanup`")
    subprocess.run([umount, "--lazy", str(mount_point)], capture_output=True, timeout=60)
    if proc_mounts_entry(mount_point) is not None:
        raise OSError(f"cannot unmount {mount_point}")


def describe_processes(pids: list[int]) -> str:
    """'pid 123 (bash), pid 456 (less)'."""
    names = []
    for pid in pids[:5]:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            comm = "?"
        names.append(f"pid {pid} ({comm})")
    more = f" and {len(pids) - 5} more" if len(pids) > 5 else ""
    return ", ".join(names) + more


def processes_using(path: Path) -> list[int]:
    """Pids (not ours) with their cwd, root, an open file or a mapping under `path`."""
    prefix = os.path.realpath(path).rstrip("/") + "/"
    exact = prefix.rstrip("/")
    found = []

    def hit(target: str) -> bool:
        return target == exact or target.startswith(prefix)

    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = [entry / "cwd", entry / "root"]
            links += list((entry / "fd").iterdir())
            if any(hit(os.readlink(link)) for link in links if _is_link(link)):
                found.append(int(entry.name))
                continue
            with open(entry / "maps") as f:
                if any(hit(line.split(None, 5)[-1].strip()) for line in f
                       if len(line.split(None, 5)) == 6):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _is_link(path: Path) -> bool:
    try:
        os.readlink(path)
        return True
    except OSError:
        return False
