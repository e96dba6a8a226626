"""The demo plan: a short A/B comparison that shows what stallbench is for on this machine.

As root: pgioperf as is vs pgioperf with its processes in a tight memory cgroup (seed 004's
workload, seed 000's low-memory condition). Without root: pgioperf with 2 vs 8 random readers
beside the same WAL writer (no privilege needed), and a note saying why.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .plan import Plan
from .planfile import load_plan

DEMO_DURATION_S = 20.0
DEMO_DATA_SIZE = "384M"
DEMO_MEMORY_LIMIT = 96 << 20


def demo_plan(results: Path, as_root: bool | None = None) -> tuple[Plan, str]:
    """The plan and one sentence saying what it compares. The plan is written as
    RESULTS/demo-<time>/demo.toml and read back like any plan, so the commands that decide
    more (`run --plan ... --duet`, `calibrate`) can name it."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results = (Path(results) / f"demo-{stamp}").absolute()
    readers = 4
    if as_root:
        limit_mib = DEMO_MEMORY_LIMIT >> 20
        variants = ('[[variants]]\nname = "unlimited"\n\n'
                    f'[[variants]]\nname = "memcg-{limit_mib}M"\nmemory = "{limit_mib}M"\n')
        story = (f"pgioperf ({readers} readers, {DEMO_DATA_SIZE} data) as is vs in a "
                 f"{limit_mib} MiB memory cgroup")
    else:
        variants = ('[[variants]]\nname = "2-readers"\n[variants.workload_options]\n'
                    'readers = 2\n\n'
                    '[[variants]]\nname = "8-readers"\n[variants.workload_options]\n'
                    'readers = 8\n')
        story = ("not root, so no memory cgroup: pgioperf with 2 vs 8 random readers beside the "
                 "same WAL writer")
    text = (f"# stallbench demo: {story}\n"
            f'workload = "pgioperf"\nduration = "{DEMO_DURATION_S:g}s"\niterations = 1\n'
            f"results = {json.dumps(str(results))}\n\n"
            f'[workload_options]\nreaders = {readers}\ndata_size = "{DEMO_DATA_SIZE}"\n'
            'wal_size = "16M"\ncheckpoint_fsync_every = 5000\n\n' + variants)
    results.mkdir(parents=True, exist_ok=True)
    path = results / "demo.toml"
    path.write_text(text)
    return load_plan(path), story
