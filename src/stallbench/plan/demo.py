"""The demo plan: a short A/B comparison that shows what stallbench is for on this machine.

As root: pgioperf as is vs pgioperf with its processes in a tight memory cgroup (seed 004's
workload, seed 000's low-memory condition). Without root: pgioperf with 2 vs 8 random readers
beside the same WAL writer (no privilege needed), and a note saying why.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .plan import Plan, VariantSettings

DEMO_DURATION_S = 20.0
DEMO_DATA_SIZE = "384M"
DEMO_MEMORY_LIMIT = 96 << 20


def demo_plan(results: Path, as_root: bool | None = None) -> tuple[Plan, str]:
    """The plan and one sentence saying what it compares."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results = Path(results) / f"demo-{stamp}"
    options = {"readers": 4, "data_size": DEMO_DATA_SIZE, "wal_size": "16M",
               "checkpoint_fsync_every": 5000}
    if as_root:
        limit_mib = DEMO_MEMORY_LIMIT >> 20
        variants = [
            VariantSettings(name="unlimited"),
            VariantSettings(name=f"memcg-{limit_mib}M", memory=DEMO_MEMORY_LIMIT),
        ]
        story = (f"pgioperf (4 readers, {DEMO_DATA_SIZE} data) as is vs in a {limit_mib} MiB "
                 "memory cgroup")
    else:
        variants = [VariantSettings(name="2-readers", workload_options={"readers": 2}),
                    VariantSettings(name="8-readers", workload_options={"readers": 8})]
        story = ("not root, so no memory cgroup: pgioperf with 2 vs 8 random readers beside the "
                 "same WAL writer")
    plan = Plan(workload="pgioperf", workload_options=options, variants=variants,
                duration_s=DEMO_DURATION_S, iterations=1, monitors=None, results=results)
    return plan, story
