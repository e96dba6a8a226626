"""The reports of a comparison of real recorded runs, byte for byte: a move of code must not
change a character of them.

tests/data/snapshot/results holds two variants of two real runs each, recorded once as root
on a quiet machine (a: `stallbench run randread --variant a --duration 1 --file-size 8M
--direct --record-size 4K --iterations 2 --dir DIR --no-progress`; b: the same with
--record-size 16K), with their summary.parquet, run.json and default monitors' tables. What
varies by host or time (kernel, host, machine load) is stored with the runs; the run
directories' paths are written RESULTS, `stallbench_version` VERSION, and the JSON's keys
sorted.
After a change that is meant to change a report, regenerate the expected files with
`STALLBENCH_SNAPSHOT_UPDATE=1 pytest tests/report/test_report_snapshot.py` and read their diff.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stallbench.cli import main

pytestmark = pytest.mark.pure

DATA = Path(__file__).resolve().parents[1] / "data" / "snapshot"
FORMATS = {"text": "compare.txt", "markdown": "compare.md", "json": "compare.json"}


def report(results: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    """`stallbench compare a b --format FMT` of the stored runs, its paths and version made
    independent of where and with which version it ran."""
    assert main(["compare", "a", "b", "--results", str(results), "--format", fmt]) == 0
    out = capsys.readouterr().out.replace(str(results), "RESULTS")
    if fmt == "json":
        document = json.loads(out)
        document["stallbench_version"] = "VERSION"
        out = json.dumps(document, indent=1, sort_keys=True) + "\n"
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the stored runs: a command may write summaries beside them."""
    copy = tmp_path_factory.mktemp("snapshot") / "results"
    shutil.copytree(DATA / "results", copy)
    return copy


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_report_of_the_recorded_comparison_is_unchanged(fmt, results, capsys):
    expected = DATA / FORMATS[fmt]
    got = report(results, fmt, capsys)
    if os.environ.get("STALLBENCH_SNAPSHOT_UPDATE"):
        expected.write_text(got)
    assert got == expected.read_text(), f"the {fmt} report changed: see {expected}"


def test_the_json_report_does_not_depend_on_the_hash_seed(results):
    """Two processes with different hash seeds print the same JSON, key order included (the
    where section's counters once followed a set's order)."""
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "stallbench", "compare", "a", "b",
                               "--results", str(results), "--format", "json"],
                              capture_output=True, text=True, env=env, timeout=300, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
