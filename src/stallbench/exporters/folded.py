"""Folded blocked stacks of a variant ('comm;frame;...;leaf COUNT'), the differential file of
two variants ('stack COUNT_A COUNT_B', as difffolded.pl writes it), or either as a flame-graph
SVG."""

from __future__ import annotations

from typing import TextIO

from ..analysis import folded
from ..compare import blocked
from ..core.errors import UsageError
from ..results.store import Run


def _missing(label: str) -> UsageError:
    return UsageError(f"{label}: no blocked stacks recorded; run with --monitors trace or "
                      "--monitors stacks (or all)")


def write(label: str, runs: list[Run], out: TextIO, svg: bool = False) -> blocked.Profile:
    profile = blocked.profile(label, runs)
    if profile is None:
        raise _missing(label)
    if svg:
        from ..report.flamegraph import render
        out.write(render(profile.counts, title=f"blocked time: {label}", unit=profile.unit))
    else:
        out.write(folded.format_folded(profile.counts))
    return profile


def write_diff(a_label: str, a_runs: list[Run], b_label: str, b_runs: list[Run], out: TextIO,
               svg: bool = False) -> tuple[blocked.Profile, blocked.Profile]:
    pair = blocked.profile_pair(a_label, a_runs, b_label, b_runs)
    if pair is None:
        for label, runs in ((a_label, a_runs), (b_label, b_runs)):
            if blocked.profile(label, runs) is None:
                raise _missing(label)
        raise UsageError(f"{a_label} and {b_label} have blocked stacks from different monitors "
                         "(trace in one, stacks in the other): record both with the same one")
    a, b = pair
    if svg:
        from ..report.flamegraph import render_differential
        out.write(render_differential(a, b))
    else:
        out.write(folded.format_differential(folded.differential(a.counts, b.counts)))
    return a, b
