"""Plan / Variant / run options: what to run, under which configurations.

`stallbench run` builds a Plan from its flags; `stallbench run --plan FILE` from TOML
(`load_plan`). Everything is validated here, before anything on the machine changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class VariantSettings:
    """One configuration: where the workload's files live and what is changed on the system."""

    name: str
    dir: Path | None = None            # an existing directory: only used, never formatted
    fs: str | None = None              # ext2|ext3|ext4|xfs|btrfs on a loop device
    fs_size: int | None = None         # bytes; default: what the workload needs x 1.25
    mkfs_opts: str = ""
    mount_opts: str = ""
    work_dir: Path | None = None       # where images live; default under the results directory
    keep_image: bool = False
    memory: int | None = None          # bytes: memory cgroup limit for the workload
    system_memory: int | None = None   # bytes: leave only about this much available system-wide
    sysctls: dict[str, str] = field(default_factory=dict)
    scheduler: str | None = None       # I/O scheduler of the block device under the directory
    drop_caches: bool = True


@dataclass
class Plan:
    workload: str
    workload_options: dict[str, Any]
    variants: list[VariantSettings]
    duration_s: float = 10.0
    iterations: int = 1
    monitors: list[str] | None = None  # None: the default set
    results: Path = Path("results")
    source: Path | None = None         # the plan file, for messages
