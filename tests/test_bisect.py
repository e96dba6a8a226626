"""stallbench bisect: the search against a brute-force oracle, then real short runs of ordered
variants where a real change starts at a known position."""

from __future__ import annotations

import itertools
import math

import pytest

from stallbench.bisect import BAD, FOUND, GOOD, NOT_BAD, RANGE, SKIP, UNDECIDED, Search


def _simulate(n: int, first_bad: int | None, undecidable: set[int], knee: bool = False):
    """Run the search against a world where variants >= first_bad are bad and those in
    `undecidable` cannot be decided; returns (answer, steps taken, pairs compared)."""
    search = Search(n, knee)
    pairs = []
    while (pair := search.next_step()) is not None:
        pairs.append(pair)
        assert len(pairs) <= n, "the search does not end"
        candidate = pair[1]
        if candidate in undecidable:
            outcome = SKIP
        else:
            outcome = BAD if first_bad is not None and candidate >= first_bad else GOOD
        search.record(candidate, outcome)
    return search.answer(), pairs


@pytest.mark.parametrize("n", range(2, 14))
def test_the_search_finds_the_first_bad_one_in_log2_steps_or_a_range_never_a_wrong_one(n):
    for first_bad in range(1, n):
        answer, pairs = _simulate(n, first_bad, set())
        assert answer.kind == FOUND and answer.first_bad == first_bad, (n, first_bad)
        assert answer.last_good == first_bad - 1
        assert len(pairs) <= math.ceil(math.log2(n)) + 1, (n, first_bad, pairs)
        # every step compares with the last good one known at the time
        assert all(base < cand for base, cand in pairs)
        # skips anywhere but the endpoint: the answer still holds the first bad one
        for size in (1, 2, 3):
            for undecidable in itertools.combinations(range(1, n - 1), size):
                answer, pairs = _simulate(n, first_bad, set(undecidable))
                assert first_bad in answer.candidates, (n, first_bad, undecidable, answer)
                if answer.kind == FOUND:
                    assert answer.first_bad == first_bad
                else:
                    assert answer.kind == RANGE
                    # only undecided variants lie between the last good and the first bad
                    assert set(answer.candidates[:-1]) <= set(undecidable)
                    assert answer.skipped == answer.candidates[:-1]
                assert len(pairs) <= math.ceil(math.log2(n)) + 1 + size


def test_the_endpoints_decide_whether_there_is_anything_to_bisect():
    answer, pairs = _simulate(6, None, set())
    assert answer.kind == NOT_BAD and pairs == [(0, 5)]
    answer, pairs = _simulate(6, 3, {5})
    assert answer.kind == UNDECIDED and pairs == [(0, 5)] and answer.candidates == []


def test_the_knee_compares_every_step_with_the_first():
    for n in range(2, 12):
        for first_bad in range(1, n):
            answer, pairs = _simulate(n, first_bad, set(), knee=True)
            assert answer.first_bad == first_bad
            assert {base for base, _ in pairs} == {0}
