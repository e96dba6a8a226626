"""Running a plan: interleaved rounds, duets, monitors, --iterations auto, a kernel variant's
run under QEMU (vmhost.py) and the guest side (guest.py)."""
