"""Every command and Python block of README.md runs in a test (issue 35 item 6). A comment
before each block says how (`<!-- readme-test: MODE -->`), and a block without one fails:

- run: as written, line by line, with `stallbench` this source, in a folder holding a results
  tree of the variants the README names (synthetic runs, real fio and strace logs to import);
  a command may say 0 or 1 (series: a regression) but never 2 (bad input) or a traceback;
- dry: the commands that need root or run for minutes: the block passes `bash -n`, and each
  stallbench line is executed up to where it would start running (run, calibrate and bisect
  --plan with their runners replaced: flags, plan files, workload options, duet checks and
  kernel files are all checked), the others parsed;
- make: `make -n TARGET` in the source tree;
- a test file's name: that file runs the block (and says so).
The README's TOML excerpts of examples/ files hold that file's lines."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_fixtures import lognormal_ns, write_run

from conftest import ROOT

# beside the fleet: the oracle lane was phase 1's last to end (408 s against the fleet lane's 296)
pytestmark = pytest.mark.oracle_beside_fleet

README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARK = re.compile(r"<!-- readme-test: (\S+) -->\n$")
CODE = ("sh", "python")


def _blocks() -> list[tuple[int, str, str, str | None]]:
    """(line, language, text, mode) of every block."""
    found = []
    for match in BLOCK.finditer(README):
        before = README[:match.start()]
        mark = MARK.search(before[-200:])
        found.append((before.count("\n") + 1, match.group(1), match.group(2),
                      mark.group(1) if mark else None))
    return found


BLOCKS = [b for b in _blocks() if b[1] in CODE]


def _ids(blocks) -> list[str]:
    return [f"line{line}-{mode}" for line, _, _, mode in blocks]


def test_every_command_and_python_block_says_how_it_is_tested():
    unmarked = [line for line, _, _, mode in BLOCKS if mode is None]
    assert not unmarked, f"README.md blocks without <!-- readme-test: MODE -->: lines {unmarked}"
    assert len(BLOCKS) >= 15


def _commands(text: str) -> list[str]:
    """The block's command lines, continuation lines joined, comments and blanks left out."""
    lines, current = [], ""
    for raw in text.splitlines():
        current += raw.rstrip("\\").rstrip() + " " if raw.endswith("\\") else raw
        if raw.endswith("\\"):
            continue
        line = current.strip()
        current = ""
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


# -- run: a results tree with every variant the README's examples name ---------------------------

def _tree(root: Path) -> None:
    rng = np.random.default_rng(35)
    results = root / "results"

    def run(variant: str, scale: float = 1.0, workload: str = "randread", ops: str = "read",
            **meta) -> Path:
        path = write_run(results, variant, {ops: lognormal_ns(rng, 6000, 1e5, 0.4, scale)},
                         duration_s=3.0, workload=workload)
        (path / "stacks.folded").write_text(
            "entry_SYSCALL_64;ksys_pread64;filemap_read;folio_wait_bit_common;io_schedule 12\n"
            "entry_SYSCALL_64;ksys_pread64;blkdev_read_iter;io_schedule 3\n")
        from stallbench.monitors.profile import rows_to_table
        (path / "monitors").mkdir(exist_ok=True)
        pq.write_table(rows_to_table(
            [(1_000_000 * i, 100, 100, "python3",
              "__libc_pread;entry_SYSCALL_64;ksys_pread64;filemap_read;"
              + ("copy_page_to_iter" if i % 3 else "filemap_get_pages")) for i in range(30)]),
            path / "monitors" / "profile.parquet")
        if meta:
            import json
            document = json.loads((path / "run.json").read_text())
            document.update(meta)
            (path / "run.json").write_text(json.dumps(document))
        return path

    # vanilla's results/vanilla/pgioperf/1 is the Python API example's, tight's
    # results/tight/randread/1 the export example's
    run("vanilla", 1.0, workload="pgioperf")
    run("patched", 1.3, workload="pgioperf")
    run("tight", 2.0)
    for i, name in enumerate(["p00-512M", "p01-480M", "p02-448M", "p03-416M", "p04-384M",
                              "p05-25M", "p06-23M", "p07-21M", "p08-19M", "p09-17M"]):
        run(name, 1.0 if i < 5 else 12.0)
    for day in (29, 30, 1, 2):
        month = 11 if day > 2 else 12
        run("nightly", 1.0 if day > 2 else 1.5,
            start_utc=f"2026-{month:02d}-{day:02d}T03:00:00.000Z")
    for abi in (53, 56, 57):
        run(f"deb-6.1.0-{abi}", 1.0 if abi < 57 else 3.0,
            kernel={"release": f"6.1.0-{abi}-amd64", "version": "#1", "machine": "x86_64",
                    "cmdline": ""})
    # logs to import: real strace and fio, hand-written MMTests and pgbench lines
    from test_import_logs import MMTESTS_LINES
    (root / "pgioperf.log").write_text("MMTests header line\n" + MMTESTS_LINES)
    (root / "pgbench_log.1234").write_text("0 0 1500 0 1700000000 500000\n"
                                           "1 0 2500 0 1700000001 100000\n")
    subprocess.run(["strace", "-f", "-T", "-o", str(root / "trace.txt"), "cat",
                    str(ROOT / "LICENSE")], check=True, capture_output=True, timeout=60)
    job = root / "job.fio"
    job.write_text(f"[global]\nsize=2m\nbs=4k\nioengine=psync\ndirectory={root}\n"
                   "[r]\nrw=randread\n")
    for folder in ("fio-logs", "hist-logs"):
        (root / folder).mkdir()
    subprocess.run(["fio", "--output-format=json+", f"--output={root / 'result.json'}",
                    f"--write_lat_log={root / 'fio-logs' / 'x'}",
                    f"--write_hist_log={root / 'hist-logs' / 'x'}", "--log_hist_msec=100",
                    "--log_avg_msec=0", "--runtime=1", "--time_based", "--eta=never", str(job)],
                   check=True, capture_output=True, timeout=120)
    (root / "r.1.0").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    if not (shutil.which("fio") and shutil.which("strace")):
        pytest.skip("fio and strace (scripts/install-system-deps.sh) are needed for the logs")
    root = tmp_path_factory.mktemp("readme")
    _tree(root)
    return root


