"""Interleaved rounds: the first in the plan's order, each later one in a random order (Abedi &
Brecht), and the runs really happen in the order the runner logs."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from conftest import run_stallbench
from stallbench.run.runner import round_order
from stallbench.settings.variant import VariantSettings

pytestmark = pytest.mark.pure


def _variants(*names: str) -> list[VariantSettings]:
    return [VariantSettings(name=name) for name in names]


def test_later_rounds_are_permutations_in_every_order_the_first_keeps_the_plan_s():
    variants = _variants("a", "b", "c")
    logged: list[str] = []
    rng = random.Random(7)
    first = round_order(variants, 0, rng, logged.append)
    assert [v.name for v in first] == ["a", "b", "c"] and logged == []
    orders = Counter()
    for iteration in range(1, 601):
        names = tuple(v.name for v in round_order(variants, iteration, rng, logged.append))
        assert sorted(names) == ["a", "b", "c"]
        assert logged[-1] == f"round {iteration + 1}: " + ", ".join(names)
        orders[names] += 1
    # all 6 orders, each near 100 of 600 (binomial sd ~9: 60..140 is beyond 4 sd)
    assert len(orders) == 6 and all(60 <= n <= 140 for n in orders.values()), orders


def test_the_runs_follow_the_logged_round_order(tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text('workload = "randread"\nduration = "0.3s"\nwarmup = "0"\niterations = 3\n'
                    'monitors = []\n[options]\nfile_size = "1M"\n'
                    + "".join(f'[[variants]]\nname = "{name}"\ndir = "{tmp_path}"\n'
                              'drop_caches = false\n' for name in "ab"))
    results = tmp_path / "results"
    out = run_stallbench("run", "--plan", str(plan), "--results", str(results), "--no-progress",
                         check=True)
    expected = ["a", "b"]
    for line in out.stderr.splitlines():
        if line.startswith("round "):
            expected += line.split(": ", 1)[1].split(", ")
    assert len(expected) == 6, out.stderr
    runs = [json.loads(p.read_text()) for p in results.glob("*/randread/*/run.json")]
    started = [meta["variant"] for meta in sorted(runs, key=lambda m: m["start_utc"])]
    assert started == expected
