"""Folded stacks of a variant ('role;frame;...;leaf COUNT'), the differential file of two
variants ('stack COUNT_A COUNT_B', as difffolded.pl writes it), or either as a flame-graph SVG:
where the workload's tasks blocked (the trace or stacks monitor, `--stacks blocked`, the
default) or where they ran on a CPU (the profile monitor's samples under their worker role,
`--stacks on-cpu`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from ..analysis import folded
from ..compare import blocked, cpuprofile
from ..core.errors import UsageError
from ..results.store import Run
from . import FOLDED_STACKS

BLOCKED, ON_CPU = FOLDED_STACKS      # --stacks: which stacks a folded export writes


def _missing(label: str, stacks: str) -> UsageError:
    if stacks == ON_CPU:
        return UsageError(f"{label}: no on-CPU stacks recorded; run with --monitors "
                          "default,profile (or all)")
    return UsageError(f"{label}: no blocked stacks recorded; run with --monitors trace or "
                      "--monitors stacks (or all), or export the on-CPU stacks of the profile "
                      "monitor with --stacks on-cpu")


def _profile(stacks: str) -> Callable[[str, list[Run]], blocked.Profile | None]:
    return cpuprofile.profile if stacks == ON_CPU else blocked.profile


def write(label: str, runs: list[Run], out: TextIO, svg: bool = False,
          stacks: str = BLOCKED) -> blocked.Profile:
    profile = _profile(stacks)(label, runs)
    if profile is None:
        raise _missing(label, stacks)
    if svg:
        from ..report.flamegraph import render
        out.write(render(profile.counts, title=f"{profile.what}: {label}", unit=profile.unit,
                         what=profile.what))
    else:
        out.write(folded.format_folded(profile.counts))
    return profile


def write_diff(a_label: str, a_runs: list[Run], b_label: str, b_runs: list[Run], out: TextIO,
               svg: bool = False, stacks: str = BLOCKED
               ) -> tuple[blocked.Profile, blocked.Profile]:
    if stacks == ON_CPU:
        a, b = cpuprofile.profile(a_label, a_runs), cpuprofile.profile(b_label, b_runs)
        pair = (a, b) if a is not None and b is not None else None
    else:
        pair = blocked.profile_pair(a_label, a_runs, b_label, b_runs)
    if pair is None:
        for label, runs in ((a_label, a_runs), (b_label, b_runs)):
            if _profile(stacks)(label, runs) is None:
                raise _missing(label, stacks)
        raise UsageError(f"{a_label} and {b_label} have blocked stacks from different monitors "
                         "(trace in one, stacks in the other): record both with the same one")
    a, b = pair
    if svg:
        from ..report.flamegraph import render_differential
        out.write(render_differential(a, b))
    else:
        out.write(folded.format_differential(folded.differential(a.counts, b.counts)))
    return a, b
