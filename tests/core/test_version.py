"""The version means one thing everywhere (core/version.py declares it): what `stallbench
--version` says is what the installed package's metadata (built by setuptools from
pyproject.toml) says, the man page and every JSON schema's `$id` carry it, CHANGELOG.md has a
heading for it, and the licence stays MIT."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from conftest import ROOT, run_stallbench
from stallbench.core.version import __version__, schema_id

pytestmark = pytest.mark.pure


def test_version_flag_says_the_declared_release() -> None:
    proc = run_stallbench("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"stallbench {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_pyproject_reads_the_version_from_its_one_place() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "stallbench.core.version.__version__"}
    assert pyproject["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_every_schema_and_the_man_page_carry_it() -> None:
    schemas = sorted((ROOT / "src/stallbench/schemas").glob("*.schema.json"))
    assert len(schemas) >= 4
    for path in schemas:
        assert json.loads(path.read_text())["$id"] == schema_id(path.name), \
            f"{path.name}: run scripts/gen-cli-docs.py"
        assert __version__ in schema_id(path.name)
    man = (ROOT / "src/stallbench/share/man/man1/stallbench.1").read_text()
    assert f'"stallbench {__version__}"' in man.splitlines()[0]


def test_the_changelog_has_this_release_and_every_earlier_one() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (\d+\.\d+\.\d+)", text, re.MULTILINE)
    assert headings[0] == __version__
    assert headings == sorted(headings, key=lambda v: tuple(map(int, v.split("."))),
                              reverse=True)
    assert {"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0"} <= set(headings)
