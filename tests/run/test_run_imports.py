"""What a recording process imports, and when: an import inside the run is time the workers do
not spend on their ops (a pause at their first tick), and an import by the parent is time of
every guest run (seconds under QEMU TCG). The oracle: Python's own `-X importtime` lines and
sys.modules of a fresh interpreter."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from reliability_support import sb

pytestmark = [pytest.mark.pure, pytest.mark.root]


def _imported(stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^import time:.*\|\s+([\w.]+)$", stderr, re.M)}


def test_a_run_does_not_import_pandas_though_pyarrow_would(tmp_path):
    pytest.importorskip("pandas")       # installed: pyarrow's first pa.array() of a list asks it
    out = sb("run", "randread", "--variant", "v", "--results", str(tmp_path / "r"),
             "--file-size", "8M", "--duration", "1", "--no-progress", state=tmp_path / "state",
             PYTHONPROFILEIMPORTTIME="1")
    assert out.returncode == 0, out.stderr[-3000:]
    imported = _imported(out.stderr)
    assert "pyarrow" in imported and "numpy" in imported      # the oracle sees imports at all
    # (an import refused is a line too, of no time: a real one brings pandas.core and the rest)
    assert not {name for name in imported if name.startswith("pandas.")}
    meta = json.loads(next((tmp_path / "r").glob("v/randread/*/run.json")).read_text())
    # the monitors that build tables from Python lists (pa.array) still work without pandas
    assert {name: m["status"] for name, m in meta["monitors"].items()} == \
        {name: "ok" for name in meta["monitors"]}
    assert "reclaim" in meta["monitors"]


def test_a_workers_flush_imports_nothing_new(tmp_path):
    """The recorder's flush counts ops by code (here three ops of two codes and a worker's
    flushes); numpy 2's np.unique would import numpy.ma on its first call, inside the run."""
    code = f"""
import sys
from array import array
from stallbench.results.oprecorder import WorkerRecorder
recorder = WorkerRecorder({str(tmp_path)!r}, 0, ["wal", "commit"], "osli", capacity=8)
before = set(sys.modules)
for k, record in enumerate([(0, 100, 7, 90), (1, 100, 30, 90), (0, 200, 8, 190)]):
    recorder.data[4 * k:4 * k + 4] = array("q", record)
recorder.flush(12)
recorder.close()
print(recorder.counts, recorder._recent_max, sorted(set(sys.modules) - before))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[2,", "1]", "[8,", "30]", "[]"]
