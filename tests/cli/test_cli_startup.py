"""The command line starts without numpy, pyarrow, scipy, matplotlib or rich for help, usage
errors and `cleanup` (issue 15 item 16; the wall times are in BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pure

HEAVY = ("numpy", "pyarrow", "scipy", "matplotlib", "rich")

_PROBE = """
import json, sys
from stallbench.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in json.loads(sys.argv[2]))
print(json.dumps({"code": code, "heavy": heavy}))
"""


def _imported(argv: list[str], tmp_path) -> dict:
    env = {**os.environ, "STALLBENCH_STATE_DIR": str(tmp_path / "state"),
           "STALLBENCH_RESULTS": str(tmp_path / "results")}
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", [
    ["--help"], [], ["--version"], ["nosuchcommand"],
    ["run", "--help"], ["run", "randread", "--help"], ["run", "pgioperf", "--help"],
    ["run", "command", "--help"], ["run", "randread", "--threds", "2"], ["run"],
    ["show", "--help"], ["show"], ["import", "--help"], ["demo", "--help"],
    ["cleanup", "--help"], ["cleanup"], ["compare", "--help"], ["check", "--help"],
    ["compare"], ["check", "a", "b"],
], ids=lambda argv: " ".join(argv) or "no-arguments")
def test_help_errors_and_cleanup_import_no_heavy_module(argv, tmp_path):
    result = _imported(argv, tmp_path)
    assert result["heavy"] == [], result
    assert result["code"] in (0, 2)


def test_a_real_command_still_loads_what_it_needs(tmp_path):
    result = _imported(["show", "nosuch"], tmp_path)
    assert result["code"] == 2 and "numpy" in result["heavy"]
