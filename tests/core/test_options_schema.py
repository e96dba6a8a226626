"""One declaration per setting (issue 14 item 1): misspelt keys are refused on both surfaces,
both surfaces give the same defaults, and the committed plan schema is the generated one."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from stallbench.cli import build_parser
from stallbench.cli.run import plan_from_args
from stallbench.plan.planfile import load_plan
from stallbench.plan.schema import plan_json_schema
from stallbench.workloads import available_workloads, get_workload

pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[2]


def _stallbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd)


def _one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("body, line, key, hint, table", [
    ('[options]\nfile_size = "4M"\nthreds = 2\n\n[[variants]]\nname = "x"\n', 4, "threds",
     "threads", "[options]"),
    ('[[variants]]\nname = "x"\nmemroy = "256M"\n', 4, "memroy", "memory", "[variants[0]]"),
    ('[[variants]]\nname = "x"\n[variants.workload_options]\nrecord-sise = "8K"\n', 5,
     "record-sise", "record_size", "[variants[0].workload_options]"),
])
def test_a_misspelt_key_in_a_plan_is_refused_with_file_line_key(tmp_path, body, line, key,
                                                                  hint, table):
    plan = tmp_path / "plan.toml"
    plan.write_text('workload = "randread"\n' + body)
    message = _one_line_exit_2(_stallbench("run", "--plan", str(plan), "--results",
                                           str(tmp_path / "r"), cwd=tmp_path))
    assert message.startswith(f"stallbench: {plan}:{line}: "), message
    assert f"unknown key {key!r} in {table} (did you mean {hint!r}?)" in message, message
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flag", ["--threds", "--memroy", "--duraton"])
def test_the_same_misspelling_on_the_command_line_is_refused_by_argparse(tmp_path, flag):
    message = _one_line_exit_2(_stallbench("run", "randread", flag, "2", "--results",
                                           str(tmp_path / "r"), cwd=tmp_path))
    assert flag in message and "unrecognized arguments" in message
    assert not (tmp_path / "r").exists()


def _from_both(tmp_path: Path, workload: str, argv: list[str]):
    """(Plan from the real argument parser, Plan from the real plan reader), nothing given."""
    args = build_parser().parse_args(["run", workload, "--variant", "x", *argv])
    path = tmp_path / f"{workload}.toml"
    path.write_text(f'workload = "{workload}"\n[[variants]]\nname = "x"\n')
    return plan_from_args(args), load_plan(path)


def test_run_and_variant_defaults_are_the_same_from_flags_and_from_a_plan(tmp_path,
                                                                         monkeypatch):
    monkeypatch.delenv("STALLBENCH_RESULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    cli, plan = _from_both(tmp_path, "randread", [])
    for key in ("duration_s", "iterations", "warmup_s", "until_decided", "monitors",
                "results", "hosts"):
        assert getattr(cli, key) == getattr(plan, key), key
    assert cli.duration_s == 30.0                   # the documented default of --duration
    assert asdict(cli.variants[0]) == asdict(plan.variants[0])
    assert cli.workload_options == plan.workload_options == {}


@pytest.mark.parametrize("name", available_workloads())
def test_workload_option_defaults_are_the_same_from_flags_and_from_a_plan(tmp_path, name):
    cls = get_workload(name)
    # a required option (fio's job, command's argv) given the same way on both sides
    needed = {"fio": (["--job", "j.fio"], {"job": "j.fio"}),
              "command": (["--", "true"], {"argv": ["--", "true"]})}.get(name, ([], {}))
    args = build_parser().parse_args(["run", name, *needed[0]])
    from_flags = plan_from_args(args).workload_options
    path = tmp_path / "p.toml"
    lines = [f'workload = "{name}"', "[options]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in needed[1].items()]
    path.write_text("\n".join(lines) + '\n[[variants]]\nname = "x"\n')
    try:
        from_plan = load_plan(path).workload_options
    except Exception as exc:  # noqa: BLE001 - fio/pgbench refuse without their programs
        if "not installed" in str(exc) or "cannot read job file" in str(exc):
            from_plan = dict(needed[1])
        else:
            raise
    assert cls.parse_options(from_flags) == cls.parse_options(from_plan)
    # and every option the table declares has a flag the parser knows
    known = {a.dest for a in build_parser()._subparsers._group_actions[0]
             .choices["run"]._subparsers._group_actions[0].choices[name]._actions}
    assert set(cls.option_names()) <= known


@pytest.mark.parametrize("name", ["randread", "pgioperf"])
def test_resolved_params_agree_between_flags_and_plan(tmp_path, name):
    cli, plan = _from_both(tmp_path, name, [])
    cls = get_workload(name)
    a, b = cls.from_options(cli.workload_options), cls.from_options(plan.workload_options)
    a.resolve(64 << 20)
    b.resolve(64 << 20)
    assert a.params() == b.params()


def test_the_committed_plan_schema_is_the_generated_one():
    committed = json.loads((ROOT / "src/stallbench/schemas/plan.schema.json").read_text())
    assert committed == plan_json_schema(), "run `make cli-docs` to regenerate the schema"


# A value for every variant flag, written as a user would on each surface, and the parsed value
# it must give (hand-computed): (flag arguments, plan lines, expected attribute values).
VARIANT_SAMPLES = {
    "name": (["--variant", "v1"], ['name = "v1"'], {"name": "v1"}),
    "dir": (["--dir", "/srv/bench"], ['dir = "/srv/bench"'], {"dir": Path("/srv/bench")}),
    "fs": (["--fs", "xfs"], ['fs = "xfs"'], {"fs": "xfs"}),
    "fs_size": (["--fs", "ext4", "--fs-size", "64M"], ['fs = "ext4"', 'fs_size = "64M"'],
                {"fs_size": 64 << 20}),
    "mkfs_opts": (["--fs", "ext4", "--mkfs-opts", "-O ^has_journal"],
                  ['fs = "ext4"', 'mkfs_opts = "-O ^has_journal"'],
                  {"mkfs_opts": "-O ^has_journal"}),
    "mount_opts": (["--fs", "ext4", "--mount-opts", "noatime"],
                   ['fs = "ext4"', 'mount_opts = "noatime"'], {"mount_opts": "noatime"}),
    "work_dir": (["--work-dir", "/var/tmp/img"], ['work_dir = "/var/tmp/img"'],
                 {"work_dir": Path("/var/tmp/img")}),
    "keep_image": (["--fs", "ext4", "--keep-image"], ['fs = "ext4"', "keep_image = true"],
                   {"keep_image": True}),
    "memory": (["--memory", "256M"], ['memory = "256M"'], {"memory": 256 << 20}),
    "system_memory": (["--system-memory", "1G"], ["system_memory = 1073741824"],
                      {"system_memory": 1 << 30}),
    "sysctls": (["--sysctl", "vm.dirty_ratio=5", "--sysctl", "vm.swappiness=10"],
                ["[variants.sysctls]", "vm.dirty_ratio = 5", '"vm.swappiness" = "10"'],
                {"sysctls": {"vm.dirty_ratio": "5", "vm.swappiness": "10"}}),
    "scheduler": (["--scheduler", "mq-deadline"], ['scheduler = "mq-deadline"'],
                  {"scheduler": "mq-deadline"}),
    "drop_caches": (["--no-drop-caches"], ["drop_caches = false"], {"drop_caches": False}),
    "kernel": (["--kernel", "/boot/vmlinuz"], ['kernel = "/boot/vmlinuz"'],
               {"kernel": "/boot/vmlinuz"}),
    "vm_cpus": (["--kernel", "/k", "--vm-cpus", "3"], ['kernel = "/k"', "vm_cpus = 3"],
                {"vm_cpus": 3}),
    "vm_memory": (["--kernel", "/k", "--vm-memory", "512M"], ['kernel = "/k"',
                  'vm_memory = "512M"'], {"vm_memory": 512 << 20}),
    "memory_high": (["--memory-high", "200M"], ['memory_high = "200M"'],
                    {"memory_high": 200 << 20}),
    "memory_soft_limit": (["--memory-soft-limit", "100M"], ['memory_soft_limit = "100M"'],
                          {"memory_soft_limit": 100 << 20}),
    "swap_limit": (["--swap-limit", "0"], ["swap_limit = 0"], {"swap_limit": 0}),
    "io_max": (["--io-max", "rbps=4M,wiops=100"], ['io_max = "rbps=4M,wiops=100"'],
               {"io_max": {"rbps": 4 << 20, "wiops": 100}}),
    "io_weight": (["--io-weight", "100"], ["io_weight = 100"], {"io_weight": 100}),
    "io_latency": (["--io-latency", "5ms"], ['io_latency = "5ms"'], {"io_latency_us": 5000}),
}


def test_every_variant_flag_and_its_plan_key_give_the_same_settings(tmp_path):
    from stallbench.settings.variant import VARIANT_FIELDS

    flagged = {f.name for f in VARIANT_FIELDS if f.option is not None}
    assert flagged == set(VARIANT_SAMPLES), "give a sample for each new variant setting"
    for name, (argv, lines, expected) in VARIANT_SAMPLES.items():
        args = build_parser().parse_args(["run", "randread", *argv])
        from_flags = plan_from_args(args).variants[0]
        split = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
        body, tables = lines[:split], lines[split:]
        if name != "name":
            body.insert(0, 'name = "x"')
        path = tmp_path / f"{name}.toml"
        path.write_text('workload = "randread"\n[[variants]]\n' + "\n".join(body + tables)
                        + "\n")
        from_plan = load_plan(path).variants[0]
        for attr, value in expected.items():
            assert getattr(from_flags, attr) == value, (name, "flags")
            assert getattr(from_plan, attr) == value, (name, "plan")
        flags_dict, plan_dict = asdict(from_flags), asdict(from_plan)
        flags_dict.pop("name"), plan_dict.pop("name")
        assert flags_dict == plan_dict, name


def test_every_workload_flag_and_its_plan_key_parse_the_same(tmp_path):
    """Each randread and pgioperf option given once as a flag, once as a plan key."""
    samples = {"randread": {"threads": ("3", 3), "file_size": ('"8M"', 8 << 20),
                            "record_size": ('"8K"', 8192), "direct": ("true", True),
                            "mmap": ("true", True),
                            "seed": ("7", 7)},
               "pgioperf": {"readers": ("2", 2), "data_size": ('"1M"', 1 << 20),
                            "wal_size": ('"64K"', 64 << 10),
                            "wal_interval": ('"2ms"', 0.002),
                            "checkpoint_interval": ('"1ms"', 0.001),
                            "checkpoint_fsync_every": ("50", 50), "seed": ("9", 9)}}
    for workload, options in samples.items():
        cls = get_workload(workload)
        assert set(options) == set(cls.option_names())
        for key, (toml_value, expected) in options.items():
            flag = "--" + key.replace("_", "-")
            argv = [flag] if toml_value == "true" else [flag, toml_value.strip('"')]
            from_flags = plan_from_args(build_parser().parse_args(["run", workload, *argv]))
            path = tmp_path / f"{workload}-{key}.toml"
            path.write_text(f'workload = "{workload}"\n[options]\n{key} = {toml_value}\n'
                            '[[variants]]\nname = "x"\n')
            from_plan = load_plan(path)
            a = cls.parse_options(from_flags.workload_options)
            b = cls.parse_options(from_plan.workload_options)
            assert getattr(a, key) == getattr(b, key) == pytest.approx(expected), key
