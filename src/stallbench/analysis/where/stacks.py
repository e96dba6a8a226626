"""Where the candidate's blocked stacks leave the baseline's (pure).

Of the stacks a variant's tasks were sampled (or traced) in while in D state, grouped by the
function they slept in (monitors.sleeping_frame), the one whose share of the samples grew most
against the baseline is the sleep the change brought; its most frequent stack is compared with
the baseline's stack that shares the longest path from the syscall in, and the frames after the
last shared one are the line a kernel engineer reads: where the code went somewhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..monitors import MIN_SHARE, sleeping_frame

ENTRY_FRAMES = ("entry_SYSCALL_64_after_hwframe", "do_syscall_64")
SHOWN_FRAMES = 4            # of the path after the last shared frame, the last ones shown


@dataclass(frozen=True)
class StackChange:
    sleeps_in: str          # the function the tasks slept in
    share: float            # of the candidate's blocked samples
    base_share: float       # of the baseline's
    shared: str | None      # the last frame the stack shares with the baseline's nearest one
    path: tuple[str, ...]   # the frames after it, down to the sleep
    base_path: tuple[str, ...] = ()     # the baseline's nearest stack's frames after it


def grown_sleep(here: Sequence[tuple[str, float]], base: Sequence[tuple[str, float]]
                ) -> StackChange | None:
    """(stack, share) of the candidate's and the baseline's top blocked stacks -> the sleep
    whose share grew most by MIN_SHARE or more, with where its stack leaves the baseline's;
    None where no sleep grew so."""
    def by_frame(rows: Sequence[tuple[str, float]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for stack, share in rows:
            frame = sleeping_frame(stack)
            if frame:
                out[frame] = out.get(frame, 0.0) + share
        return out

    now, before = by_frame(here), by_frame(base)
    growth = {f: share - before.get(f, 0.0) for f, share in now.items()}
    if not growth:
        return None
    frame = max(growth, key=lambda f: (growth[f], f))
    if growth[frame] < MIN_SHARE:
        return None
    stack = max((s for s, _ in here if sleeping_frame(s) == frame),
                key=lambda s: dict(here)[s])
    frames = _path(stack)
    nearest = max((_path(other) for other, _ in base), key=lambda p: _common(frames, p),
                  default=[])
    shared_len = _common(frames, nearest)
    shared = frames[shared_len - 1] if shared_len else None
    return StackChange(frame, now[frame], before.get(frame, 0.0), shared,
                       tuple(frames[shared_len:]), tuple(nearest[shared_len:]))


def _path(stack: str) -> list[str]:
    return [f for f in stack.split(";") if f and f not in ENTRY_FRAMES]


def _common(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def change_line(label: str, change: StackChange) -> str:
    """'dirty: blocked tasks now sleep in balance_dirty_pages (72% of the blocked samples, 0% in
    the baseline), reached from ext4_buffered_write_iter through ...;balance_dirty_pages'."""
    path = ";".join(change.path[-SHOWN_FRAMES:])
    more = "...;" if len(change.path) > SHOWN_FRAMES else ""
    if not change.shared:
        where = f"; a stack the baseline never had: {more}{path}"
    elif not change.path:
        went = ";".join(change.base_path[:SHOWN_FRAMES])
        where = (f"; it sleeps in {change.shared} itself, where the baseline's stack went on "
                 f"into {went}{';...' if len(change.base_path) > SHOWN_FRAMES else ''}")
    else:
        where = f"; its stack leaves the baseline's after {change.shared}: {more}{path}"
    return (f"{label}: blocked tasks sleep in {change.sleeps_in} ({change.share:.0%} of the "
            f"blocked samples, {change.base_share:.0%} in the baseline){where}")