def _shim(folder: Path) -> dict[str, str]:
    """`stallbench` on PATH: this source's."""
    folder.mkdir(exist_ok=True)
    shim = folder / "stallbench"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m stallbench \"$@\"\n")
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT / "src"), "STALLBENCH_RESULTS": "results"}


RUN = [b for b in BLOCKS if b[3] == "run"]


@pytest.mark.parametrize("block", RUN, ids=_ids(RUN))
def test_the_block_runs_as_written(block, template, tmp_path):
    _, language, text, _ = block
    cwd = tmp_path / "cwd"
    shutil.copytree(template, cwd, symlinks=True)
    env = _shim(tmp_path / "bin")
    if language == "python":
        done = subprocess.run([sys.executable, "-c", text], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return
    for command in _commands(text):
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, \
            (command, done.returncode, done.stderr)


# -- dry: up to where the run would start ------------------------------------------------------

class Started(Exception):
    """Raised by a runner replaced in a dry run: everything before it was checked."""


def _dry(argv: list[str], monkeypatch) -> None:
    from stallbench.bisect import steps
    from stallbench.cli import build_parser, fleet, main
    from stallbench.run import runner

    def started(*args, **kwargs):
        raise Started

    for module, name in ((runner, "run_plan"), (fleet, "run_fleet_plan"),
                         (steps, "run_bisect")):
        monkeypatch.setattr(module, name, started)
    if argv[0] in ("run", "calibrate") or (argv[0] == "bisect" and "--git" not in argv):
        with pytest.raises(Started):
            code = main(argv)
            pytest.fail(f"{shlex.join(argv)} did not reach its runner (exit {code})")
    else:
        build_parser(argv).parse_args(argv)       # bad usage: UsageError


DRY = [b for b in BLOCKS if b[3] == "dry"]


@pytest.mark.parametrize("block", DRY, ids=_ids(DRY))
def test_the_long_or_root_block_is_right_up_to_its_run(block, tmp_path, monkeypatch, capsys):
    _, _, text, _ = block
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "examples").symlink_to(ROOT / "examples")
    for _, language, toml, _ in _blocks():             # the README's own plan files
        named = re.match(r"# (\S+\.toml)[: ]", toml)
        if language == "toml" and named and "/" not in named.group(1):
            (cwd / named.group(1)).write_text(toml)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("r", str(tmp_path / "r"))
    monkeypatch.setenv("STALLBENCH_RESULTS", str(tmp_path / "results"))
    for command in _commands(text):
        words = shlex.split(command, comments=True)
        while "stallbench" in words:
            words = words[words.index("stallbench") + 1:]
            end = next((i for i, w in enumerate(words) if w in ("||", "&&", ";", "|", ">")),
                       len(words))
            argv = [os.path.expanduser(os.path.expandvars(w)) for w in words[:end]]
            argv = [str(tmp_path / "sb-base") if a.startswith("/var/tmp/sb-base") else a
                    for a in argv]
            _dry(argv, monkeypatch)
            words = words[end:]
    capsys.readouterr()


MAKE = [b for b in BLOCKS if b[3] == "make"]


@pytest.mark.parametrize("block", MAKE, ids=_ids(MAKE))
def test_the_make_targets_exist(block):
    for command in _commands(block[2]):
        target = shlex.split(command, comments=True)[1]
        done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr


def test_blocks_run_elsewhere_are_run_there():
    for line, _, _, mode in BLOCKS:
        if mode in ("run", "dry", "make"):
            continue
        test = ROOT / mode
        assert test.is_file(), f"README.md line {line}: {mode} is no test file"
        assert "README" in test.read_text(), f"{mode} does not say it runs README blocks"


def test_the_toml_excerpts_are_the_examples_lines():
    for line, language, text, _ in _blocks():
        named = re.match(r"# (examples/\S+\.toml)", text)
        if language != "toml" or not named:
            continue
        lines = {re.sub(r"\s+#.*", "", raw).strip()
                 for raw in (ROOT / named.group(1)).read_text().splitlines()}
        for raw in text.splitlines()[1:]:
            if raw.strip() and not raw.startswith("#"):
                assert raw.strip() in lines, f"README.md line {line}: {raw!r} not in the file"
