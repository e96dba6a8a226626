"""Environment record (env/machinestate.py) and the diff between variants (analysis/environment.py):
real runs with a THP mode (and, where the machine has one, the CPU governor) changed between
them; the oracle is the sysfs file itself, read by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_stallbench
from stallbench.analysis.environment import environment_diff
from stallbench.env import machinestate
from stallbench.report.environment import render_lines

pytestmark = pytest.mark.machine

THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def _active(path: Path) -> str:
    text = path.read_text()
    return text[text.index("[") + 1:text.index("]")] if "[" in text else text.strip()


def _run(results: Path, workdir: Path, variant: str, *extra: str) -> dict:
    run_stallbench("run", "randread", "--variant", variant, "--results", str(results),
                   "--dir", str(workdir), "--file-size", "8M", "--duration", "1",
                   "--monitors", "none", "--no-progress", *extra, check=True)
    run_dir = next((results / variant / "randread").iterdir())
    return json.loads((run_dir / "run.json").read_text())


@pytest.mark.root
@pytest.mark.skipif(not THP_ENABLED.exists(), reason="kernel without transparent huge pages")
def test_a_thp_change_between_two_real_runs_is_reported(results, workdir):
    original = _active(THP_ENABLED)
    offered = THP_ENABLED.read_text().replace("[", "").replace("]", "").split()
    other = next(mode for mode in ("always", "madvise", "never") if mode in offered
                 and mode != original)
    swappiness = Path("/proc/sys/vm/swappiness").read_text().strip()
    planned = "17" if swappiness != "17" else "18"
    first = _run(results, workdir, "A")
    try:
        THP_ENABLED.write_text(other)
        second = _run(results, workdir, "B", "--sysctl", f"vm.swappiness={planned}")
    finally:
        THP_ENABLED.write_text(original)
    assert _active(THP_ENABLED) == original

    inv_a, inv_b = first["environment"]["inventory"], second["environment"]["inventory"]
    assert inv_a["thp"]["enabled"] == original and inv_b["thp"]["enabled"] == other
    assert inv_a["sysctl"]["vm.swappiness"] == swappiness
    assert inv_b["sysctl"]["vm.swappiness"] == planned       # recorded as the workload ran
    assert inv_a["cpu"]["count"] == len(list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*")))
    device = inv_a["device"]["name"]
    assert inv_a["device"]["scheduler"] == _active(Path(f"/sys/block/{device}/queue/scheduler"))
    assert inv_a["device"]["read_ahead_kb"] == \
        Path(f"/sys/block/{device}/queue/read_ahead_kb").read_text().strip()

    out = run_stallbench("compare", "A", "B", "--results", str(results), check=True).stdout
    # the notes after the tables (answer first): the paragraph that holds the environment lines
    header = next(block for block in out.split("\n\n") if "environment:" in block)
    assert f"thp.enabled: {original} (A) vs {other} (B)" in header, header
    assert "also differed, as the plan set: sysctl.vm.swappiness" in header, header
    # the THP change is the only unplanned difference (nothing else changed between the runs)
    assert "environment: 1 difference(s) besides the plan's settings" in header, header
    assert "WARNING" not in header


@pytest.mark.root
def test_a_governor_change_between_two_real_runs_warns():
    if not GOVERNOR.exists():
        pytest.skip("no cpufreq governor on this machine (cpu0/cpufreq absent): recorded as "
                    "'unavailable', see test_missing_files_are_unavailable")
    available = (GOVERNOR.parent / "scaling_available_governors").read_text().split()
    original = GOVERNOR.read_text().strip()
    other = next((g for g in available if g != original), None)
    if other is None:
        pytest.skip(f"only one governor offered ({original})")
    paths = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"))
    before = {p: p.read_text().strip() for p in paths}
    first = machinestate.collect(Path("/"), [])
    try:
        for p in paths:
            p.write_text(other)
        second = machinestate.collect(Path("/"), [])
    finally:
        for p, value in before.items():
            p.write_text(value)
    diff = environment_diff({"A": [{"inventory": first}], "B": [{"inventory": second}]})
    lines = render_lines(diff)
    assert any(line.startswith("WARNING: cpu.governor differs") for line in lines), lines


def test_missing_files_are_unavailable(tmp_path):
    facts = machinestate.block_device("no-such-device")
    assert {v for k, v in facts.items() if k != "name"} == {machinestate.UNAVAILABLE}
    (tmp_path / "vm").mkdir()
    (tmp_path / "kernel").mkdir()
    (tmp_path / "vm" / "swappiness").write_text("60\n")
    (tmp_path / "vm" / "drop_caches").write_text("")
    (tmp_path / "vm" / "drop_caches").chmod(0o200)             # a write-only trigger
    (tmp_path / "vm" / "stat_refresh").write_text("")
    (tmp_path / "vm" / "stat_refresh").chmod(0o600)            # root only: not read
    (tmp_path / "kernel" / "sched_child_runs_first").write_text("0\n")
    (tmp_path / "kernel" / "hostname").write_text("x\n")         # not vm.* or kernel.sched*
    assert machinestate.sysctls(tmp_path) == {"vm.swappiness": "60",
                                           "kernel.sched_child_runs_first": "0"}
    # a whole record is built even where this machine lacks a fact
    record = machinestate.collect(tmp_path, [])
    assert record["device"] == {"name": machinestate.UNAVAILABLE}
    json.dumps(record)


def _env(cpu_model: str, thp: str, scheduler: str | None = None, runs: int = 1) -> list[dict]:
    env: dict = {"inventory": {"cpu": {"model": cpu_model}, "thp": {"enabled": thp},
                               "device": {"name": "loop3", "scheduler": scheduler or "none"}},
                 "filesystem": {"dir": "/x"}}
    if scheduler:
        env["scheduler"] = {"new": scheduler}
    return [env] * runs


def test_diff_marks_planned_and_must_equal_differences():
    diff = environment_diff({"base": _env("Xeon", "madvise"),
                             "cand": _env("EPYC", "madvise", scheduler="bfq"),
                             "old": [{}]})
    by_key = {d["key"]: d for d in diff["differences"]}
    assert by_key["cpu.model"]["must_equal"] and not by_key["cpu.model"]["planned"]
    assert by_key["device.scheduler"]["planned"]
    assert "thp.enabled" not in by_key and "device.name" not in by_key
    assert diff["missing"] == ["old"]
    lines = render_lines(diff)
    assert lines[0].startswith("WARNING: cpu.model differs: Xeon (base) vs EPYC (cand)")
    assert any("as the plan set: device.scheduler" in line for line in lines)


def test_system_memory_explains_nr_hugepages():
    base = {"inventory": {"sysctl": {"vm.nr_hugepages": "0"}}}
    held = {"inventory": {"sysctl": {"vm.nr_hugepages": "900"}},
            "system_memory": {"requested": 1 << 30}}
    diff = environment_diff({"a": [base], "b": [held]})
    assert [(d["key"], d["planned"]) for d in diff["differences"]] == [("sysctl.vm.nr_hugepages",
                                                                         True)]


def test_runs_of_one_variant_that_disagree_are_named():
    diff = environment_diff({"a": _env("Xeon", "madvise") + _env("Xeon", "always"),
                             "b": _env("Xeon", "madvise")})
    assert diff["within"] == {"a": ["thp.enabled"]}
    assert diff["differences"][0]["values"] == {"a": "madvise | always", "b": "madvise"}
