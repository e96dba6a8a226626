"""`stallbench reproduce` refuses, in one line and before anything runs, what would make the runs
of today differ from the record (reproduce/recipe.py): a tree recorded without the plan's text
(the snapshot tree of stallbench 0.3.0), a kernel variant whose image has another sha256 now
(a copied Debian kernel package, changed after the record: nothing is booted), a variant its
recorded plan does not have, a NEW that is the tree itself or holds its variants; and a tool
not installed (QEMU, for that kernel variant) is said by the runner's checks in one line
before any change. The recorded runs are written here with the runs' own writer, their
run.json given the plan record a real run makes (plan/record.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from conftest import ROOT, run_stallbench
from stallbench.plan.planfile import load_plan
from stallbench.plan.record import plan_record

pytestmark = pytest.mark.pure

DEBS = sorted(Path("/var/cache/stallbench-test-kernels").glob("*.deb"))
PLAN = """workload = "randread"
duration = "1s"
[workload_options]
file_size = "8M"
[[variants]]
name = "host"
[[variants]]
name = "guest"
kernel = "{kernel}"
vm_cpus = 1
vm_memory = "256M"
"""


def _one_line(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("stallbench: "), proc.stderr
    return proc.stderr


@pytest.fixture
def recorded(tmp_path) -> tuple[Path, Path]:
    """A tree of two variants, one a kernel variant, as `run --plan` records them; the kernel
    a copy of a test kernel package."""
    if not DEBS:
        pytest.skip("no test kernels (scripts/fetch-test-kernels.sh)")
    kernel = tmp_path / "kernels" / "linux-image-test.deb"
    kernel.parent.mkdir()
    shutil.copyfile(DEBS[0], kernel)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN.format(kernel=kernel))
    plan = load_plan(plan_path)
    results = tmp_path / "results"
    rng = np.random.default_rng(46)
    for variant in plan.variants:
        run = write_run(results, variant.name, {"read": lognormal_ns(rng, 2000, 20e3, 0.3)},
                        duration_s=1.0, workload="randread")
        meta = json.loads((run / "run.json").read_text())
        meta["plan"] = plan_record(plan, variant)
        (run / "run.json").write_text(json.dumps(meta))
    return results, kernel


def test_a_tree_without_the_plans_text_gets_one_line(tmp_path):
    new = tmp_path / "new"
    line = _one_line(run_stallbench("reproduce", str(ROOT / "tests/data/snapshot/results"),
                                    "--results", str(new)))
    assert "stallbench 0.3.0 without the text of their plan" in line
    assert not new.exists()


def test_a_changed_kernel_image_is_refused_by_its_hash(recorded, tmp_path):
    results, kernel = recorded
    with open(kernel, "ab") as f:          # the same name, other bytes
        f.write(b"\0")
    new = tmp_path / "new"
    line = _one_line(run_stallbench("reproduce", str(results), "--results", str(new)))
    recorded_sha = json.loads(next(results.glob("guest/randread/1/run.json")).read_text())[
        "plan"]["kernel"]["sha256"]
    assert "variant guest" in line and recorded_sha[:16] in line
    assert "linux-image-test.deb" in line
    assert not new.exists()
    kernel.unlink()
    line = _one_line(run_stallbench("reproduce", str(results), "--results", str(new)))
    assert "is not there" in line and not new.exists()


def test_a_missing_tool_is_said_before_anything_runs(recorded, tmp_path):
    results, _ = recorded
    bare = tmp_path / "bin"                # a PATH with no QEMU on it
    bare.mkdir()
    new = tmp_path / "new"
    line = _one_line(run_stallbench("reproduce", str(results), "--results", str(new),
                                    env={"PATH": str(bare)}))
    assert "qemu" in line.lower()
    assert not any(new.glob("*/randread"))          # no run folder was made


def test_a_variant_its_plan_lacks_and_a_taken_new_are_refused(recorded, tmp_path):
    results, _ = recorded
    line = _one_line(run_stallbench("reproduce", str(results), "--results", str(results)))
    assert "the recorded tree itself" in line
    taken = tmp_path / "taken"
    shutil.copytree(results / "host", taken / "host")
    line = _one_line(run_stallbench("reproduce", str(results), "--results", str(taken)))
    assert "already holds runs of host" in line
    run_json = next(results.glob("guest/randread/1/run.json"))
    meta = json.loads(run_json.read_text())
    meta["plan"]["text"] = meta["plan"]["text"].replace('name = "guest"', 'name = "other"')
    run_json.write_text(json.dumps(meta))
    new = tmp_path / "new"
    line = _one_line(run_stallbench("reproduce", str(results), "--results", str(new)))
    assert "variant guest is not in the plan" in line
    assert not new.exists()
