"""A noise profile as text: per op, how much separate runs differ and what that resolves."""

from __future__ import annotations

from pathlib import Path

from ..analysis.intervals import MAX_INTERVAL_RATIO
from ..analysis.noise import NoiseProfile, resolution
from ..analysis.quantiles import DECIDING_STATS, stat_named

RESOLUTION_RUNS = (1, 3)


def _width(half: float) -> str:
    return f"±{half:.1%}" if half + 1.0 < MAX_INTERVAL_RATIO else f"> ×{MAX_INTERVAL_RATIO:g}"


def render_profile(profile: NoiseProfile, path: Path) -> str:
    lines = [f"{profile.describe()}", f"  saved as {path}",
             "  per op: the run-to-run sd beyond each run's own noise (±: a comparison's 95% "
             "interval with", "  " + " / ".join(f"{k}" for k in RESOLUTION_RUNS)
             + " run(s) per variant; changes well beyond it are called)"]
    for op, stats in profile.table.items():
        parts = []
        for key in DECIDING_STATS:     # the statistics that decide verdicts
            if key not in stats:
                continue
            sd, dof, within = stats[key]
            widths = "/".join(_width(resolution(sd, dof, within, k)) for k in RESOLUTION_RUNS)
            parts.append(f"{stat_named(key).label} {sd:.1%} ({widths})")
        lines.append(f"  {op}: " + ", ".join(parts))
    return "\n".join(lines) + "\n"
