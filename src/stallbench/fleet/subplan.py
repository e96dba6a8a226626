"""Each host's part of the plan, as a plan file the host's own stallbench runs.

The host's plan is the user's plan file itself, read again, with only that host's variants and
without the fleet keys (`hosts`, `boot`, `results`): every other key (including ones this module
does not know) passes through unchanged. A host whose variants boot kernels gets one plan per
boot, interleaved A B A B like the local runner's iterations.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from ..core import tomlwrite
from ..core.errors import UsageError
from ..plan.plan import Plan

FLEET_TOP_KEYS = ("hosts", "results", "max_iterations", "metrics")
FLEET_VARIANT_KEYS = ("hosts", "boot")


@dataclass
class Segment:
    """One start of stallbench on a host: after one boot, or the whole plan when none boots."""

    number: int
    variants: list[str]
    iterations: int
    boot: dict[str, str] | None
    text: str                 # the plan file for the host
    planned_s: float          # measurement time the segment plans

    @property
    def runs(self) -> int:
        return len(self.variants) * self.iterations


MAX_HOST_PLAN_BYTES = 100_000    # it travels as one argument of one command (ARG_MAX per arg)


def check_plan_size(segment: Segment) -> None:
    if len(segment.text.encode()) > MAX_HOST_PLAN_BYTES:
        raise UsageError(f"a host's part of the plan is over {MAX_HOST_PLAN_BYTES} bytes: "
                         "split the plan into smaller ones")


def segments(plan: Plan, variants: list[str]) -> list[Segment]:
    raw = _raw(plan)
    by_name = {v.name: v for v in plan.variants}
    per_run = plan.duration_s + _warmup(plan)
    if not any(by_name[v].boot for v in variants):
        return [Segment(1, variants, plan.iterations, None,
                        host_plan(raw, variants, plan.iterations),
                        per_run * len(variants) * plan.iterations)]
    result = []
    for _ in range(plan.iterations):
        for name in variants:
            result.append(Segment(len(result) + 1, [name], 1, by_name[name].boot,
                                  host_plan(raw, [name], 1), per_run))
    return result


def _raw(plan: Plan) -> dict[str, Any]:
    if plan.source is None:
        raise ValueError("a fleet run needs a plan file")
    return tomllib.loads(plan.source.read_text())


def _warmup(plan: Plan) -> float:
    warmup = getattr(plan, "warmup_s", None)
    if warmup is None:
        try:
            from ..workloads import get_workload
            warmup = get_workload(plan.workload).default_warmup_s
        except Exception:  # noqa: BLE001 - only an estimate of the time to wait
            warmup = 0.0
    return float(warmup or 0.0)


def host_plan(raw: dict[str, Any], variants: list[str], iterations: int) -> str:
    data = {k: v for k, v in raw.items() if k not in FLEET_TOP_KEYS and k != "variants"}
    data["iterations"] = iterations
    tables = []
    raw_variants = {v.get("name"): v for v in raw.get("variants", [])}
    for name in variants:
        table = raw_variants.get(name)
        if table is not None:    # none: the plan's default variant, the host's `uname -r`
            tables.append({k: v for k, v in table.items() if k not in FLEET_VARIANT_KEYS})
    return dumps(data, tables)


def dumps(top: dict[str, Any], variants: list[dict[str, Any]]) -> str:
    return tomlwrite.dumps({**top, **({"variants": variants} if variants else {})},
                           header="written by stallbench's fleet mode: this host's part of the "
                                  "plan")
