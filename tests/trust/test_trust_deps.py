"""Dependency floors that keep known holes out (issue 34 item 16): stallbench reads Parquet
files that fleet hosts and guests wrote, and pyarrow 14.0.0 runs code from a crafted one
(CVE-2023-47248, fixed in 14.0.1). Oracle: packaging's own reading of pyproject.toml."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.pure

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
VULNERABLE = {"pyarrow": ("14.0.0", "13.0.0", "0.14.1")}


def test_the_dependency_floors_admit_no_vulnerable_release():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    requirements = {r.name: r for r in map(Requirement, project["dependencies"])}
    for name, releases in VULNERABLE.items():
        specifier = requirements[name].specifier
        assert not any(specifier.contains(v) for v in releases), (name, str(specifier))
        assert specifier.contains(version(name)), (name, version(name))   # this venv's
