"""A guest finds the C read loop its host built. The guest sees the host's files read-only: a
stallbench without the loop next to its source (a pip install; a tree under /tmp, whose guest
gets the host's /tmp) made every guest run either build it under QEMU TCG or, where HOME is
that read-only /tmp, run the Python loop and say so. The oracle: the run's own note, which
names the loop and why (workloads/native)."""

from __future__ import annotations

import compileall
import json
import shutil
from pathlib import Path

import pytest
from reliability_support import sb
from vm_support import guest_kernels, requires_vm

from stallbench.workloads import native

pytestmark = [pytest.mark.guest, requires_vm]
SOURCE_TREE = Path(native.__file__).parents[3]     # src/ (native/ < workloads/ < stallbench/)


def _notes(results: Path) -> list[str]:
    meta = json.loads(next(results.glob("guest/randread/*/run.json")).read_text())
    assert meta["status"] == "complete", meta["reason"]
    return meta["notes"]


def test_a_guest_uses_the_c_loop_its_host_built_and_the_hosts_choice(tmp_path):
    deb, _release = guest_kernels()[-1]
    if native.read_ops()[0] is None:
        pytest.skip(f"no C loop on this host: {native.read_ops()[1]}")
    tree = tmp_path / "src"
    shutil.copytree(SOURCE_TREE / "stallbench", tree / "stallbench",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    compileall.compile_dir(tree, quiet=1, workers=0)
    args = ("run", "randread", "--variant", "guest", "--kernel", str(deb), "--vm-cpus", "1",
            "--vm-memory", "512M", "--file-size", "8M", "--duration", "1", "--monitors", "none",
            "--no-progress")
    for name, extra, python_loop in (("c", {}, False),
                                     ("python", {native.NO_C_LOOP: "1"}, True)):
        results = tmp_path / name
        out = sb(*args, "--results", str(results), state=tmp_path / "state", timeout=300,
                 PYTHONPATH=str(tree), **extra)
        assert out.returncode == 0, out.stdout + out.stderr
        said = [note for note in _notes(results) if "the read loop ran in Python" in note]
        assert bool(said) == python_loop, said
        if python_loop:        # the host's STALLBENCH_NO_C_LOOP=1 reached the guest
            assert f"({native.NO_C_LOOP}=1)" in said[0], said
