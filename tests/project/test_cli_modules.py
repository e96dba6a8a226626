"""docs/architecture.md's word on cli/, checked against the code: one module per command, none
importing another command's module (what two commands share is in cli/flags.py; completion
reads docs.py's tables, run --hosts is fleet.py's, and `series --bisect` runs the bisect command
through the face)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

CLI = Path(__file__).resolve().parents[2] / "src" / "stallbench" / "cli"


def _sibling_imports(path: Path) -> set[str]:
    """The cli modules a cli module imports (`from .x import` / `from . import x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found |= {alias.name for alias in node.names}
    return found


def test_no_command_module_imports_another_command_module():
    from stallbench.cli import COMMANDS

    commands = {module for module, _help in COMMANDS.values()}
    assert commands <= {p.stem for p in CLI.glob("*.py")}, commands
    wrong = {p.stem: sorted(_sibling_imports(p) & commands) for p in CLI.glob("*.py")}
    assert {k: v for k, v in wrong.items() if v} == {}
    # the face's `main`, which `series --bisect` calls, is the only other way in
    assert _sibling_imports(CLI / "series.py") & (commands | {"__init__", "main"}) <= {"main"}
