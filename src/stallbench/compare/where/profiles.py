"""The where section's CPU side from the perf monitors: each variant's on-CPU samples per worker
role (the profile monitor) with the functions they were in and, for a candidate, the one whose
share grew most against the baseline (analysis/where/hotspots.py), named in a line right after
the op's other lines; and each role's perf stat counts per op (analysis/where/perfstat.py),
with the sentence, once, that a machine without a PMU counted no cycles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...analysis import monitornames
from ...analysis.where import section as ws
from ...analysis.where.hotspots import after_their_ops, hotspot, profile_lines, role_profile
from ...analysis.where.perfstat import role_counters
from .variantdata import VariantData


def add_profiles(section: ws.WhereSection, data: Mapping[str, VariantData], baseline: str,
                 tail_changes: Mapping[str, Mapping[str, Sequence]]) -> None:
    """Fill section.profiles and section.perf_counters of every variant, and put each
    candidate's hotspot lines after its ops' lines."""
    stacks = {label: variant.profile_stacks() for label, variant in data.items()}
    base_stacks, base_events = stacks[baseline]
    lines: list[ws.Explanation] = []
    for label, variant in data.items():
        role_stacks, events = stacks[label]
        if role_stacks:
            profiles = {role: role_profile(role, counts, ", ".join(events))
                        for role, counts in sorted(role_stacks.items())}
            if label != baseline:
                for role, profile in profiles.items():
                    if role in base_stacks:
                        profile.hotspot = hotspot(base_stacks[role], role_stacks[role])
                if base_events and set(events) != set(base_events):
                    section.warnings.append(
                        f"{label}: perf sampled {', '.join(events)} here and "
                        f"{', '.join(base_events)} in {baseline}: the on-CPU shares compare "
                        "CPU time with cycles")
                lines += profile_lines(label, tail_changes.get(label, {}),
                                       variant.roles_of_ops(), profiles)
            section.profiles[label] = profiles
        counts = variant.perf_counts()
        if counts:
            section.perf_counters[label] = role_counters(counts, variant.ops_by_role())
        no_pmu = next((s["no_pmu"] for s in variant.monitor_statuses(monitornames.PERFSTAT)
                       if s.get("no_pmu")), None)
        if no_pmu:
            section.warnings.append(f"{label}: {no_pmu}")
    section.explanations = after_their_ops(section.explanations, lines)
