"""Checks of a kernel variant made before anything changes (exit 2 when wrong): the kernel
file is a bzImage, a Debian package or a kernel tree, the guest fits in this machine's memory,
QEMU and busybox are there. The rest of its settings are checked inside the guest."""

from __future__ import annotations

from ..analysis.display import format_size
from ..core.errors import UsageError
from ..env.sysmem import SAFE_FLOOR, meminfo
from ..settings.variant import VariantSettings
from .initramfs import find_busybox
from .kernel import KernelError, check_kernel_file
from .qemu import qemu_binary

DEFAULT_CPUS = 2
DEFAULT_MEMORY = 1 << 30


def check_vm_memory_fits(memory: int, what: str = "--vm-memory") -> None:
    """The guest's memory must leave the host its safe floor: QEMU cannot set up more than the
    machine has, and a guest that pushes the host into reclaim measures the host."""
    total = meminfo().get("MemTotal", 0)
    if memory + SAFE_FLOOR > total:
        raise UsageError(f"{what} {format_size(memory)}: this machine has "
                         f"{format_size(total)} in all and keeps at least "
                         f"{format_size(SAFE_FLOOR)} for itself; give at most "
                         f"{format_size(max(0, total - SAFE_FLOOR) >> 20 << 20)}")


def check_vm_settings(settings: VariantSettings) -> None:
    """Checks for a kernel variant made before anything changes (exit 2 when wrong)."""
    check_vm_memory_fits(settings.vm_memory or DEFAULT_MEMORY)
    try:
        check_kernel_file(settings.kernel)
    except KernelError as exc:
        raise UsageError(f"--kernel {exc}") from None
    check_vm_host()


def check_vm_host() -> None:
    """What this machine needs to boot any kernel variant: QEMU and a static busybox."""
    qemu_binary()
    try:
        find_busybox()
    except KernelError as exc:
        raise UsageError(str(exc)) from None
