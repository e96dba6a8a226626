"""Kernel variants: a kernel booted under QEMU on this host, the workload run in the guest.

kernel.py (find/unpack/check a kernel), initramfs.py (busybox + the kernel's own modules, /init),
qemu.py (accelerator probe, launch, console), host.py (one run: boot, run, bring results back),
checks.py (a kernel variant's checks before any change), exchange.py (the paths host and guest
agree on); the guest's side is run/guest.py, the TCG caveat results/guestnote.py.
"""
