"""The guest's initramfs: Debian's static busybox, the kernel package's own modules needed to
reach the host's files and the virtual disk (virtio, 9p, the filesystems), and /init.

/init mounts the host's root filesystem read-only over virtio-9p, gives it its own /proc, /sys,
/dev, /run and /tmp, mounts the run's exchange directory (read-write 9p) and runs the job script
the host wrote there, in a chroot, with ttyS0 as its controlling terminal (so a Ctrl-C the host
writes to the serial line reaches it as SIGINT). Then it powers the guest off.

Module dependencies are read from each module's own .modinfo section (no depmod/kmod needed on
the host); compressed modules (.ko.xz) are decompressed here, since busybox insmod loads plain ones.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import struct
from pathlib import Path

from ..core.journal import Journal
from .kernel import Kernel, KernelError

BUSYBOX_PATHS = ("/bin/busybox", "/usr/bin/busybox")
# modules for: PCI virtio devices, the disk, 9p shares, loop, crc32c (ext4 and btrfs load it by
# crypto name, which no depends= names); the filesystems are added per variant
BASE_MODULES = ("virtio_pci", "virtio_blk", "9pnet_virtio", "9p", "loop", "crc32c_generic",
                "crc32c_intel")
FS_MODULES = {"ext2": "ext4", "ext3": "ext4", "ext4": "ext4", "xfs": "xfs", "btrfs": "btrfs"}
MARK = "stallbench-guest:"   # lines /init prints on the console, read by the host


def find_busybox() -> Path:
    for candidate in BUSYBOX_PATHS:
        path = Path(candidate)
        if path.is_file() and _is_static(path):
            return path
    raise KernelError("no static busybox found (it is the guest's /init shell); install "
                      "busybox-static (scripts/install-system-deps.sh)")


def _is_static(path: Path) -> bool:
    data = path.read_bytes()[:1 << 16]
    return data[:4] == b"\x7fELF" and b"/lib64/ld-linux" not in data and b"ld-linux" not in data


def _norm(name: str) -> str:
    return name.replace("-", "_")


def module_index(modules: Path) -> dict[str, Path]:
    """Module name -> file, for every .ko / .ko.xz / .ko.gz under lib/modules/<release>."""
    index: dict[str, Path] = {}
    for root, _dirs, files in os.walk(modules):
        for name in files:
            for suffix in (".ko", ".ko.xz", ".ko.gz"):
                if name.endswith(suffix):
                    index[_norm(name[: -len(suffix)])] = Path(root) / name
    return index


def builtin_modules(modules: Path) -> set[str]:
    path = modules / "modules.builtin"
    if not path.is_file():
        return set()
    return {_norm(Path(line.strip()).name.removesuffix(".ko"))
            for line in path.read_text().splitlines() if line.strip()}


def read_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    return data


def modinfo(data: bytes) -> dict[str, list[str]]:
    """The key=value strings of an ELF64 module's .modinfo section."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise KernelError("not an ELF64 kernel module")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        base = shoff + i * shentsize
        name, = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        sections.append((name, offset, size))
    _n, stroff, strsize = sections[shstrndx]
    info: dict[str, list[str]] = {}
    for name, offset, size in sections:
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == b".modinfo":
            for item in data[offset:offset + size].split(b"\0"):
                key, sep, value = item.decode("utf-8", "replace").partition("=")
                if sep:
                    info.setdefault(key, []).append(value)
    return info


def module_closure(modules: Path, wanted: list[str]) -> list[tuple[str, bytes]]:
    """The wanted modules and their dependencies, dependencies first; built-in ones skipped.
    A wanted module that is neither built in nor shipped is left out (the kernel may not need
    it, e.g. virtio_pci built in); /init reports what it could not mount."""
    index = module_index(modules)
    builtin = builtin_modules(modules)
    order: list[tuple[str, bytes]] = []
    done: set[str] = set()

    def visit(name: str, depth: int = 0) -> None:
        name = _norm(name)
        if name in done or name in builtin or depth > 50:
            return
        done.add(name)
        path = index.get(name)
        if path is None:
            return
        data = read_module(path)
        for deps in modinfo(data).get("depends", []):
            for dep in filter(None, deps.split(",")):
                visit(dep, depth + 1)
        order.append((name, data))

    for name in wanted:
        visit(name)
    return order


