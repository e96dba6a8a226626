"""A newcomer's first comparison, with every default (issue 45): the page cache dropped before
each run, no --warmup, one run each, a memory limit that makes the reads 50x slower. The
baseline's cold start is found and left out, so the comparison decides read rate and p50 as
worse, and the headline, --brief, check (its exit status, JSON and JUnit) and the where line
carry the call. Before issue 45 these rows were 'unclear (not stationary)' and check said 125."""

from __future__ import annotations

import json

import pytest

from conftest import run_stallbench, skip_when_saturated

pytestmark = [pytest.mark.quiet, pytest.mark.root]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    work = tmp_path_factory.mktemp("d")
    for extra in (["--variant", "free"], ["--variant", "tight", "--memory", "24M"]):
        run_stallbench("run", "randread", *extra, "--results", str(results), "--dir", str(work),
                       "--file-size", "64M", "--duration", "3", "--no-progress", check=True,
                       timeout=300)
    return results


def test_the_cold_start_is_found_and_the_slowdown_decided(recorded):
    skip_when_saturated(recorded)
    results = ["--results", str(recorded)]
    report = json.loads(run_stallbench("compare", "free", "tight", *results, "--format", "json",
                                       check=True).stdout)
    change = report["ops"]["read"]["variants"]["tight"]["change"]
    assert change["rate"]["verdict"] == "worse", (change["rate"], report["level_shifts"])
    assert change["p50_ns"]["verdict"] == "worse", (change["p50_ns"], report["level_shifts"])
    free = next(v for v in report["variants"] if v["label"] == "free")["runs"][0]
    assert free["warmup_found"] == "settled" and free["warmup_s"] > 0
    text = run_stallbench("compare", "free", "tight", *results, check=True).stdout
    assert f"free the first {free['warmup_s']:g} s, found (the level settled" in \
        " ".join(text.split())
    brief = run_stallbench("compare", "free", "tight", *results, "--brief", check=True).stdout
    assert "worse" in brief.splitlines()[0], brief
    assert "not decided" not in brief
    junit = recorded / "check.xml"
    check = run_stallbench("check", "free", "tight", *results, "--metric", "read:p50",
                           "--metric", "read:rate", "--max-regression", "10%", "--format",
                           "json", "--junit", str(junit))
    assert check.returncode == 1, check.stdout + check.stderr
    assert "<failure" in junit.read_text()
    lines = [line for line in text.splitlines() if line.startswith("* read")]
    assert lines and "(not decided)" not in lines[0], lines
