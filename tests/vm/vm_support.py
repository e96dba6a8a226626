"""Helpers for the kernel-variant tests (test_vm_*.py): two real Debian kernel packages (fetched
by scripts/install-system-deps.sh into /var/cache/stallbench-test-kernels), QEMU and a static
busybox. The tests skip, saying which, only when one of those is truly absent."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS_DIR = Path(os.environ.get("STALLBENCH_TEST_KERNELS", "/var/cache/stallbench-test-kernels"))


def deb_release(deb: Path) -> str:
    """The kernel release as the package's own file list names it (boot/vmlinuz-RELEASE): an
    oracle independent of stallbench's reading of the bzImage header."""
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    match = re.search(r"\./boot/vmlinuz-(\S+)", listing)
    assert match, f"{deb}: no boot/vmlinuz-* in the package"
    return match.group(1)


def _why_not() -> str | None:
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 not installed (scripts/install-system-deps.sh installs it)"
    from stallbench.vm.initramfs import find_busybox
    from stallbench.vm.kernel import KernelError

    try:
        find_busybox()
    except KernelError as exc:
        return str(exc)
    if shutil.which("dpkg-deb") is None:
        return "dpkg-deb not installed"
    if len(_debs()) < 2:
        return (f"fewer than two linux-image-*-amd64-unsigned packages in {KERNELS_DIR} "
                "(scripts/install-system-deps.sh downloads them as root)")
    return None


def _debs() -> list[Path]:
    debs = [p for p in KERNELS_DIR.glob("linux-image-*.deb")
            if re.match(r"linux-image-[\d.]+-\d+-amd64-unsigned_", p.name)]   # not cloud: no 9p
    return sorted(debs, key=lambda p: [int(x) if x.isdigit() else x
                                       for x in re.split(r"(\d+)", p.name)])


requires_vm = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


@functools.cache
def guest_kernels() -> list[tuple[Path, str]]:
    """The two newest test kernels as (package, release), older first."""
    debs = _debs()
    by_release: dict[str, Path] = {}
    for deb in debs:
        by_release[deb_release(deb)] = deb
    releases = list(by_release)[-2:]
    assert len(releases) == 2, f"two different kernel releases needed in {KERNELS_DIR}"
    return [(by_release[r], r) for r in releases]


def qemu_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-x", "qemu-system-x86"], capture_output=True,
                         text=True).stdout
    return {int(p) for p in out.split()}


def qemu_children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid), "-x", "qemu-system-x86"],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]
