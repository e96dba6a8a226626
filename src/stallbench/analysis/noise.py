"""Noise profiles: how much separate runs of one workload differ on one host, measured there.

`stallbench calibrate PLAN` runs the plan's baseline N times (A/A: one configuration, separate
runs, as pyperf's calibration measures a benchmark before it is compared, and as Kalibera & Jones
advise: measure the variance at each level once per machine, then choose the repetitions). For
each op and statistic the profile holds the run-to-run standard deviation of the log statistic
beyond each run's own time-block variance, by method of moments,

    τ̂² = max(0, var(y_i, ddof=1) − mean(w_i)),   worth N − 1 degrees of freedom,

with y_i the run's log statistic and w_i its within-run variance (intervals.py). A comparison
of runs of the same shape on the same host uses τ̂ as its prior with those degrees of freedom
(intervals.Prior), instead of the machine kind's A/A table; its own runs add theirs, so the
profile's weight falls as measured runs grow. A profile is only used while the runs compared
were no busier than the calibration (interference.BUSIER_SHARE): a spread measured on a quiet
machine says nothing about a loaded one.

`stallbench calibrate PLAN --duet` runs the baseline against itself in duet rounds (duet.py)
instead: a duet profile (`duet` true) holds, per op and statistic, the sd of the pairs' log
ratios d_i = y_twin,i − y_a,i with N − 1 degrees of freedom (pair_to_pair), the prior of the
paired intervals (analysis/paired.py) of duets of that shape on that host.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .intervals import CONFIDENCE, PROFILE, Prior, RunStatistic, t_quantile

PROFILE_VERSION = 1
MIN_CALIBRATION_RUNS = 3


def run_to_run(runs: list[RunStatistic]) -> tuple[float, int, float] | None:
    """(τ̂, degrees of freedom, mean within-run variance) of one statistic over A/A runs; None
    with fewer than 2 usable runs."""
    usable = [r for r in runs if r.log_value is not None and r.within_var is not None]
    if len(usable) < 2:
        return None
    y = np.array([r.log_value for r in usable])
    within = float(np.mean([r.within_var for r in usable]))
    tau2 = max(0.0, float(np.var(y, ddof=1)) - within)
    return float(np.sqrt(tau2)), len(usable) - 1, within


def pair_to_pair(baseline: list[RunStatistic], twin: list[RunStatistic]
                 ) -> tuple[float, int] | None:
    """(sd of the pairs' log ratios, degrees of freedom) of one statistic over A/A duets, the
    runs of each round at the same index; None with fewer than 2 usable pairs."""
    d = [t.log_value - b.log_value for b, t in zip(baseline, twin, strict=True)
         if b.log_value is not None and t.log_value is not None]
    if len(d) < 2:
        return None
    return float(np.std(d, ddof=1)), len(d) - 1


def resolution(sd: float, dof: float, within: float, runs: int) -> float:
    """The half-width, as a change (+x), of the 95% interval of a comparison with `runs` runs
    of each variant that spread as measured (τ = sd with `dof`, each run's own variance
    `within`): changes well beyond it are called."""
    run_dof = dof + 2 * (runs - 1)
    half = t_quantile(0.5 + CONFIDENCE / 2, run_dof) * np.sqrt(2 * (sd ** 2 + within) / runs)
    return float(np.expm1(half))


def shape_key(workload: str, params: dict[str, Any], settings: dict[str, Any]) -> str:
    """A short stable name for a workload shape: its name, options and the variant settings
    that change what a run measures (memory limit, filesystem, ...)."""
    text = json.dumps({"workload": workload, "params": params, "settings": settings},
                      sort_keys=True, default=str)
    return f"{workload}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@dataclass
class NoiseProfile:
    """One host's measured run-to-run spread for one workload shape."""

    host: str
    workload: str
    shape: str                                  # shape_key()
    params: dict[str, Any]
    settings: dict[str, Any]
    variant: str                                # the calibrated variant
    runs: int
    created_utc: str
    outside_cpus: float | None                  # mean others + steal during the calibration
    duration_s: float
    # op -> stat -> [sd, dof, within-run variance]; duet: [pair sd, dof, 0]
    table: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    version: int = PROFILE_VERSION
    duet: bool = False                          # A/A duets: the table holds pair sds
    source: str = ""                            # where it was read from (not stored)

    def prior(self, op: str, stat: str) -> Prior | None:
        entry = self.table.get(op, {}).get(stat)
        if entry is None:
            return None
        return Prior(float(entry[0]), float(entry[1]), PROFILE, float(entry[2]))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("source")
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "") -> NoiseProfile:
        if not isinstance(data, dict) or data.get("version") != PROFILE_VERSION:
            raise ValueError("not a stallbench noise profile of this version")
        names = {f for f in cls.__dataclass_fields__ if f != "source"}
        missing = names - set(data) - {"version", "duet"}
        if missing:
            raise ValueError(f"noise profile without {', '.join(sorted(missing))}")
        profile = cls(**{k: data[k] for k in names if k in data}, source=source)
        for op, stats in profile.table.items():
            for stat, entry in stats.items():
                if (not isinstance(entry, list) or len(entry) != 3
                        or not all(isinstance(x, (int, float)) for x in entry)
                        or entry[0] < 0 or entry[1] < 1 or entry[2] < 0):
                    raise ValueError(f"noise profile entry {op}:{stat} is not "
                                     "[sd, dof, within]")
        return profile

    def describe(self) -> str:
        what = "duet noise profile" if self.duet else "noise profile"
        unit = "A/A duets" if self.duet else "A/A runs"
        return (f"{what} of {self.runs} {unit} of {self.variant} on {self.host} "
                f"({self.created_utc[:16].replace('T', ' ')}, {self.runs - 1} degrees of "
                "freedom)")
