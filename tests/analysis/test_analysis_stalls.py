"""Stalls over time against per-interval numpy computations and hand-made timelines."""

from __future__ import annotations

import numpy as np
import pytest

from stallbench.analysis import stalltimeline as stalls

pytestmark = pytest.mark.pure

SECOND = 1_000_000_000


def test_timeline_matches_numpy_per_interval():
    rng = np.random.default_rng(0)
    start = rng.integers(0, 10 * SECOND, 20000)
    latency = rng.lognormal(12, 1, 20000).astype(np.int64)
    line = stalls.timeline(latency, start, SECOND, 10)
    for i in range(10):
        inside = latency[(start // SECOND) == i]
        assert line.count[i] == inside.size
        assert line.max_ns[i] == inside.max()
        # nearest-rank p99
        ordered = np.sort(inside)
        assert line.p99_ns[i] == ordered[int(np.ceil(0.99 * inside.size)) - 1]


def test_episodes_find_slow_and_starved_intervals():
    start = np.array([0, 1, 2, 5, 6, 9]) * SECOND + 10
    latency = np.array([1e6, 2e8, 3e8, 1e6, 1e6, 1e6]).astype(np.int64)
    line = stalls.timeline(latency, start, SECOND, 10)
    others = np.ones(10, dtype=bool)
    found = stalls.episodes(line, others, threshold_ns=100_000_000)
    slow = [(e.start_ns, e.duration_ns, e.worst_ns) for e in found if e.kind == "slow"]
    starved = [(e.start_ns, e.duration_ns) for e in found if e.kind == "starved"]
    assert slow == [(1 * SECOND, 2 * SECOND, 3e8)]
    assert starved == [(3 * SECOND, 2 * SECOND), (7 * SECOND, 2 * SECOND)]


def test_longest_gap_is_the_longest_time_without_a_completion():
    # completions at 1 s, 2 s, 7 s in a 10 s run: the longest gap is 2 s -> 7 s
    start = np.array([0, 1, 6]) * SECOND
    latency = np.array([1, 1, 1]) * SECOND
    assert stalls.longest_gap(latency, start, 10 * SECOND) == (2 * SECOND, 5 * SECOND)
    assert stalls.longest_gap(np.array([], np.int64), np.array([], np.int64), 10 * SECOND) \
        == (0, 10 * SECOND)


def test_one_starved_reader_among_sixteen_shows():
    workers = np.concatenate([np.repeat(np.arange(16), 1000), np.full(20, 16)])
    workers = workers[(workers != 7) | (np.arange(workers.size) % 100 == 0)]  # worker 7: 10 ops
    counted = stalls.worker_counts_from(*np.unique(workers, return_counts=True),
                                        expected=np.arange(18))
    assert counted.counts[7] == 10
    assert counted.counts[17] == 0  # expected but did nothing at all
    assert counted.starved == [7, 16, 17]


def test_timeline_is_exact_with_heavy_tails_and_ties():
    rng = np.random.default_rng(8)
    start = rng.integers(0, 30 * SECOND, 200_000)
    latency = np.where(rng.random(200_000) < 0.02, rng.integers(1, 5, 200_000) * 10**8,
                       rng.lognormal(12, 1.5, 200_000)).astype(np.int64)
    line = stalls.timeline(latency, start, SECOND, 30)
    for i in range(30):
        ordered = np.sort(latency[(start // SECOND) == i])
        assert line.p99_ns[i] == ordered[int(np.ceil(0.99 * ordered.size)) - 1]
        assert line.max_ns[i] == ordered[-1]


def test_longest_gap_matches_sorting():
    rng = np.random.default_rng(9)
    for n, duration in ((10, 10 * SECOND), (50_000, 5 * SECOND), (3, 10**6)):
        start = rng.integers(0, duration, n)
        latency = rng.integers(0, 10**6, n)
        ends = np.sort(start + latency)
        points = np.concatenate(([0], ends, [max(duration, ends[-1])]))
        i = int(np.argmax(np.diff(points)))
        assert stalls.longest_gap(latency, start, duration) == (points[i], np.diff(points)[i])
