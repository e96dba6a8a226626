"""Command-line conventions: the shipped bash/zsh completion and man page are what the parser
generates (so they cannot drift), bash really completes with them, zsh and groff accept them,
and -q / -v do what they say on a real run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from stallbench.cli import build_parser
from stallbench.cli.docs import FILES, describe, generate

pytestmark = pytest.mark.oracle


def test_generated_files_match_the_parser() -> None:
    for relative, text in generate(build_parser()).items():
        shipped = ROOT / relative
        assert shipped.exists(), f"{relative} missing: run make cli-docs"
        assert shipped.read_text() == text, f"{relative} is stale: run make cli-docs"


def _complete(*words: str, cwd: Path | None = None) -> list[str]:
    script = (f"source {ROOT / FILES['bash']}\n"
              "COMP_WORDS=(\"$@\"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _stallbench\n"
              "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    proc = subprocess.run(["bash", "-c", script, "bash", *words], capture_output=True,
                          text=True, timeout=30, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


def test_bash_completes_commands_options_choices_and_variants(tmp_path) -> None:
    commands = [c.words[-1] for c in describe(build_parser()).subcommands]
    assert _complete("stallbench", "") == commands
    assert _complete("stallbench", "exp") == ["export"]
    assert _complete("stallbench", "export", "x", "--format", "") == [
        "perfetto", "csv", "folded", "hdr", "bundle"]
    assert "--around-slow" in _complete("stallbench", "export", "--a")
    assert _complete("stallbench", "run", "randread", "--fs", "") == [
        "ext2", "ext3", "ext4", "xfs", "btrfs"]
    assert "--record-size" in _complete("stallbench", "-q", "run", "randread", "--rec")
    (tmp_path / "res" / "vanilla").mkdir(parents=True)
    (tmp_path / "res" / "patched").mkdir()
    got = _complete("stallbench", "compare", "--results", "res", "", cwd=tmp_path)
    assert {"vanilla", "patched"} <= set(got)


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh (Debian package) not installed")
def test_zsh_accepts_and_registers_the_completion(tmp_path) -> None:
    path = ROOT / FILES["zsh"]
    assert subprocess.run(["zsh", "-n", str(path)], capture_output=True).returncode == 0
    script = (f"fpath=({path.parent} $fpath); autoload -Uz compinit; "
              f"compinit -u -d {tmp_path / 'zcompdump'}; print -r -- $_comps[stallbench]")
    # (never -d /dev/null: compinit replaces its dump file with mv, and as root that turned
    # the machine's /dev/null into a regular file)
    proc = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True,
                          timeout=30)
    assert proc.stdout.strip() == "_stallbench", proc.stderr
    text = path.read_text()
    for cmd in describe(build_parser()).subcommands:
        for option in cmd.options:
            assert option.flags[-1] in text


@pytest.mark.skipif(not shutil.which("groff"), reason="groff (Debian package) not installed")
def test_man_page_renders_and_names_every_command_and_option() -> None:
    proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-P", "-c", "-P", "-b", "-P",
                           "-u", str(ROOT / FILES["man"])], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    text = " ".join(proc.stdout.split())
    root = describe(build_parser())
    for cmd in root.subcommands:
        assert f"stallbench {cmd.words[-1]}" in text
        for option in cmd.options:
            assert option.flags[-1] in text, option.flags


def _run(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    before, after = [f for f in flags[:1] if f], list(flags[1:])
    return subprocess.run([sys.executable, "-m", "stallbench", *before, "run", "randread",
                           *after, "--results", str(tmp_path / "results"), "--dir",
                           str(work), "--duration", "1", "--file-size", "8M", "--monitors",
                           "none", "--no-drop-caches", "--variant", "q"],
                          capture_output=True, text=True, timeout=120)


def test_quiet_and_verbose_on_a_real_run(tmp_path) -> None:
    normal = _run(tmp_path, "")
    assert normal.returncode == 0, normal.stderr
    assert "q randread" in normal.stderr          # the runner's progress lines
    quiet = _run(tmp_path, "-q")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    after = _run(tmp_path, "", "--quiet")          # after the command's name, too
    assert after.returncode == 0 and after.stderr == "", after.stderr
    both = subprocess.run([sys.executable, "-m", "stallbench", "-q", "-v", "show", "x"],
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    assert len(both.stderr.strip().splitlines()) == 1
