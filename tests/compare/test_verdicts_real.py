"""Verdicts on real runs of this machine: an A/A pair is called nothing, a real change is found
with one run each. (benchmarks/aa.py measures the rates over many pairs; these are the gates.)"""

from __future__ import annotations

import json

import pytest

from conftest import run_stallbench, skip_when_saturated

pytestmark = pytest.mark.quiet

RUN = ["--duration", "3", "--monitors", "none", "--no-progress", "--no-drop-caches",
       "--file-size", "64M"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    cached = tmp_path_factory.mktemp("cached")
    direct = tmp_path_factory.mktemp("direct")
    # the file is written by the first run's preparation, so it starts in the page cache
    for variant, directory, extra in (("a1", cached, []), ("a2", cached, []),
                                      ("odirect", direct, ["--direct"])):
        run_stallbench("run", "randread", "--variant", variant, "--results", str(results),
                       "--dir", str(directory), *RUN, *extra, check=True)
    return results


def _calls(report: dict, candidate: str) -> list[str]:
    calls = []
    for name, op in report["ops"].items():
        for key, change in op["variants"][candidate]["change"].items():
            if change["verdict"] in ("better", "worse"):
                calls.append(f"{name} {key} {change['change']:+.1%} "
                             f"[{change['low']:+.1%}, {change['high']:+.1%}]")
    return calls


def test_an_aa_pair_is_called_nothing_and_check_does_not_fail_it(recorded):
    out = run_stallbench("compare", "a1", "a2", "--results", str(recorded), "--format", "json",
                         check=True)
    report = json.loads(out.stdout)
    assert _calls(report, "a2") == []
    p99 = report["ops"]["read"]["variants"]["a2"]["change"]["p99_ns"]
    assert p99["runs"] == [1, 1] and p99["run_sd_measured"] is False and p99["blocks"][0] >= 4
    check = run_stallbench("check", "a1", "a2", "--results", str(recorded),
                           "--metric", "read:p50", "--metric", "read:p99",
                           "--metric", "read:p999", "--max-regression", "10%")
    assert check.returncode in (0, 125), check.stdout + check.stderr


def test_o_direct_against_the_page_cache_is_called_worse_with_one_run_each(recorded):
    skip_when_saturated(recorded)
    out = run_stallbench("compare", "a1", "odirect", "--results", str(recorded),
                         "--format", "json", check=True)
    read = json.loads(out.stdout)["ops"]["read"]["variants"]["odirect"]["change"]
    assert read["p50_ns"]["verdict"] == "worse" and read["p50_ns"]["change"] > 1.0, \
        (read["p50_ns"], json.loads(out.stdout)["level_shifts"])
    assert read["rate"]["verdict"] == "worse"
    check = run_stallbench("check", "a1", "odirect", "--results", str(recorded),
                           "--metric", "read:p50", "--max-regression", "10%")
    assert check.returncode == 1, check.stdout + check.stderr
    text = run_stallbench("compare", "a1", "odirect", "--results", str(recorded), check=True)
    assert "one run of a1, odirect" in text.stdout
    # O_DIRECT reads are slower and fewer, but they never stopped: not starved
    rate = next(line for line in text.stdout.splitlines() if line.split()[:1] == ["rate/s"])
    assert "FEWER OPS" in rate and "STARVED" not in rate


def test_a_monitor_run_on_one_side_only_is_said_not_a_change(recorded, tmp_path):
    results = tmp_path / "results"
    work = tmp_path / "work"
    work.mkdir()
    for variant, monitors in (("with", "counters"), ("without", "none")):
        run_stallbench("run", "randread", "--variant", variant, "--results", str(results),
                       "--dir", str(work), "--duration", "2", "--monitors", monitors,
                       "--no-progress", "--no-drop-caches", "--file-size", "16M", check=True)
    out = run_stallbench("compare", "with", "without", "--results", str(results), check=True)
    assert "counters not collected in without" in " ".join(out.stdout.split())
    assert "-100%" not in out.stdout
    report = json.loads(run_stallbench("compare", "with", "without", "--results", str(results),
                                       "--format", "json", check=True).stdout)
    assert report["where"]["counters"]["without"] == []
