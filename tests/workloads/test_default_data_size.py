"""Without a size, randread and pgioperf size their data file from memory: said before
writing, progress while writing, refused (naming the flag) when it would take more than half
the free space or longer than the run (issue 15 item 8)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import run_stallbench
from stallbench.core.errors import UsageError
from stallbench.workloads.files import SYNC_EVERY, ensure_file

pytestmark = pytest.mark.machine


@pytest.fixture
def small_tmpfs(tmp_path):
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160M", "tmpfs", str(mount_point)],
                   check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


@pytest.mark.root
@pytest.mark.parametrize("workload,flag", [("randread", "--file-size"),
                                           ("pgioperf", "--data-size")])
def test_a_default_size_beyond_half_the_free_space_is_refused(small_tmpfs, results, workload,
                                                              flag):
    out = run_stallbench("run", workload, "--variant", "a", "--results", str(results),
                         "--dir", str(small_tmpfs), "--memory", "48M", "--duration", "1s",
                         "--monitors", "none", "--no-progress")
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert f"without {flag}" in line and f"give {flag} SIZE" in line
    assert "2x the 48 MiB of memory available" in line and str(small_tmpfs) in line
    assert not list(small_tmpfs.iterdir())              # nothing written
    assert not list(results.glob("a/*/*"))               # nothing run


@pytest.mark.root
def test_a_default_size_that_fits_is_said_before_it_is_written(small_tmpfs, results):
    out = run_stallbench("run", "randread", "--variant", "a", "--results", str(results),
                         "--dir", str(small_tmpfs), "--memory", "16M", "--duration", "1s",
                         "--monitors", "none", "--no-progress", check=True)
    said = [line for line in out.stderr.splitlines() if line.startswith("creating ")]
    assert said == [f"creating {small_tmpfs}/randread.data of 32 MiB before the run (not timed; "
                    "kept for the next run with the same size)"]
    again = run_stallbench("run", "randread", "--variant", "a", "--results", str(results),
                           "--dir", str(small_tmpfs), "--memory", "16M", "--duration", "0.3s",
                           "--monitors", "none", "--no-progress", check=True)
    assert "creating " not in again.stderr              # reused, nothing to say


def test_progress_while_writing_and_a_too_slow_file_refused(tmp_path):
    lines: list[str] = []
    path = tmp_path / "data"
    assert ensure_file(path, 3 * SYNC_EVERY, lines.append, progress_every_s=0.0)
    assert path.stat().st_size == 3 * SYNC_EVERY
    assert lines[0].startswith(f"creating {path} of 384 MiB")
    assert [line.split("(")[1].split(")")[0] for line in lines[1:]] == ["33%", "67%"]
    slow = tmp_path / "slow"
    with pytest.raises(UsageError, match=r"longer than the 0.001 s run; give --file-size"):
        ensure_file(slow, 4 * SYNC_EVERY, lines.append, max_seconds=0.001,
                    fix="give --file-size SIZE")
    assert not slow.exists()
