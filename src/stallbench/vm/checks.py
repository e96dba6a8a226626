"""Checks of a kernel variant made before anything changes (exit 2 when wrong); the rest of
its settings are checked inside the guest."""

from __future__ import annotations

from ..errors import UsageError
from ..variant import VariantSettings
from .initramfs import find_busybox
from .kernel import KernelError, check_kernel_spec
from .qemu import qemu_binary


def check_vm_settings(settings: VariantSettings) -> None:
    """Checks for a kernel variant made before anything changes (exit 2 when wrong)."""
    check_kernel_spec(settings.kernel)
    qemu_binary()
    try:
        find_busybox()
    except KernelError as exc:
        raise UsageError(str(exc)) from None
