"""`stallbench cleanup` and images the user keeps (issue 34 item 11): a `--keep-image` image that
the user attached again to look inside is neither unmounted, detached nor deleted; a scratch
image of a dead run that no journal names still is. The oracles: losetup's listing, /proc/mounts
and the file the user wrote into the kept filesystem."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from env_support import MIB, loop_listing

from conftest import run_stallbench

pytestmark = [pytest.mark.machine, pytest.mark.root]


def _attach(image: Path) -> str:
    return subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_cleanup_leaves_a_kept_image_the_user_attached_again(tmp_path):
    results, state = tmp_path / "results", tmp_path / "state"
    run_stallbench("run", "randread", "--duration", "1s", "--file-size", "8M", "--fs", "ext4",
                   "--keep-image", "--monitors", "none", "--no-drop-caches", "--no-progress",
                   "--variant", "kept", "--results", str(results), check=True,
                   env={"STALLBENCH_STATE_DIR": str(state)})
    meta = json.loads(next(results.glob("kept/randread/*/run.json")).read_text())
    kept = Path(meta["environment"]["filesystem"]["image"])
    assert kept.is_file() and str(kept) not in loop_listing()     # the run left it detached

    # the user looks inside the kept filesystem; beside it, a scratch image of a run that died
    # with its journal gone
    look, mounted = tmp_path / "look", []
    look.mkdir()
    devices = [_attach(kept)]
    dead = subprocess.Popen(["true"])
    dead.wait()
    scratch = tmp_path / f"stallbench-{dead.pid}-1-gone-ext4.scratch.img"
    with open(scratch, "wb") as f:
        f.truncate(16 * MIB)
    try:
        subprocess.run(["mount", devices[0], str(look)], check=True)
        mounted.append(look)
        (look / "notes.txt").write_text("what the user found\n")
        devices.append(_attach(scratch))
        cleanup = run_stallbench("cleanup", env={"STALLBENCH_STATE_DIR": str(state)})
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert f"{devices[0]} ({kept}): a kept image" in cleanup.stdout
        # the kept image: still attached, still mounted where the user put it, its file there
        assert f"{devices[0]} {kept}" in " ".join(loop_listing().split())
        assert f"{devices[0]} {look} " in Path("/proc/mounts").read_text()
        assert (look / "notes.txt").read_text() == "what the user found\n"
        # the scratch image of the dead run: detached and deleted
        assert str(scratch) not in loop_listing() and not scratch.exists()
        assert f"detached leftover loop device {devices[1]}" in cleanup.stdout
    finally:
        for path in mounted:
            subprocess.run(["umount", str(path)], capture_output=True)
        for device in devices:
            if os.path.exists(device) and device in loop_listing():
                subprocess.run(["losetup", "--detach", device], capture_output=True)
    kept.unlink()
