"""Where the workload's tasks blocked, per variant: time-weighted folded stacks from the trace
monitor's D-state intervals, or sample counts from the stacks monitor where no run has them.
Loads run directories and calls analysis/folded.py. Profile is also the record of the on-CPU
profiles (cpuprofile.py), so that the flame graphs draw both alike."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from ..analysis import folded
from ..results.store import Run

UNITS = {"trace": "µs blocked (D state, trace monitor)",
         "stacks": "samples of D-state tasks (stacks monitor)",
         "profile": "on-CPU samples (profile monitor)"}
# what a profile from each source shows (the flame graphs' titles)
WHAT = {"trace": "blocked time", "stacks": "blocked time", "profile": "on-CPU time"}


@dataclass
class Profile:
    label: str
    source: str                  # "trace" or "stacks"
    counts: dict[str, int]       # folded stack -> µs (trace) or samples (stacks)
    runs: int

    @property
    def unit(self) -> str:
        return UNITS[self.source]

    @property
    def what(self) -> str:
        return WHAT[self.source]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _trace_dstate(run: Run) -> dict[str, int] | None:
    table = run.trace_table(columns=["category", "comm", "stack", "duration_ns"])
    if table is None:
        return None
    table = table.filter(pc.equal(table["category"], "dstate"))
    grouped = table.group_by(["comm", "stack"]).aggregate([("duration_ns", "sum")])
    rows = zip(grouped["comm"].to_pylist(), grouped["stack"].to_pylist(),
               grouped["duration_ns_sum"].to_pylist(), strict=True)
    return folded.time_weighted((c or "?", s or "", d or 0) for c, s, d in rows)


def profile(label: str, runs: list[Run], source: str | None = None) -> Profile | None:
    """The blocked profile of these runs from `source` ("trace", "stacks"), or the best one
    every run has (trace first); None when the runs have neither."""
    sources = [source] if source else ["trace", "stacks"]
    for kind in sources:
        parts = []
        for run in runs:
            if kind == "trace":
                part = _trace_dstate(run)
            else:
                text = run.stacks_folded()
                part = folded.parse_folded(text) if text is not None else None
            if part is None:
                break
            parts.append(part)
        else:
            return Profile(label, kind, folded.add(parts), len(runs))
    return None


def profile_pair(a_label: str, a_runs: list[Run], b_label: str,
                 b_runs: list[Run]) -> tuple[Profile, Profile] | None:
    """Profiles of two variants from the same source (trace where both have it)."""
    for kind in ("trace", "stacks"):
        a = profile(a_label, a_runs, kind)
        b = profile(b_label, b_runs, kind)
        if a is not None and b is not None:
            return a, b
    return None
