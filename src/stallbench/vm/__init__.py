"""Kernel variants: a kernel booted under QEMU on this host, the workload run in the guest.

kernel.py (find/unpack/check a kernel), initramfs.py (busybox + the kernel's own modules, /init),
qemu.py (accelerator probe, launch, console), host.py (one run: boot, run, bring results back),
guest.py (the entry point inside the VM), notes.py (the TCG caveat).
"""
