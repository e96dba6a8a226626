"""Short real runs checking what a new user sees in the first hour (issue 15)."""

from __future__ import annotations

import os

import pytest

from conftest import run_stallbench

pytestmark = pytest.mark.pure


def _randread(results, workdir, *extra: str):
    return run_stallbench("run", "randread", "--variant", "a", "--results", str(results),
                          "--dir", str(workdir), "--file-size", "4M", "--monitors", "none",
                          *extra, check=True)


@pytest.mark.root
def test_the_machine_wide_cache_drop_is_announced_once(results, workdir):
    out = _randread(results, workdir, "--duration", "0.3s", "--iterations", "2",
                    "--no-progress")
    assert out.stderr.count("page cache") == 1, out.stderr
    assert "whole machine" in out.stderr and "--no-drop-caches" in out.stderr
    kept = _randread(results, workdir, "--duration", "0.3s", "--no-drop-caches",
                     "--no-progress")
    assert "page cache" not in kept.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="as root the cache is dropped")
def test_no_announcement_without_root(results, workdir):
    out = _randread(results, workdir, "--duration", "0.3s", "--no-progress")
    assert "whole machine" not in out.stderr
