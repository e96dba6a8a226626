"""Blocked-time profiles in the folded format ('a;b;c COUNT'), their differences and the
flame-graph layout: pure functions over dicts, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


def time_weighted(rows: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """(comm, stack, duration_ns) D-state intervals -> {'comm;stack': microseconds blocked}.

    Durations are added in ns per stack and rounded to µs once, so that the file's total is the
    total blocked time (to a µs per stack), not a sum of rounded intervals."""
    ns: dict[str, int] = {}
    for comm, stack, duration in rows:
        if duration <= 0:
            continue
        key = f"{comm};{stack}" if stack else f"{comm};[unknown]"
        ns[key] = ns.get(key, 0) + int(duration)
    return {key: (value + 500) // 1000 for key, value in ns.items() if (value + 500) // 1000}


def add(profiles: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for profile in profiles:
        for stack, count in profile.items():
            total[stack] = total.get(stack, 0) + count
    return total


def parse_folded(text: str) -> dict[str, int]:
    """'a;b;c COUNT' lines -> {stack: count} (counts of equal stacks add up)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            counts[stack] = counts.get(stack, 0) + int(count)
    return counts



def format_folded(counts: Mapping[str, int]) -> str:
    return "".join(f"{stack} {count}\n" for stack, count in sorted(counts.items()))


def differential(a: Mapping[str, int], b: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """Every stack of either profile with its count in a and in b (0 where absent): the
    differential folded format of difffolded.pl ('stack COUNT_A COUNT_B')."""
    return [(stack, a.get(stack, 0), b.get(stack, 0)) for stack in sorted(set(a) | set(b))]


def format_differential(rows: Iterable[tuple[str, int, int]]) -> str:
    return "".join(f"{stack} {x} {y}\n" for stack, x, y in rows)


@dataclass
class Frame:
    """One box of a flame graph: name, depth, x offset and width in counts."""

    name: str
    depth: int
    x: float
    width: float
    stack: str
    before: float = 0.0          # differential: the frame's (per-run) count in the first profile
    after: float = 0.0           # ... and in the second (width is `after`)
    children: dict[str, Frame] = field(default_factory=dict, repr=False)

    @property
    def own_before(self) -> float:
        """The frame's own count in the first profile: the stacks that end at it."""
        return self.before - sum(c.before for c in self.children.values())

    @property
    def own_after(self) -> float:
        return self.after - sum(c.after for c in self.children.values())

    @property
    def own_change(self) -> float:
        """How much of the frame's size its own change is, -1..1 (0 where it is empty): the
        colour of a differential flame graph. As FlameGraph's flamegraph.pl does with
        difffolded.pl's input, a frame is coloured by the change of the stacks that end at
        it, not of everything above it (so shared root frames stay pale), and here relative
        to the frame's own size rather than to the largest change anywhere."""
        size = max(self.after, self.before)
        return (self.own_after - self.own_before) / size if size > 0 else 0.0


def layout(counts: Mapping[str, float], before: Mapping[str, float] | None = None,
           min_share: float = 0.0) -> tuple[list[Frame], float]:
    """Flame-graph boxes (root excluded) for `counts`: each frame as wide as the counts of the
    stacks through it, children left to right in name order. With `before`, each frame also
    carries its count there, for colouring a differential flame graph. Frames narrower than
    min_share of the total are left out. Returns (frames, total)."""
    root = Frame("all", -1, 0.0, 0.0, "")
    for source, attr in ((counts, "after"), (before or {}, "before")):
        for stack, count in source.items():
            node = root
            setattr(node, attr, getattr(node, attr) + count)
            path = []
            for name in stack.split(";"):
                path.append(name)
                child = node.children.get(name)
                if child is None:
                    child = node.children[name] = Frame(name, node.depth + 1, 0.0, 0.0,
                                                        ";".join(path))
                setattr(child, attr, getattr(child, attr) + count)
                node = child
    total = root.after
    frames: list[Frame] = []

    def place(node: Frame, x: float) -> None:
        for name in sorted(node.children):
            child = node.children[name]
            child.x, child.width = x, child.after
            if total and child.width / total >= min_share and child.width > 0:
                frames.append(child)
                place(child, x)
            x += child.width

    place(root, 0.0)
    return frames, total
