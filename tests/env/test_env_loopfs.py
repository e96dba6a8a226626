"""Loop filesystems: really made, really mounted with the options asked for, and removed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from env_support import MIB, TinyWorkload, loop_listing, mount_line, nothing_left

from stallbench.core.errors import UsageError
from stallbench.core.journal import Journal
from stallbench.env import environment
from stallbench.env.loopfs import default_size
from stallbench.env.tools import find_tool
from stallbench.settings.variant import VariantSettings

pytestmark = [pytest.mark.machine, pytest.mark.root]


@pytest.fixture
def journal(tmp_path):
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as j:
        yield j


def _enter(settings, journal, results, workload=None):
    return environment(settings, journal, workload or TinyWorkload(), results)


def test_ext3_and_ext4_differ_in_proc_mounts_and_metadata(tmp_path, journal):
    results = tmp_path / "results"
    seen = {}
    for fs in ("ext3", "ext4"):
        settings = VariantSettings(name=fs, fs=fs, mount_opts="noatime")
        with _enter(settings, journal, results) as state:
            line = mount_line(state.workdir)
            assert line is not None, f"{state.workdir} not in /proc/mounts"
            device = line[0]
            # the kernel's view: the type column, and the device is the loop backed by our image
            assert line[2] == fs
            assert "noatime" in line[3].split(",")
            assert f"{device} " in loop_listing() or device in loop_listing()
            assert Path(device).name == state.devices[0]
            features = subprocess.run(["dumpe2fs", "-h", device], capture_output=True,
                                      text=True).stdout
            seen[fs] = (line, features, dict(state.metadata["filesystem"]))
            (state.workdir / "probe").write_bytes(b"x" * 4096)
        assert mount_line(state.workdir) is None
    ext3_meta, ext4_meta = seen["ext3"][2], seen["ext4"][2]
    assert ext3_meta["proc_mounts_type"] == "ext3" and ext4_meta["proc_mounts_type"] == "ext4"
    assert ext3_meta["mounted_options"] == seen["ext3"][0][3]
    assert ext4_meta["mounted_options"] == seen["ext4"][0][3]
    # ext4 has extents, ext3 has not: both per dumpe2fs run by the test and in the metadata
    assert "extent" in seen["ext4"][1] and "extent" not in seen["ext3"][1]
    assert "extent" in ext4_meta["features"] and "extent" not in ext3_meta["features"]
    assert nothing_left(results) == []


def test_mkfs_opts_reach_mkfs_and_image_is_kept_on_request(tmp_path, journal):
    results = tmp_path / "results"
    settings = VariantSettings(name="nojournal", fs="ext4", mkfs_opts="-O ^has_journal -L sbtest",
                               keep_image=True, fs_size=64 * MIB)
    with _enter(settings, journal, results) as state:
        device = mount_line(state.workdir)[0]
        out = subprocess.run(["dumpe2fs", "-h", device], capture_output=True, text=True).stdout
        assert "has_journal" not in out.split("Filesystem features:")[1].splitlines()[0]
        assert "sbtest" in out
        image = Path(state.metadata["filesystem"]["image"])
    assert image.exists() and image.stat().st_size == 64 * MIB
    assert str(image) not in loop_listing()
    image.unlink()


@pytest.mark.parametrize("fs", ["xfs", "btrfs"])
def test_xfs_and_btrfs(tmp_path, journal, fs):
    if find_tool(f"mkfs.{fs}") is None:
        pytest.skip(f"mkfs.{fs} is not installed")
    results = tmp_path / "results"
    with _enter(VariantSettings(name=fs, fs=fs), journal, results) as state:
        line = mount_line(state.workdir)
        assert line is not None and line[2] == fs
        assert state.metadata["filesystem"]["mounted_options"] == line[3]
        (state.workdir / "data").write_bytes(b"y" * MIB)
        assert state.devices and state.devices[0].startswith("loop")
    assert nothing_left(results) == []


def test_filesystem_too_small_for_the_data_says_so(tmp_path, journal):
    results = tmp_path / "results"
    settings = VariantSettings(name="small", fs="ext4", fs_size=32 * MIB)
    with pytest.raises(UsageError, match=r"needs 200 MiB.*--fs-size"):
        with _enter(settings, journal, results, TinyWorkload(200 * MIB)):
            pytest.fail("the environment must not come up")
    assert nothing_left(results) == []


def test_default_size_follows_the_workload(tmp_path, journal):
    results = tmp_path / "results"
    with _enter(VariantSettings(name="sized", fs="ext2"), journal, results,
                TinyWorkload(80 * MIB)) as state:
        size = state.metadata["filesystem"]["size"]
        device = mount_line(state.workdir)[0]
        blockdev = int(subprocess.run(["blockdev", "--getsize64", device], capture_output=True,
                                      text=True, check=True).stdout)
    assert size == default_size("ext2", 80 * MIB) == blockdev


def test_mkfs_failure_is_reported_and_undone(tmp_path, journal):
    results = tmp_path / "results"
    settings = VariantSettings(name="bad", fs="ext4", mkfs_opts="-O no_such_feature")
    with pytest.raises(UsageError, match="mkfs.ext4"):
        with _enter(settings, journal, results):
            pass
    assert nothing_left(results) == []


def test_dir_is_used_as_is_and_devices_found(tmp_path, journal):
    results = tmp_path / "results"
    target = tmp_path / "mine"
    target.mkdir()
    (target / "keep").write_text("user data")
    with _enter(VariantSettings(name="dir", dir=target), journal, results) as state:
        assert state.workdir == target
        source = subprocess.run(["findmnt", "-no", "SOURCE", "--target", str(target)],
                                capture_output=True, text=True, check=True).stdout.strip()
        assert state.devices[-1] == Path(source).name
    assert (target / "keep").read_text() == "user data"
