"""The conditions each candidate's changes are measured under, and so the interval and prior
they get: each side's outside load (analysis/interference.py: which side was busier, the
saturated runs and the run-to-run floor they bring), the duet pairing (analysis/paired.py:
paired intervals, or why the two-level model stays) and this host's noise profile behind the
priors (the one calibrated for the baseline's shape, or why it is not used).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..analysis import interference, paired
from ..analysis import intervals as iv
from ..analysis.noise import NoiseProfile
from .loading import VariantRuns
from .model import CompareOptions


@dataclass
class SideLoads:
    """The outside load (other processes and steal) of each variant's runs, and per candidate
    what it means for its pair with the baseline (analysis/interference.py)."""

    loads: dict[str, interference.OutsideLoad | None]   # variant -> its runs' outside load
    saturated: dict[str, int]       # candidate -> saturated runs in the pair
    saturated_sd: dict[str, float]  # candidate -> the run-to-run sd floor (0: none)
    busier: dict[str, int]          # candidate -> +1 candidate busier, -1 baseline, 0 neither


@dataclass
class Pairing:
    """Per candidate, how its runs pair with the baseline's as duets (run.json `duet`)."""

    duets: dict[str, dict[str, Any]]   # the comparison JSON's `duet` ({} when not duets)
    pairs: dict[str, list[tuple[int, int]] | None]   # behind the paired intervals, or None
    method: dict[str, str]             # the interval method in words


def side_loads(variants: list[VariantRuns]) -> SideLoads:
    base, cand_labels = variants[0].label, [v.label for v in variants[1:]]
    loads = {v.label: interference.outside_load([r.meta.machine_load for r in v.runs])
             for v in variants}
    return SideLoads(
        loads=loads,
        saturated={label: sum(load.saturated for load in (loads[base], loads[label])
                              if load is not None) for label in cand_labels},
        saturated_sd={label: interference.saturated_sd([loads[base], loads[label]])
                      for label in cand_labels},
        busier={label: interference.busier_side(loads[base], loads[label])
                for label in cand_labels})


def pairing(variants: list[VariantRuns], saturated: dict[str, int],
             profile_dof: int | None = None) -> Pairing:
    duets = {v.label: duet_pairs(variants[0], v, saturated[v.label], profile_dof)
             for v in variants[1:]}
    pairs = {label: d.pop("pairs_used", None) for label, d in duets.items()}
    method = {label: d["method"] if d else iv.METHOD for label, d in duets.items()}
    return Pairing(duets, pairs, method)


def duet_pairs(base: VariantRuns, cand: VariantRuns, saturated: int,
                profile_dof: int | None = None) -> dict[str, Any]:
    """How the candidate's runs pair with the baseline's (run.json `duet`, analysis/paired.py):
    {} when they are not duets of each other; else the rounds, the method, and `pairs_used`
    (the index pairs behind the paired intervals: None with one pair and no duet profile
    (`profile_dof`: its degrees of freedom), or on a saturated machine, where the sequential
    model and its floor apply)."""
    pairs = paired.pair_runs([r.meta.duet for r in base.runs], [r.meta.duet for r in cand.runs])
    if pairs is None:
        return {}
    rounds = [base.runs[i].meta.duet.get("round") for i, _ in pairs]
    if len(pairs) < 2 and not profile_dof:
        return {"pairs": 1, "rounds": rounds, "interval": "two-level (1 duet)",
                "method": paired.ONE_DUET_METHOD, "pairs_used": None}
    if saturated:
        return {"pairs": len(pairs), "rounds": rounds,
                "interval": "two-level (machine saturated)",
                "method": iv.METHOD + "; duets, but the machine was saturated",
                "pairs_used": None}
    return {"pairs": len(pairs), "rounds": rounds, "interval": "paired",
            "method": paired.PROFILED_METHOD if profile_dof else paired.METHOD,
            "profile_dof": profile_dof, "pairs_used": pairs}


def noise_profile(options: CompareOptions, variants: list[VariantRuns],
                   loads: dict[str, interference.OutsideLoad | None], duet: bool = False
                   ) -> tuple[NoiseProfile | None, str | None]:
    """The noise profile behind the priors (`duet`: the duet profile behind the paired
    intervals): the one given, else the one calibrated for the baseline's shape on its host
    (RESULTS/noise-profiles), while every run compared is on that host and no busier than
    the calibration was."""
    given = options.duet_profile if duet else options.noise_profile
    if given is not None or not options.use_profiles:
        return given, None
    from ..results.noiseprofiles import find_profile

    first = variants[0].runs[0]
    profile, problem = find_profile(first.path.parents[2], first.meta, duet)
    if profile is None:
        return None, problem
    hosts = {r.meta.host or "" for v in variants for r in v.runs}
    if hosts != {profile.host}:
        return None, (f"noise profile {profile.source} not used: it is of {profile.host}, the "
                      f"runs are of {', '.join(sorted(hosts))}")
    for label, load in loads.items():
        if load is None or profile.outside_cpus is None:
            continue
        if load.mean_cpus > profile.outside_cpus + interference.BUSIER_SHARE * load.cpus:
            return None, (f"noise profile {profile.source} not used: other processes took "
                          f"{load.mean_cpus:.2f} CPUs during {label}'s runs, "
                          f"{profile.outside_cpus:.2f} during the calibration")
    return profile, None
