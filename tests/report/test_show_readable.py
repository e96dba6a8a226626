"""`stallbench show` of a real run: mount and superblock options apart, the environment readable
and whole, op names not cut, every latency cell with two significant digits (issue 15 items 5
and 14)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from compare_fixtures import write_run

from conftest import run_stallbench
from stallbench.cli import main

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("show")
    results, work = base / "results", base / "work"
    work.mkdir()
    run_stallbench("run", "randread", "--variant", "a", "--results", str(results), "--dir",
                   str(work), "--file-size", "4M", "--duration", "0.5s", "--monitors", "none",
                   "--no-progress", "--no-drop-caches", check=True)
    return results, work


@pytest.mark.skipif(shutil.which("findmnt") is None, reason="needs findmnt (util-linux)")
def test_show_separates_mount_and_superblock_options(real_run):
    results, work = real_run
    vfs, fs = subprocess.run(["findmnt", "-n", "-o", "VFS-OPTIONS,FS-OPTIONS", "--target",
                              str(work)], capture_output=True, text=True,
                             check=True).stdout.split()
    out = run_stallbench("show", "a", "--results", str(results), check=True).stdout
    flat = " ".join(out.split())
    assert f"mount_options={vfs};" in flat
    assert f"superblock_options={fs}" in flat
    meta = json.loads(next(results.glob("a/randread/*/run.json")).read_text())
    filesystem = meta["environment"]["filesystem"]
    assert (filesystem["mount_options"], filesystem["superblock_options"]) == (vfs, fs)


def test_show_prints_the_environment_whole_and_within_100_columns(real_run):
    results, work = real_run
    out = run_stallbench("show", "a", "--results", str(results), check=True).stdout
    table = out.index("\nlatency in")
    assert [line for line in out[:table].splitlines() if len(line) > 100] == []
    assert '{"' not in out and "environment {" not in out
    flat = " ".join(out.split())
    # every top-level key of the recorded environment, and the last value of it, is shown
    meta = json.loads(next(results.glob("a/randread/*/run.json")).read_text())
    for key in meta["environment"]:
        assert f"{key}:" in flat
    assert f"workdir: {meta['environment']['workdir']}" in flat
    assert "space_needed: 4 MiB" in flat


def test_show_wraps_a_long_note_and_keeps_it_whole(real_run):
    # the note another program's page cache drops give a run (the suite's other lanes gave one:
    # 241 columns on one line); written into a copy of the real run's run.json
    results = real_run[0].parent / "noted"    # a path as short as the real run's
    shutil.copytree(real_run[0], results)
    run_json = next(results.glob("a/randread/*/run.json"))
    meta = json.loads(run_json.read_text())
    note = ("another program dropped the page cache 2 times during the run (vmstat "
            "drop_pagecache): cached reads became reads from the device and memory cgroups "
            "emptied, so this run's latencies are not its configuration's alone")
    # (the real run may have such a note of its own, from the other lanes' drops: it goes)
    meta["notes"] = [*(n for n in meta.get("notes", []) if not n.startswith(note[:38])), note]
    run_json.write_text(json.dumps(meta))
    out = run_stallbench("show", "a", "--results", str(results), check=True).stdout
    head = out[:out.index("\nlatency in")].splitlines()
    assert [line for line in head if len(line) > 100] == []
    start = next(i for i, line in enumerate(head) if line.startswith("    note: another"))
    shown = [head[start]] + [line for line in head[start + 1:start + 4]
                             if line.startswith("      ") and not line.startswith("       ")]
    assert " ".join(" ".join(shown).split()) == "note: " + note


def _significant_digits(cell: str) -> int:
    digits = cell.replace(".", "").replace(",", "").lstrip("0")
    return len(digits)


def test_show_keeps_long_op_names_and_two_significant_digits(tmp_path, capsys):
    rng = np.random.default_rng(5)
    fast = rng.integers(900, 5000, 4000)                         # 0.9-5 µs
    slow = rng.integers(2_000_000, 900_000_000, 4000)            # 2 ms - 0.9 s
    mixed = np.concatenate([rng.integers(300, 600, 3000), [40_000_000]])  # 300 ns .. 40 ms
    write_run(tmp_path, "v", {"checkpoint-fsync": slow, "commit (response)": fast,
                              "read": mixed}, duration_s=5.0)
    assert main(["show", "v", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()
            if line.startswith(("checkpoint-fsync", "commit (response)", "read "))}
    assert set(rows) == {"checkpoint-fsync", "commit (response)", "read"}
    for name, line in rows.items():
        cells = line[len(name):].split()[3:]      # samples, rate/s, unit, then 8 stats
        assert len(cells) == 8, line
        numbers = [c for c in cells if c != "n/r"]
        assert all(re.fullmatch(r"[\d.]+(ns|µs|ms|s)?", c) for c in numbers), line
        for cell in numbers:
            assert _significant_digits(re.sub(r"[a-zµ]+$", "", cell)) >= 2, (name, cell, line)
