"""What the docs promise of the shell and the machine (issue 35 item 9): the man page's
ENVIRONMENT names every variable the source reads (found here by reading the source), fish
completes with the generated script, and the editable install of `make demo` gets the man page
and the completions where man and the shells look."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from stallbench.cli import build_parser
from stallbench.cli.docs import FILES, describe

pytestmark = pytest.mark.pure

SRC = ROOT / "src" / "stallbench"
# os.environ.get("X") / os.environ["X"] / getenv("X") / a NAME = "X" constant read that way
_READS = (r'os\.environ\.get\(\s*"([A-Z][A-Z0-9_]+)"', r'os\.environ\[\s*"([A-Z][A-Z0-9_]+)"\]',
          r'getenv\(\s*"([A-Z][A-Z0-9_]+)"')
_NOT_OURS = {"PATH", "PYTHONPATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}   # passed through


def _variables_read() -> set[str]:
    found = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        for pattern in _READS:
            found.update(re.findall(pattern, text))
        for constant, name in re.findall(r'^([A-Z_]+) = "([A-Z][A-Z0-9_]+)"$', text, re.M):
            if re.search(rf"os\.environ(\.get\(|\[)\s*{constant}\b", text):
                found.add(name)
    return found - _NOT_OURS


def _environment_section() -> str:
    page = (ROOT / FILES["man"]).read_text()
    return page.split(".SH ENVIRONMENT", 1)[1].split(".SH ", 1)[0]


def test_the_man_page_names_every_variable_the_source_reads():
    read = _variables_read()
    assert {"STALLBENCH_RESULTS", "STALLBENCH_NO_C_LOOP", "NO_COLOR",
            "GITHUB_STEP_SUMMARY"} <= read            # the scan finds constants and literals
    section = _environment_section()
    named = set(re.findall(r"^\.B ([A-Z][A-Z0-9_]+)$", section, re.M))
    assert read <= named, f"not in the man page's ENVIRONMENT: {sorted(read - named)}"
    assert len(named) >= 12


@pytest.mark.skipif(not shutil.which("fish"), reason="fish (Debian package) not installed")
def test_fish_completes_with_the_generated_script(tmp_path):
    script = ROOT / FILES["fish"]
    assert subprocess.run(["fish", "-n", str(script)], capture_output=True).returncode == 0
    (tmp_path / "res" / "vanilla").mkdir(parents=True)
    (tmp_path / "res" / "patched").mkdir()

    def complete(line: str) -> list[str]:
        done = subprocess.run(["fish", "--no-config", "-c",
                               f"source {script}; complete -C {line!r}"],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return [w.split("\t")[0] for w in done.stdout.splitlines()]

    commands = [c.words[-1] for c in describe(build_parser()).subcommands]
    assert sorted(complete("stallbench ")) >= sorted(commands)
    assert complete("stallbench exp") == ["export"]
    assert sorted(complete("stallbench export x --format ")) == ["bundle", "csv", "folded",
                                                                   "hdr", "perfetto"]
    assert "--record-size" in complete("stallbench -q run randread --rec")
    assert "--brief" in complete("stallbench compare --b")
    assert {"vanilla", "patched"} <= set(complete("stallbench compare --results res "))


def test_the_editable_install_gets_the_man_page_and_completions(tmp_path):
    """What `make demo` does after its `pip install -e` (which installs no data files): the
    Makefile's share step, here into a fresh venv; man then finds the page from PATH."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "pip install -q -e" in recipe and "scripts/install-share.py $(VENV)" in recipe
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MANPATH")}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    subprocess.run([str(venv / "bin/python"), str(ROOT / "scripts/install-share.py"),
                    str(venv)], check=True, capture_output=True, timeout=60, env=env)
    for kind in ("man", "bash", "zsh", "fish"):
        relative = FILES[kind].removeprefix("src/stallbench/")
        assert (venv / relative).read_text() == (ROOT / FILES[kind]).read_text(), kind
    if shutil.which("man"):
        found = subprocess.run(["man", "-w", "stallbench"], capture_output=True, text=True,
                               timeout=60, env={**env, "PATH": f"{venv}/bin:/usr/bin:/bin"})
        assert Path(found.stdout.strip()) == venv / "share/man/man1/stallbench.1", found.stderr
