"""Shared fixtures: run the real `stallbench` command in a subprocess."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# A shell starts background jobs with SIGINT ignored, and children inherit that through exec: run
# from one (make test & , a CI wrapper), every Ctrl-C test would see its signal vanish. A handler
# is reset to the default at exec, so the tests' stallbench processes get SIGINT as users do.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

# A test module imports another's helpers by its file name (`from compare_fixtures import
# write_run`) wherever the two files are: every folder of tests/ is on sys.path, from the start
# (pytest's default import mode puts a folder there only once it collects a file of it). That
# mode also refuses two test files of one name, so a file name is unique across tests/.
sys.path[:0] = sorted(str(folder) for folder in TESTS.iterdir()
                      if folder.is_dir() and folder.name not in ("data", "__pycache__"))


def stallbench_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "stallbench", *args]


def alive(pid: int) -> bool:
    """The process exists and has not exited (a zombie, not yet reaped, has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_stallbench(*args: str, timeout: float = 120, env: dict | None = None,
                   check: bool = False) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    result = subprocess.run(stallbench_cmd(*args), capture_output=True, text=True,
                            timeout=timeout, env=full_env)
    if check and result.returncode != 0:
        raise AssertionError(f"stallbench {' '.join(args)} -> {result.returncode}\n"
                             f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


@pytest.fixture
def results(tmp_path: Path) -> Path:
    path = tmp_path / "results"
    path.mkdir()
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def skip_when_saturated(results: Path) -> None:
    """Skip a test of verdicts on real runs when other processes took over half the CPUs
    during any of them: there the tool rightly withholds verdicts (MACHINE SATURATED)."""
    for run_json in results.glob("*/*/*/run.json"):
        load = json.loads(run_json.read_text()).get("machine_load") or {}
        if load.get("others_cpus", 0) > 0.5 * load.get("cpus", 1):
            pytest.skip(f"other processes took {load['others_cpus']:.2f} of {load['cpus']} CPUs "
                        "during the runs: a saturated machine, where verdicts are withheld")


# What some tests need of this machine, each said once (scripts/install-system-deps.sh installs
# them all). Root is a marker, pytest.mark.root, skipped below; every other need is a skipif.
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
needs_postgres = pytest.mark.skipif(
    not glob.glob("/usr/lib/postgresql/*/bin/postgres") or shutil.which("pgbench") is None,
    reason="PostgreSQL (server binaries and pgbench) not installed")


def lane_markers(config: pytest.Config) -> set[str]:
    """The lanes scripts/run-tests.sh runs: the markers pyproject.toml declares as "NAME: lane
    (...): what its tests do"."""
    return {name for name, _, meaning in (line.partition(":") for line in config.getini("markers"))
            if meaning.strip().startswith("lane")}


@pytest.hookimpl(tryfirst=True)   # before `-m` deselects: a module in no lane would run in none
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    lanes = lane_markers(config)
    wrong: dict[str, str] = {}
    for item in items:
        found = sorted({mark.name for mark in item.iter_markers()} & lanes)
        if len(found) != 1:
            path = str(item.path.relative_to(config.rootpath))
            wrong[path] = f"lane markers {', '.join(found)}" if found else "no lane marker"
    if wrong:
        raise pytest.UsageError("\n".join(
            f"{path}: {what}; a test module is in exactly one lane (`pytestmark = "
            f"pytest.mark.LANE`, LANE one of {', '.join(sorted(lanes))}: pyproject.toml says "
            "what each means)" for path, what in sorted(wrong.items())))
    if os.geteuid() != 0:
        for item in items:
            if item.get_closest_marker("root"):
                item.add_marker(pytest.mark.skip(reason="needs root (pytest.mark.root)"))


@pytest.fixture
def tracefs_root():
    """A mounted tracefs for tests that use it directly (marked pytest.mark.root): mounted for
    the test when the kernel has it but nothing mounted it (as on a fresh machine), unmounted
    afterwards."""
    from stallbench.core.tracefs import TRACEFS_CANDIDATES, find_tracefs, tracefs_supported

    root = find_tracefs()
    if root is not None:
        yield root
        return
    if not tracefs_supported():
        pytest.skip("the kernel has no tracefs")
    target = TRACEFS_CANDIDATES[0]
    subprocess.run(["mount", "-t", "tracefs", "nodev", target], check=True)
    try:
        yield target
    finally:
        subprocess.run(["umount", target], check=False)
