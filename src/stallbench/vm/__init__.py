"""Kernels under QEMU, the machinery a kernel variant's run uses (run/vmhost.py runs it, and
run/guest.py is the guest's side).

kernel.py (find/unpack/check a kernel), initramfs.py (busybox + the kernel's own modules, /init),
qemu.py (accelerator probe, launch, console), checks.py (a kernel variant's checks before any
change), exchange.py (the paths host and guest agree on); the TCG caveat is
results/guestnote.py's.
"""
