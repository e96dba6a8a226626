"""The default --fs image holds what the workload needs once the filesystem's own overhead
(journal, inode tables, reserved blocks, metadata) is taken off: every --fs at a small and a
large size (issue 15 item 9). Images are sparse, so the large size costs only mkfs time."""

from __future__ import annotations

import os

import pytest
from env_support import MIB, TinyWorkload, nothing_left

from conftest import run_stallbench
from stallbench.core.journal import Journal
from stallbench.env import environment
from stallbench.env.loopfs import MIN_SIZE, default_size
from stallbench.env.tools import find_tool
from stallbench.settings.variant import VariantSettings

pytestmark = [pytest.mark.machine, pytest.mark.root]


@pytest.mark.parametrize("needed", [64 * MIB, 6 << 30], ids=["64M", "6G"])
@pytest.mark.parametrize("fs", ["ext2", "ext3", "ext4", "xfs", "btrfs"])
def test_the_default_image_has_room_for_what_the_workload_needs(fs, needed, tmp_path):
    if find_tool(f"mkfs.{fs}") is None:
        pytest.skip(f"mkfs.{fs} is not installed")
    results = tmp_path / "results"
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as journal:
        with environment(VariantSettings(name=fs, fs=fs), journal, TinyWorkload(needed),
                         results) as state:
            st = os.statvfs(state.workdir)
            free = st.f_bavail * st.f_frsize
            size = state.metadata["filesystem"]["size"]
    assert size == default_size(fs, needed)
    assert free >= needed, f"{fs} of {size / MIB:.0f} MiB has {free / MIB:.1f} MiB free"
    assert size <= max(MIN_SIZE[fs], needed * 1.6) + 160 * MIB   # and not wildly more
    assert nothing_left(results) == []


def test_ext4_with_a_64m_file_runs_by_default(results):
    run_stallbench("run", "randread", "--variant", "a", "--results", str(results), "--fs",
                   "ext4", "--file-size", "64M", "--duration", "0.3s", "--monitors", "none",
                   "--no-progress", "--no-drop-caches", check=True)
