"""Interleaved rounds, each in a random order (Abedi & Brecht), the first one too (issue 45), and
the runs really happen in the order the runner logs, each recording the seed that replays it."""

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


def test_every_round_is_a_permutation_in_every_order_the_first_too():
    variants = _variants("a", "b", "c")
    logged: list[str] = []
    rng = random.Random(7)
    orders = Counter()
    firsts = Counter()
    for iteration in range(600):
        names = tuple(v.name for v in round_order(variants, iteration, rng, logged.append))
        assert sorted(names) == ["a", "b", "c"]
        assert logged[-1] == f"round {iteration + 1}: " + ", ".join(names)
        orders[names] += 1
    for _ in range(600):     # a plan's first round, each plan from its own seed
        seed = random.SystemRandom().getrandbits(32)
        first = round_order(variants, 0, random.Random(seed), logged.append)
        firsts[tuple(v.name for v in first)] += 1
    # all 6 orders, each near 100 of 600 (binomial sd ~9: 60..140 is beyond 4 sd)
    assert len(orders) == 6 and all(60 <= n <= 140 for n in orders.values()), orders
    assert len(firsts) == 6 and all(60 <= n <= 140 for n in firsts.values()), firsts


def test_the_runs_follow_the_logged_round_order(tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text('workload = "randread"\nduration = "0.3s"\nwarmup = "0"\niterations = 3\n'
                    'monitors = []\n[options]\nfile_size = "1M"\n'
                    + "".join(f'[[variants]]\nname = "{name}"\ndir = "{tmp_path}"\n'
                              'drop_caches = false\n' for name in "ab"))
    results = tmp_path / "results"
    out = run_stallbench("run", "--plan", str(plan), "--results", str(results), "--no-progress",
                         check=True)
    expected = []
    for line in out.stderr.splitlines():
        if line.startswith("round "):
            expected += line.split(": ", 1)[1].split(", ")
    assert len(expected) == 6, out.stderr
    runs = sorted((json.loads(p.read_text()) for p in results.glob("*/randread/*/run.json")),
                  key=lambda m: m["start_utc"])
    assert [meta["variant"] for meta in runs] == expected
    # the seed each run recorded replays the order: random.Random(seed) shuffles each round
    seeds = {meta["round_order"]["seed"] for meta in runs}
    assert len(seeds) == 1
    replay = random.Random(seeds.pop())
    replayed = [v.name for i in range(3) for v in round_order(_variants("a", "b"), i, replay,
                                                               lambda _: None)]
    assert replayed == expected
    assert [(m["round_order"]["round"], m["round_order"]["position"], m["round_order"]["of"])
            for m in runs] == [(r, p, 2) for r in (1, 2, 3) for p in (1, 2)]
