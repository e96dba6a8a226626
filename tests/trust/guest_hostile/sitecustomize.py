"""A hostile guest for tests/trust/test_trust_guest.py (loaded by Python at start through the guest
job's PYTHONPATH). Inside the guest only (where the exchange folder holds the job), it wraps
os.replace: when stallbench writes outcome.json, the run's path becomes `../../victim` relative
to the exchange folder, and a device node, a FIFO and a symlink are planted in the run folder."""

import json
import os
from pathlib import Path

EXCHANGE = Path("/run/stallbench-vm")

if (EXCHANGE / "job.pkl").exists():
    _replace = os.replace

    def _lying_replace(source, target, *args, **kwargs):
        if Path(target).name == "outcome.json":
            outcome = json.loads(Path(source).read_text())
            for run in outcome.get("outcomes") or []:
                folder = Path(run["path"])
                for plant, *what in ((os.mknod, folder / "planted-null", 0o20666,
                                      os.makedev(1, 3)),
                                     (os.mkfifo, folder / "planted-fifo"),
                                     (os.symlink, "/etc", folder / "planted-link")):
                    try:            # a share with security_model=none refuses some of them
                        plant(*what)
                    except OSError:
                        pass
                run["path"] = f"{EXCHANGE}/../../victim"
            Path(source).write_text(json.dumps(outcome))
        return _replace(source, target, *args, **kwargs)

    os.replace = _lying_replace
