"""`stallbench show` of a real run: mount and superblock options apart, the environment readable
and whole, op names not cut, every latency cell with two significant digits (issue 15 items 5
and 14)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import run_stallbench


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("show")
    results, work = base / "results", base / "work"
    work.mkdir()
    run_stallbench("run", "randread", "--variant", "a", "--results", str(results), "--dir",
                   str(work), "--file-size", "4M", "--duration", "0.5s", "--monitors", "none",
                   "--no-progress", "--no-drop-caches", check=True)
    return results, work


@pytest.mark.skipif(shutil.which("findmnt") is None, reason="needs findmnt (util-linux)")
def test_show_separates_mount_and_superblock_options(real_run):
    results, work = real_run
    vfs, fs = subprocess.run(["findmnt", "-n", "-o", "VFS-OPTIONS,FS-OPTIONS", "--target",
                              str(work)], capture_output=True, text=True,
                             check=True).stdout.split()
    out = run_stallbench("show", "a", "--results", str(results), check=True).stdout
    flat = " ".join(out.split())
    assert f"mount_options={vfs};" in flat
    assert f"superblock_options={fs}" in flat
    meta = json.loads(next(results.glob("a/randread/*/run.json")).read_text())
    filesystem = meta["environment"]["filesystem"]
    assert (filesystem["mount_options"], filesystem["superblock_options"]) == (vfs, fs)


def test_show_prints_the_environment_whole_and_within_100_columns(real_run):
    results, work = real_run
    out = run_stallbench("show", "a", "--results", str(results), check=True).stdout
    table = out.index("\nlatency in")
    assert [line for line in out[:table].splitlines() if len(line) > 100] == []
    assert '{"' not in out and "environment {" not in out
    flat = " ".join(out.split())
    # every top-level key of the recorded environment, and the last value of it, is shown
    meta = json.loads(next(results.glob("a/randread/*/run.json")).read_text())
    for key in meta["environment"]:
        assert f"{key}:" in flat
    assert f"workdir: {meta['environment']['workdir']}" in flat
    assert "space_needed: 4 MiB" in flat
