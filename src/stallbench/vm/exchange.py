"""What the host and the guest agree on: where the exchange directory (9p) is mounted in the
guest, the virtual disk, and the file the guest leaves its outcome in."""

from __future__ import annotations

from pathlib import Path

EXCHANGE = Path("/run/stallbench-vm")
DISK = "/dev/vda"
DISK_MOUNT = Path("/run/stallbench-disk")
OUTCOME_FILE = "outcome.json"
JOB_FILE = "job.pkl"
