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
from stallbench.plan import load_plan, plan_json_schema
from stallbench.workloads import available_workloads, get_workload

ROOT = Path(__file__).resolve().parent.parent


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
