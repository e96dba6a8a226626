"""Results reach the disk before they are named complete (issue 34 item 15): ops.parquet, the
summary, a monitor table and run.json are each fsync'd before their rename, and their folder
after it, so a power cut never leaves a complete run pointing at an empty file.

Oracle: the system calls the real `stallbench run` made, as strace records them (with -y, the
path behind each fd)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import stallbench
from conftest import needs_strace

pytestmark = pytest.mark.machine

SOURCE = str(Path(stallbench.__file__).resolve().parents[1])
CALL_RE = re.compile(r"^\d+\s+(?P<call>fsync|rename|renameat2?)\((?P<args>.*)\)\s+=\s+0$")


@needs_strace
def test_every_results_file_is_fsynced_before_its_rename_and_its_folder_after(tmp_path):
    results, log = tmp_path / "results", tmp_path / "strace.log"
    run = subprocess.run(
        ["strace", "-f", "-qq", "-y", "-e", "trace=fsync,rename,renameat,renameat2", "-o",
         str(log), sys.executable, "-m", "stallbench", "run", "randread", "--duration", "0.3",
         "--file-size", "1M", "--monitors", "counters", "--no-drop-caches", "--no-progress",
         "--results", str(results)], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": SOURCE, "STALLBENCH_STATE_DIR": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    calls = []
    for line in log.read_text().splitlines():
        match = CALL_RE.match(line)
        if match:
            paths = re.findall(r'"([^"]+)"|<([^>]+)>', match.group("args"))
            calls.append((match.group("call"), [a or b for a, b in paths]))
    run_dir = next(results.glob("*/randread/1"))
    for final in (run_dir / "ops.parquet", run_dir / "summary.parquet",
                  run_dir / "monitors" / "counters.parquet", run_dir / "run.json"):
        renames = [i for i, (call, paths) in enumerate(calls)
                   if call.startswith("rename") and paths and paths[-1] == str(final)]
        assert renames, (final, calls[-20:])
        last = renames[-1]
        source = calls[last][1][-2]
        assert any(call == "fsync" and paths == [source] for call, paths in calls[:last]), \
            (final, source)
        assert any(call == "fsync" and paths == [str(final.parent)]
                   for call, paths in calls[last + 1:]), (final, "folder not fsync'd")
