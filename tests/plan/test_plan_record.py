"""What a run records of its plan, so that it can be run again (run.json `plan`, issue 46):
the text of a plan file as it was read, and for a run from flags the plan file its flags make,
which load_plan reads back to the same plan (its hash, settings and options); a kernel's
identity against sha256sum's; the kernel config's hash against the shell's own reading of
/proc/config.gz; and a real run from flags keeps all of it in run.json and kernel.config."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import run_stallbench
from stallbench.cli import build_parser
from stallbench.cli.run import plan_from_args
from stallbench.core.kernelconfig import config_digest, running_config
from stallbench.core.tomlwrite import dumps
from stallbench.plan.planfile import load_plan
from stallbench.plan.record import plan_hash, plan_record, plan_text, variant_settings
from stallbench.vm.kernel import kernel_identity

pytestmark = pytest.mark.pure

FLAG_RUNS = [
    ["randread", "--variant", "low", "--memory", "64M", "--duration", "1.5s",
     "--file-size", "8M", "--record-size", "64K", "--direct"],
    ["randread", "--variant", "sys", "--sysctl", "vm.dirty_ratio=5", "--sysctl",
     "vm.swappiness=10", "--iterations", "3", "--warmup", "0.5s", "--monitors", "counters,psi",
     "--no-drop-caches", "--fs", "ext4", "--fs-size", "256M", "--mount-opts", "noatime"],
    ["pgioperf", "--variant", "pg", "--readers", "2", "--data-size", "64M", "--duet"],
]


def _flag_plan(argv: list[str], tmp_path: Path):
    args = build_parser(["run", *argv]).parse_args(["run", *argv, "--results", str(tmp_path)])
    return plan_from_args(args)


@pytest.mark.parametrize("argv", FLAG_RUNS, ids=lambda a: a[2])
def test_the_plan_a_run_from_flags_records_reads_back_to_the_same_plan(argv, tmp_path):
    plan = _flag_plan(argv, tmp_path)
    text = plan_text(plan)
    path = tmp_path / "again.toml"
    path.write_text(text)
    again = load_plan(path)
    assert plan_hash(again) == plan_hash(plan)
    assert [variant_settings(v) for v in again.variants] == \
        [variant_settings(v) for v in plan.variants]
    assert [v.name for v in again.variants] == [v.name for v in plan.variants]
    assert (again.iterations, again.duet, again.monitors, again.warmup_s) == \
        (plan.iterations, plan.duet, plan.monitors, plan.warmup_s)
    assert again.workload_options == plan.workload_options


def test_a_plan_file_is_recorded_as_it_was_written(tmp_path):
    text = ('# my plan, comments kept\nworkload = "randread"\nduration = "2s"  # short\n'
            '[workload_options]\nfile_size = "8M"\n[[variants]]\nname = "a"\n'
            '[[variants]]\nname = "b"\nmemory = "32M"\n')
    path = tmp_path / "plan.toml"
    path.write_text(text)
    plan = load_plan(path)
    record = plan_record(plan, plan.variants[1])
    assert record["text"] == text
    assert record["file"] == str(path.resolve())
    assert "kernel" not in record


def test_a_kernel_is_known_by_its_file_and_sha256(tmp_path):
    debs = sorted(Path("/var/cache/stallbench-test-kernels").glob("*.deb"))
    if not debs:
        pytest.skip("no test kernels (scripts/fetch-test-kernels.sh)")
    deb = tmp_path / "k.deb"
    shutil.copyfile(debs[0], deb)
    expected = subprocess.run(["sha256sum", str(deb)], capture_output=True, text=True,
                              check=True).stdout.split()[0]
    assert kernel_identity(str(deb)) == {"file": "k.deb", "sha256": expected}
    # a bisect --git build's directory: its image and its config
    build = tmp_path / "build"
    build.mkdir()
    image = build / "bzImage"
    image.write_bytes(b"not booted here" * 100)
    (build / ".config").write_text("# comment\nCONFIG_B=y\n# CONFIG_C is not set\nCONFIG_A=m\n")
    identity = kernel_identity(str(build))
    assert identity["file"] == "bzImage"
    assert identity["sha256"] == subprocess.run(["sha256sum", str(image)], capture_output=True,
                                                text=True, check=True).stdout.split()[0]
    assert identity["config_sha256"] == subprocess.run(
        ["sh", "-c", "printf 'CONFIG_A=m\\nCONFIG_B=y\\n' | sha256sum"], capture_output=True,
        text=True, check=True).stdout.split()[0]


def test_the_running_kernels_config_hash_is_the_sorted_options():
    if not running_config():
        pytest.skip("no /proc/config.gz or /boot/config-$(uname -r) here")
    shell = ("{ zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r); } "
             "| grep '^CONFIG_.*=' | LC_ALL=C sort | sha256sum")
    expected = subprocess.run(["sh", "-c", shell], capture_output=True, text=True,
                              check=True).stdout.split()[0]
    assert config_digest(running_config()) == expected


def test_long_values_are_split_within_the_width_and_read_back():
    data = {"workload": "randread", "monitors": [f"monitor-{i}" for i in range(12)],
            "variants": [{"name": "k", "kernel": "/var/cache/" + "x" * 150 + ' "q" \\ end',
                          "sysctls": {"vm.dirty_ratio": 5}}]}
    text = dumps(data, width=72)
    assert max(len(line) for line in text.splitlines()) <= 72
    assert tomllib.loads(text) == data


@pytest.mark.root
def test_a_real_run_from_flags_keeps_its_plan_and_kernel_config(tmp_path):
    results = tmp_path / "results"
    proc = run_stallbench("-q", "run", "randread", "--variant", "v", "--results", str(results),
                          "--duration", "0.5", "--file-size", "4M", "--monitors", "counters",
                          "--no-progress", timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_dir = results / "v/randread/1"
    meta = json.loads((run_dir / "run.json").read_text())
    again = tmp_path / "again.toml"
    again.write_text(meta["plan"]["text"])
    assert plan_hash(load_plan(again)) == meta["plan"]["hash"]
    if running_config():
        config = (run_dir / "kernel.config").read_bytes()
        import hashlib
        assert hashlib.sha256(config).hexdigest() == meta["kernel"]["config_sha256"]
