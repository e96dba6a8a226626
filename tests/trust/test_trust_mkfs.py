"""--mkfs-opts and --mount-opts never reach a device stallbench did not make (issue 34 item 6).

`--mkfs-opts dev/sdz` once ran `mkfs.btrfs -f -q dev/sdz /dev/loopN`, which formats both
devices (mkfs.ext4 took the loop device as a block count: e2fsprogs 1.47 refuses that one, after
the loop device was attached). Here the relative path resolves to a block device node the test
made for a second loop device of its own (never a disk of this machine); the oracle is that
device's own bytes (all zero, as the test wrote them) and the loop devices the kernel lists.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import stallbench.env.loopfs  # noqa: F401 - its undo kind, detach_loop
from stallbench.core.journal import Journal

pytestmark = [pytest.mark.machine, pytest.mark.root]

VICTIM = 128 << 20           # the test's own device: as large as a btrfs needs
RUN = ["run", "randread", "--duration", "1", "--file-size", "1M", "--monitors", "none"]


def sb(*args: str, cwd: Path, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "STALLBENCH_STATE_DIR": str(state)})


def _loops_backed_by(folder: Path) -> list[str]:
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if str(folder) in line]


def test_a_relative_path_in_mkfs_opts_formats_nothing(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    image = tmp_path / "victim.img"
    with open(image, "wb") as f:
        f.truncate(VICTIM)
    with Journal(state) as journal:
        entry = journal.push("detach_loop", image=str(image), device=None)
        device = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                                text=True, check=True).stdout.strip()
        journal.update(entry, device=Path(device).name)
        (tmp_path / "dev").mkdir()
        node = tmp_path / "dev" / "sdz"
        os.mknod(node, stat.S_IFBLK | 0o600, os.stat(device).st_rdev)
        results = tmp_path / "results"
        run = sb(*RUN, "--fs", "btrfs", "--mkfs-opts", "dev/sdz", "--results", str(results),
                 cwd=tmp_path, state=state)
        with open(node, "rb") as f:                 # the test's own device, read through it
            untouched = f.read(VICTIM).count(0) == VICTIM
        made = _loops_backed_by(results)
    assert untouched, f"mkfs wrote to the test's device: {run.stdout}{run.stderr}"
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith("stallbench: ") and run.stderr.count("\n") == 1, run.stderr
    assert "'dev/sdz' is no option of mkfs" in run.stderr
    assert made == [] and not list(results.rglob("*.img"))      # refused before any loop device
    assert _loops_backed_by(tmp_path) == []


@pytest.mark.parametrize("flags, says", [
    (["--fs", "ext4", "--mkfs-opts=-J device=UUID=0b1c2d3e-0000-4000-8000-000000000000"],
     "names another device or file (device=)"),
    (["--fs", "xfs", "--mkfs-opts=-l logdev=sdz"], "names another device or file (logdev=)"),
    (["--fs", "ext4", "--mkfs-opts=-q sdz"], "'sdz' is no option of mkfs"),
    (["--fs", "xfs", "--mkfs-opts=-j"], "'-j' is not an option mkfs.xfs takes here"),
    (["--fs", "ext4", "--mount-opts", "journal_path=sdz"],
     "'journal_path' is not a mount option stallbench passes to"),
    (["--fs", "xfs", "--mount-opts", "logdev=sdz"], "'logdev' is not a mount option"),
    (["--fs", "ext4", "--mount-opts", "noatime,data=journal", "--mkfs-opts=-b4096 -LUUID=x"],
     "names a device by its tag"),
])
def test_device_naming_options_are_one_line_exit_2(tmp_path, flags, says):
    state = tmp_path / "state"
    state.mkdir()
    run = sb(*RUN, *flags, "--results", str(tmp_path / "results"), cwd=tmp_path, state=state)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("stallbench: ") and says in run.stderr, run.stderr
    assert _loops_backed_by(tmp_path) == [] and not (tmp_path / "results").exists()


def test_plan_keys_are_checked_against_the_variants_filesystem(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text('workload = "randread"\n\n[[variants]]\nname = "x"\nfs = "xfs"\n'
                    'mount_opts = "data=journal"\n')
    run = sb("run", "--plan", str(plan), cwd=tmp_path, state=tmp_path)
    assert run.returncode == 2, run.stderr
    assert f"{plan}:6: variants[0].mount_opts: 'data' is not a mount option stallbench " \
        "passes to xfs" in run.stderr
