"""A guest kernel: a Debian linux-image-*.deb, a directory with boot/vmlinuz-* and
lib/modules/<release>/, or a bare bzImage (modules beside it in lib/modules/<release>, or none).

A package is unpacked once into the kernel cache (a directory per content hash, made under a
temporary name and renamed when complete, so a killed unpack is never taken for a good one). The
bzImage header is read before anything boots: a truncated or foreign file is refused with one line.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError
from ..core.journal import Journal
from ..core.kernelconfig import config_digest, read_config_file


class KernelError(Exception):
    """The kernel cannot be booted (truncated image, missing support): one line for run.json."""


@dataclass
class Kernel:
    spec: str                 # what the user gave
    image: Path               # the bzImage
    release: str              # from the bzImage header (what uname -r will say)
    modules: Path | None      # lib/modules/<release> or None (a kernel with everything built in)
    config: dict[str, str]    # CONFIG_* from boot/config-<release>, {} when not shipped
    digest: str               # sha256 of the bzImage, for caches (the same kernel, however given)


def cache_dir(work_dir: Path | None = None) -> Path:
    """Where unpacked kernels, initramfs images and KVM probe results are kept."""
    if os.environ.get("STALLBENCH_KERNEL_CACHE"):
        return Path(os.environ["STALLBENCH_KERNEL_CACHE"])
    if work_dir is not None:
        return Path(work_dir) / "kernels"
    if os.geteuid() == 0:
        return Path("/var/cache/stallbench/kernels")
    return Path.home() / ".cache/stallbench/kernels"


def check_kernel_spec(spec: str, what: str = "--kernel") -> Path:
    """Shape check made with the plan (before anything changes): the path exists."""
    path = Path(spec).expanduser()
    if not path.exists():
        raise UsageError(f"{what} {spec}: no such file or directory; give a bzImage, a "
                         "linux-image-*.deb or a directory with boot/vmlinuz-* and lib/modules/")
    if not (path.is_file() or path.is_dir()):
        raise UsageError(f"{what} {spec}: not a file or directory")
    return path


def check_kernel_file(spec: str) -> Path:
    """What can be known of a kernel before anything starts, from the first bytes of its
    files: a Debian package (an ar archive starting with debian-binary), a directory with a
    kernel image in it, or a file with the x86 boot header. KernelError (one line) when not;
    a damaged image or package is found when it is read for its run."""
    path = check_kernel_spec(spec)
    if path.is_dir():
        _boot_header(tree_image(spec, path))
    elif path.suffix == ".deb" or _is_ar(path):
        with open(path, "rb") as f:
            head = f.read(8 + 16)
        if head[:8] != b"!<arch>\n" or not head[8:].startswith(b"debian-binary"):
            raise KernelError(f"{spec}: not a Debian package (no debian-binary member); give a "
                              "linux-image-*.deb, a vmlinuz/bzImage or an unpacked kernel")
    else:
        _boot_header(path)
    return path


def resolve_kernel(spec: str, work_dir: Path | None = None, journal: Journal | None = None
                   ) -> Kernel:
    """Find (unpacking a .deb into the cache) and check a kernel; KernelError when unusable."""
    path = check_kernel_spec(spec)
    if path.is_file() and (path.suffix == ".deb" or _is_ar(path)):
        root = _unpack_deb(path, cache_dir(work_dir), journal)
        return _from_tree(spec, root, None)
    if path.is_dir():
        return _from_tree(spec, path, None)
    release = read_bzimage_release(path)
    modules = None
    for candidate in (path.parent / "lib/modules" / release, path.parent / release):
        if candidate.is_dir():
            modules = candidate
    return Kernel(spec, path, release, modules, {}, file_sha256(path))


def _is_ar(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"!<arch>\n"


def tree_image(spec: str, root: Path) -> Path:
    """The kernel image of an unpacked package or kernel tree (the newest boot/vmlinuz-*)."""
    images = sorted((root / "boot").glob("vmlinuz-*")) + sorted(root.glob("vmlinuz-*")) \
        + sorted(root.glob("bzImage")) + sorted(root.glob("arch/x86/boot/bzImage"))
    if not images:
        raise KernelError(f"{spec}: no boot/vmlinuz-* or bzImage in it")
    return images[-1]


def _from_tree(spec: str, root: Path, digest: str | None) -> Kernel:
    image = tree_image(spec, root)
    release = read_bzimage_release(image)
    modules = root / "lib/modules" / release
    config_path = root / "boot" / f"config-{release}"
    config = read_config_file(config_path) if config_path.is_file() else {}
    if not config and (root / ".config").is_file():
        config = read_config_file(root / ".config")
    return Kernel(spec, image, release, modules if modules.is_dir() else None, config,
                  digest or file_sha256(image))


def kernel_identity(spec: str) -> dict[str, str]:
    """What a kernel variant runs, to know it again (run.json `plan.kernel`): the file given
    by name and sha256 (a .deb or an image; of a directory, its kernel image by its path in
    it) and, where the directory holds its config (a `bisect --git` build's .config), the
    config's hash (core/kernelconfig.py); {} when the file cannot be read."""
    path = Path(spec).expanduser()
    try:
        if not path.is_dir():
            return {"file": path.name, "sha256": file_sha256(path)}
        image = tree_image(spec, path)
        identity = {"file": str(image.relative_to(path)), "sha256": file_sha256(image)}
    except (OSError, KernelError):
        return {}
    release_configs = sorted((path / "boot").glob("config-*"))
    for candidate in (*release_configs, path / ".config"):
        config = read_config_file(candidate)
        if config:
            identity["config_sha256"] = config_digest(config)
            break
    return identity


def _boot_header(path: Path) -> bytes:
    """The first 16 KiB of an x86 kernel image; KernelError when it has no boot header."""
    try:
        with open(path, "rb") as f:
            head = f.read(0x4000)
    except OSError as exc:
        raise KernelError(f"{path}: cannot read the kernel image ({exc.strerror})") from None
    if len(head) < 0x260 or head[0x202:0x206] != b"HdrS":
        raise KernelError(f"{path}: not an x86 bzImage (no boot header); give a vmlinuz/bzImage "
                          "or a linux-image-*.deb")
    return head


def read_bzimage_release(path: Path) -> str:
    """The release string from the x86 boot header; KernelError if the file is not a whole
    bzImage (too short for what its header declares, or no header at all)."""
    size = path.stat().st_size
    head = _boot_header(path)
    setup_sects = head[0x1F1] or 4
    syssize = struct.unpack_from("<I", head, 0x1F4)[0]
    expected = (setup_sects + 1) * 512 + syssize * 16
    if size < expected:
        raise KernelError(f"{path}: kernel image is truncated ({size} bytes, its header "
                          f"declares {expected}); copy or download it again")
    offset = struct.unpack_from("<H", head, 0x20E)[0] + 0x200
    with open(path, "rb") as f:
        f.seek(offset)
        text = f.read(256)
    release = text.split(b"\0", 1)[0].split(b" ", 1)[0].decode("ascii", "replace")
    if not re.fullmatch(r"[A-Za-z0-9._+~-]{1,64}", release):
        raise KernelError(f"{path}: no readable version string in the kernel image")
    return release


_PAYLOADS = ((b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b\x08\x00", "gzip"))
XEN_ELFNOTE_PHYS32_ENTRY = 18


def pvh_vmlinux(kernel: Kernel, cache: Path, journal: Journal | None = None) -> Path | None:
    """The uncompressed ELF kernel inside the bzImage, when it has a PVH entry point: QEMU then
    starts it directly, without firmware or the decompressor (under TCG: ~2-4 s to /init
    instead of ~8-10 s here). None when the payload is not xz/gzip or has no PVH note."""
    target = cache / f"vmlinux-{kernel.digest[:16]}"
    if target.exists():
        return target
    # (named .no-pvh: a .none marker was written, wrongly, for every xz payload before the
    # decompressor below learnt to stop at the end of the stream)
    marker = cache / f"vmlinux-{kernel.digest[:16]}.no-pvh"
    if marker.exists():
        return None
    data = kernel.image.read_bytes()
    setup = ((data[0x1F1] or 4) + 1) * 512
    payload_offset, payload_length = struct.unpack_from("<II", data, 0x248)
    start = setup + payload_offset
    blob = data[start:start + payload_length]
    elf = None
    for magic, kind in _PAYLOADS:
        if blob.startswith(magic):
            # one stream, whatever follows it left alone: the payload ends with its
            # uncompressed size (4 bytes), which lzma.decompress would take for a second
            # stream and fail on (so no xz kernel ever booted through PVH)
            try:
                elf = (lzma.LZMADecompressor() if kind == "xz"
                       else zlib.decompressobj(16 + zlib.MAX_WBITS)).decompress(blob)
            except (lzma.LZMAError, zlib.error):
                elf = None
    cache.mkdir(parents=True, exist_ok=True)
    if elf is None or not _has_pvh_note(elf):
        marker.write_text("")
        return None
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    entry = journal.push("unlink", path=str(partial.resolve())) if journal else None
    partial.write_bytes(elf)
    os.replace(partial, target)
    if entry is not None:
        journal.forget(entry)
    return target


def _has_pvh_note(elf: bytes) -> bool:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        base = phoff + i * phentsize
        p_type, = struct.unpack_from("<I", elf, base)
        if p_type != 4:                                   # PT_NOTE
            continue
        offset, = struct.unpack_from("<Q", elf, base + 8)
        size, = struct.unpack_from("<Q", elf, base + 32)
        pos, end = offset, offset + size
        while pos + 12 <= end:
            namesz, descsz, note_type = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz]
            if name.rstrip(b"\0") == b"Xen" and note_type == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            pos += 12 + (-(-namesz // 4) * 4) + (-(-descsz // 4) * 4)
    return False


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _unpack_deb(deb: Path, cache: Path, journal: Journal | None) -> Path:
    digest = file_sha256(deb)
    target = cache / f"deb-{digest[:16]}"
    if (target / ".complete").exists():
        return target
    dpkg = shutil.which("dpkg-deb")
    if dpkg is None:
        raise UsageError("dpkg-deb not found: it unpacks linux-image-*.deb files; install dpkg "
                         "or give an unpacked kernel directory")
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f".partial-{digest[:16]}-{os.getpid()}"
    entry = journal.push("rmtree", path=str(partial.resolve())) if journal else None
    shutil.rmtree(partial, ignore_errors=True)
    try:
        proc = subprocess.run([dpkg, "-x", str(deb), str(partial)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise KernelError(f"{deb}: cannot unpack: "
                              f"{(proc.stderr.strip().splitlines() or ['dpkg-deb failed'])[-1]}")
        (partial / ".complete").write_text(str(deb) + "\n")
        try:
            os.rename(partial, target)
        except OSError:
            if not (target / ".complete").exists():   # a killed unpack: ours replaces it
                shutil.rmtree(target, ignore_errors=True)
                os.rename(partial, target)
            # else another stallbench unpacked it meanwhile (and may be using it): keep that
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        if entry is not None:
            journal.forget(entry)
    return target
