"""The guest side: `python -m stallbench.run.guest JOB` runs inside the VM (as the guest's root,
with the host's stallbench installation seen read-only over 9p).

It formats the virtual disk (/dev/vda) with the variant's filesystem, mounts it, and runs the
one-variant, one-iteration plan the host pickled with the ordinary runner, so memory cgroup,
sysctls, scheduler, cache dropping, warm-up and monitors all act on the guest kernel. Results go
to the exchange directory (9p, read-write), from where the host moves them into RESULTS.
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

from ..core.errors import ExitCode
from ..core.unusedimports import keep_unused_modules_out
from ..vm.exchange import DISK, DISK_MOUNT, EXCHANGE, JOB_FILE, OUTCOME_FILE


def _write_outcome(data: dict) -> None:
    tmp = EXCHANGE / f".{OUTCOME_FILE}.tmp"
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, EXCHANGE / OUTCOME_FILE)


def _format_disk(fs: str, mkfs_opts: str, mount_opts: str) -> dict:
    from ..env.blockdev import proc_mounts_entry
    from ..env.loopfs import _FORCE, _run
    from ..env.tools import tool

    _run([tool(f"mkfs.{fs}"), *_FORCE[fs], *shlex.split(mkfs_opts), DISK],
         f"--fs {fs} --mkfs-opts {mkfs_opts!r} on the guest's disk")
    DISK_MOUNT.mkdir(parents=True, exist_ok=True)
    argv = [tool("mount"), "-t", fs, *(["-o", mount_opts] if mount_opts else [])]
    _run([*argv, DISK, str(DISK_MOUNT)], f"--fs {fs} --mount-opts {mount_opts!r}")
    shown = proc_mounts_entry(DISK_MOUNT)
    return {"type": fs, "device": DISK, "mkfs_opts": mkfs_opts, "mount_opts": mount_opts,
            "mounted_options": shown[2] if shown else None}


def main(argv: list[str]) -> int:
    keep_unused_modules_out()
    job_path = Path(argv[0]) if argv else EXCHANGE / JOB_FILE
    try:
        job = pickle.loads(job_path.read_bytes())
        plan = job["plan"]
        disk = _format_disk(job["fs"], job["mkfs_opts"], job["mount_opts"])
        plan.variants[0].dir = DISK_MOUNT
        from ..results.runmeta import Status
        from .runner import run_plan

        outcomes = run_plan(plan, progress=False)
        _write_outcome({"disk": disk, "outcomes": [
            {"path": str(o.path), "status": o.status, "reason": o.reason} for o in outcomes]})
        complete = all(o.status == Status.COMPLETE for o in outcomes)
        return ExitCode.OK if complete else ExitCode.FAILURE
    except KeyboardInterrupt:
        _write_outcome({"error": "interrupted before the run started"})
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the host needs the reason, not a traceback
        from ..core.errors import UsageError

        message = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, UsageError):
            traceback.print_exc()
        _write_outcome({"error": message})
        return ExitCode.USAGE
    finally:
        if DISK_MOUNT.is_dir():             # the guest powers off next; flush the disk first
            subprocess.run(["umount", str(DISK_MOUNT)], capture_output=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
