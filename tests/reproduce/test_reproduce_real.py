"""`stallbench reproduce` of a real two-variant tree (randread with all of memory and in a memory
cgroup smaller than its file, 3 runs each, 1 s runs): the recorded plan runs again into a new
tree, and the verdicts of then and now agree on every row that decides (the comparison JSON of
each tree is the oracle: what `reproduce` prints is their verdicts and changes, row by row);
every change called then is said to be reproduced; the new runs record the same plan hash and
text. Judges verdicts: the quiet lane, skipped on a machine that other work saturated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_stallbench, skip_when_saturated

pytestmark = [pytest.mark.quiet, pytest.mark.root]

PLAN = """workload = "randread"
duration = "1s"
iterations = 3
monitors = []
results = "{results}"

[workload_options]
file_size = "32M"
record_size = "4K"

[[variants]]
name = "unlimited"

[[variants]]
name = "memcg-16M"
memory = "16M"
"""


def _percent(x: float) -> str:
    """The oracle's rendering of a change: +N% from ±100% on, else one decimal."""
    p = x * 100
    return f"{p:+.0f}%" if abs(p) >= 100 else f"{p:+.1f}%"


def _verdicts(results: Path) -> dict[str, dict]:
    proc = run_stallbench("compare", "unlimited", "memcg-16M", "--results", str(results),
                          "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["ops"]["read"]["variants"]["memcg-16M"]["change"]


def test_reproduce_gives_the_recorded_verdicts_again(tmp_path):
    plan = tmp_path / "plan.toml"
    recorded = tmp_path / "results"
    plan.write_text(PLAN.format(results=recorded))
    run_stallbench("-q", "run", "--plan", str(plan), "--no-progress", check=True, timeout=300)
    skip_when_saturated(recorded)
    new = tmp_path / "again"
    proc = run_stallbench("-q", "reproduce", str(recorded), "--results", str(new),
                          "--no-progress", timeout=300)
    assert proc.returncode in (0, 1, 125), proc.stderr
    skip_when_saturated(new)
    then, now = _verdicts(recorded), _verdicts(new)
    lines = [line.strip() for line in proc.stdout.splitlines()]
    called = undecided = decided_now = 0
    for key, label in (("rate", "rate/s"), ("p50_ns", "p50"), ("p99_ns", "p99")):
        a, b = then[key], now[key]
        if any("busier" in (c["verdict_text"] or "") for c in (a, b)):
            pytest.skip(f"{key}: {a['verdict_text']} then, {b['verdict_text']} now: one "
                        "tree's runs had more outside load (the quiet lane runs alone)")
        row = next(line for line in lines if f": read {label} " in line)
        assert _percent(a["change"]) in row.split(" then, ")[0]
        assert _percent(b["change"]) in row.split(" then, ")[1]
        if key == "p99_ns" and {a["verdict"], b["verdict"]} == {"worse", "unclear"}:
            # the tail of 1 s runs: a call that may come back undecided, never reversed
            # (seen once in the suite: worse then, unclear now); reproduce says so
            undecided += a["verdict"] == "worse"
            decided_now += b["verdict"] == "worse"
            assert row.startswith("undecided now" if a["verdict"] == "worse" else "decided now"), \
                row
            continue
        # rate and p50 of reads from the page cache against reads from the disk: x10 and more
        assert a["verdict"] == b["verdict"], (key, a["verdict_text"], b["verdict_text"])
        if a["verdict"] in ("better", "worse"):
            called += 1
            assert row.startswith("reproduced: "), row
        else:
            assert row.startswith("as then: "), row
    assert proc.returncode == (125 if undecided else 0), proc.stdout
    assert f"{called} of {called + undecided} change(s) called then came back" \
        + (f"; {decided_now} called now only" if decided_now else "") in proc.stdout
