"""A series' change point's verdict (the order of the rules: the package's face)."""

from __future__ import annotations

import dataclasses

from ...analysis import intervals as iv
from .rows import MACHINE_BUSIER, SAME_SETTINGS


def change_point(change: iv.Change, higher_is_better: bool, beyond_load: bool | None,
                 same_settings: bool) -> iv.Change:
    """A change point's verdict, in this order: its direction (the scan found it significant
    beyond the noise: analysis/changepoints.py), then compare's MACHINE BUSIER rule across it
    (`beyond_load`: whether it holds with the spread the busier side's load can put between
    runs, None where neither side was busier), then SAME_SETTINGS where both points ran the
    same settings (only a directed verdict is taken back: a row MACHINE BUSIER took keeps
    that reason)."""
    larger = change.change is not None and change.change > 0
    judged = dataclasses.replace(
        change, verdict=iv.Verdict.BETTER if larger == higher_is_better else iv.Verdict.WORSE)
    if beyond_load is False:
        judged = dataclasses.replace(judged, verdict=iv.Verdict.UNCLEAR, note=MACHINE_BUSIER)
    if same_settings and judged.verdict in iv.DIRECTED:
        judged = dataclasses.replace(judged, verdict=iv.Verdict.UNCLEAR, note=SAME_SETTINGS)
    return judged
