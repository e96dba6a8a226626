"""The search of `stallbench bisect` (bisect.py measures its steps): which pair of the plan's
ordered variants to compare next and what the outcomes so far say; pure, no I/O.

A step that cannot decide is a skip, as in `git bisect`: that variant is never judged again,
and when only skipped variants remain between the last good and the first bad one the answer
is that range, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import UsageError

GOOD, BAD, SKIP = "good", "bad", "skip"   # a step's outcome
# Answer.kind
FOUND, RANGE, NOT_BAD, UNDECIDED = "found", "range", "not bad", "undecided"


@dataclass
class Answer:
    kind: str                    # FOUND | RANGE | NOT_BAD (the last is not bad) | UNDECIDED
    last_good: int               # index of the last variant known good (0: the first)
    first_bad: int | None        # index of the first variant known bad
    skipped: list[int] = field(default_factory=list)   # undecided ones between the two

    @property
    def candidates(self) -> list[int]:
        """The variants that may be the first bad one."""
        if self.first_bad is None:
            return []
        return list(range(self.last_good + 1, self.first_bad + 1))


class Search:
    """Bisection over variants 0..n-1: 0 is good by definition, n-1 is judged first (it must be
    bad), then the untested variant nearest the middle of (last good, first bad). `knee`: every
    step compares with variant 0; otherwise with the last good one."""

    def __init__(self, n: int, knee: bool = False):
        if n < 2:
            raise UsageError(f"bisect needs 2 or more ordered variants (the plan has {n})")
        self.n = n
        self.knee = knee
        self.outcomes: dict[int, str] = {}    # candidate index -> GOOD | BAD | SKIP

    def record(self, candidate: int, outcome: str) -> None:
        if outcome not in (GOOD, BAD, SKIP):
            raise ValueError(f"outcome {outcome!r}")
        self.outcomes[candidate] = outcome

    def _bounds(self) -> tuple[int, int]:
        hi = min((i for i, o in self.outcomes.items() if o == BAD), default=self.n - 1)
        lo = max((i for i, o in self.outcomes.items() if o == GOOD and i < hi), default=0)
        return lo, hi

    def next_step(self) -> tuple[int, int] | None:
        """(baseline, candidate) of the next step, or None when the answer is known."""
        last = self.outcomes.get(self.n - 1)
        if last is None:
            return (0, self.n - 1)
        if last != BAD:
            return None
        lo, hi = self._bounds()
        open_ = [i for i in range(lo + 1, hi) if i not in self.outcomes]
        if not open_:
            return None
        middle = (lo + hi) / 2
        candidate = min(open_, key=lambda i: (abs(i - middle), i))
        return (0 if self.knee else lo, candidate)

    def answer(self) -> Answer:
        last = self.outcomes.get(self.n - 1)
        if last == GOOD:
            return Answer(NOT_BAD, self.n - 1, None)
        if last == SKIP:
            return Answer(UNDECIDED, 0, None)
        lo, hi = self._bounds()
        skipped = [i for i in range(lo + 1, hi) if self.outcomes.get(i) == SKIP]
        return Answer(FOUND if hi == lo + 1 else RANGE, lo, hi, skipped)