INIT = r"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /host /tmp
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo "MARK init $(uname -r)" > /dev/ttyS0
for m in $(cat /modules/order); do
  insmod /modules/$m.ko 2>/dev/ttyS0 || echo "MARK insmod $m failed" > /dev/ttyS0
done
fail() { echo "MARK fail $*" > /dev/ttyS0; sync; poweroff -f; sleep 10; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host \
  || fail "cannot mount the host's root over virtio-9p (kernel without 9p/virtio support?)"
mount -t tmpfs -o mode=0755 tmpfs /host/run || fail "no /run on the host root"
if [ -z "$STALLBENCH_HOST_TMP" ]; then
  mount -t tmpfs -o mode=1777 tmpfs /host/tmp || fail "no /tmp on the host root"
fi
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/shm /host/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t cgroup2 cgroup2 /host/sys/fs/cgroup 2>/dev/null \
  && echo "+memory +io" > /host/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
mkdir -p /host/run/stallbench-vm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 exchange /host/run/stallbench-vm \
  || fail "cannot mount the exchange directory over virtio-9p"
echo "MARK up $(uname -r)" > /dev/ttyS0
if [ -n "$STALLBENCH_PROBE" ]; then echo "MARK probe ok"; sync; poweroff -f; fi
setsid -c chroot /host /bin/sh /run/stallbench-vm/job.sh </dev/ttyS0 >/dev/ttyS0 2>&1
echo "MARK exit $?" > /dev/ttyS0
umount /host/run/stallbench-vm
sync
poweroff -f
sleep 10
""".replace("MARK", MARK)


def build_initramfs(kernel: Kernel, filesystems: list[str], cache: Path,
                    journal: Journal | None = None, extra_modules: tuple[str, ...] = ()) -> Path:
    """An uncompressed newc cpio (the kernel unpacks it itself), cached per kernel and set of
    modules (`extra_modules`: more, e.g. virtio_net for a guest with a network device)."""
    wanted = list(BASE_MODULES) + sorted({FS_MODULES[fs] for fs in filesystems}) \
        + list(extra_modules)
    busybox = find_busybox()
    modules_id = ""
    if kernel.modules is not None:
        stamps = [kernel.modules / n for n in ("modules.order", "modules.builtin")]
        modules_id = f"{kernel.modules}:" + ",".join(
            str(p.stat().st_mtime_ns) for p in stamps if p.exists())
    key = hashlib.sha256(f"{kernel.digest}|{modules_id}|{','.join(wanted)}|{INIT}|"
                         f"{busybox.stat().st_size}".encode()).hexdigest()[:16]
    target = cache / f"initramfs-{key}.cpio"
    if target.exists():
        return target
    modules = module_closure(kernel.modules, wanted) if kernel.modules else []
    cache.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    entry = journal.push("unlink", path=str(partial.resolve())) if journal else None
    with open(partial, "wb") as f:
        writer = _Cpio(f)
        for name in ("bin", "proc", "sys", "dev", "host", "tmp", "modules"):
            writer.add(name, b"", 0o040755)
        writer.add("bin/busybox", busybox.read_bytes(), 0o100755)
        writer.add("init", INIT.encode(), 0o100755)
        for name, data in modules:
            writer.add(f"modules/{name}.ko", data, 0o100644)
        writer.add("modules/order", "".join(f"{n}\n" for n, _ in modules).encode(), 0o100644)
        writer.trailer()
    os.replace(partial, target)
    if entry is not None:
        journal.forget(entry)
    return target


class _Cpio:
    """The newc cpio format, as the kernel's initramfs unpacker reads it."""

    def __init__(self, f):
        self.f = f
        self.ino = 1

    def add(self, name: str, data: bytes, mode: int) -> None:
        encoded = name.encode() + b"\0"
        header = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, 1 if mode & 0o100000 else 2, 0, len(data), 0, 0, 0, 0,
            len(encoded), 0))
        self.ino += 1
        self.f.write(header.encode() + encoded)
        self._pad(110 + len(encoded))
        self.f.write(data)
        self._pad(len(data))

    def _pad(self, n: int) -> None:
        self.f.write(b"\0" * (-n % 4))

    def trailer(self) -> None:
        self.add("TRAILER!!!", b"", 0)
