"""A noise profile as text: per op, how much separate runs differ and what that resolves."""

from __future__ import annotations

from pathlib import Path

from ..analysis.noise import NoiseProfile, resolution
from ..analysis.quantiles import stat_named

SHOWN = ("p50", "p99", "rate")
RESOLUTION_RUNS = (1, 3)


def render_profile(profile: NoiseProfile, path: Path) -> str:
    lines = [f"{profile.describe()}", f"  saved as {path}",
             "  run-to-run sd beyond each run's own noise; ±: half-width of a comparison's 95% "
             "interval with " + " and ".join(f"{k} run(s)" for k in RESOLUTION_RUNS)
             + " per variant"]
    for op, stats in profile.table.items():
        parts = []
        for key in SHOWN:
            if key not in stats:
                continue
            sd, dof, within = stats[key]
            widths = "/".join(f"±{resolution(sd, dof, within, k):.1%}" for k in RESOLUTION_RUNS)
            parts.append(f"{stat_named(key).label} {sd:.1%} ({widths})")
        lines.append(f"  {op}: " + ", ".join(parts))
    return "\n".join(lines) + "\n"
