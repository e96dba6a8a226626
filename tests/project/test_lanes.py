"""Every test module chooses its lane (issue 36 item 8): collection fails, naming the file, for a
module with no lane marker or with two, also when `-m` picks a lane (a module in no lane would
otherwise run in none), and scripts/run-tests.sh runs every lane pyproject.toml declares. Run for
real: pytest on a small tree with this conftest.py and pyproject.toml."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT, TESTS

pytestmark = pytest.mark.pure

LANES = {line.partition(":")[0] for line in
         tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
         ["markers"] if line.partition(":")[2].strip().startswith("lane")}


def _collect(tree, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args], cwd=tree, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def tree(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests" / "a").mkdir(parents=True)
    shutil.copy(TESTS / "conftest.py", tmp_path / "tests")
    head = "import pytest\n\n"
    (tmp_path / "tests" / "a" / "test_chosen.py").write_text(
        head + "pytestmark = pytest.mark.pure\n\ndef test_x():\n    pass\n")
    (tmp_path / "tests" / "a" / "test_unmarked.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "tests" / "a" / "test_twice.py").write_text(
        head + "pytestmark = pytest.mark.pure\n\n@pytest.mark.quiet\ndef test_x():\n    pass\n")
    return tmp_path


@pytest.mark.parametrize("select", [[], ["-m", "pure"], ["-m", "quiet"]])
def test_a_module_without_one_lane_fails_collection_naming_it(tree, select) -> None:
    done = _collect(tree, *select, "tests")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    said = {line.removeprefix("ERROR: ").split(":")[0]: line
            for line in done.stderr.splitlines() if "lane" in line}
    assert "no lane marker" in said["tests/a/test_unmarked.py"]
    assert "lane markers pure, quiet" in said["tests/a/test_twice.py"]
    assert not any("test_chosen" in line for line in said.values())


def test_a_module_in_one_lane_is_collected(tree) -> None:
    done = _collect(tree, "-m", "pure", "tests/a/test_chosen.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tests/a/test_chosen.py::test_x" in done.stdout


def test_the_script_runs_every_lane_once() -> None:
    script = (ROOT / "scripts" / "run-tests.sh").read_text()
    named = re.findall(r"\b(" + "|".join(sorted(LANES)) + r")\b", " ".join(
        re.findall(r'"([a-z_ ]+)"', script)))
    assert sorted(named) == sorted(LANES), "run-tests.sh's lanes (-m) against pyproject.toml's"
