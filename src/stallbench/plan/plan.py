"""Plan / Variant / run options: what to run, under which configurations.

`stallbench run` builds a Plan from its flags; `stallbench run --plan FILE` from TOML
(planfile.py's `load_plan`, through the same option tables). Every run setting is declared here
once, with option(...), and validated before anything on the machine changes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.options import SWITCH, Field, fields_of, option
from ..core.units import parse_duration
from ..monitors import monitors_help, parse_monitor_list
from ..results.rundirs import default_results_dir
from ..settings.variant import VariantSettings
from ..workloads import Workload, get_workload

MAX_ITERATIONS = 10_000
DEFAULT_MAX_ITERATIONS = 10     # iterations = "auto" without max_iterations


def parse_warmup(text: object, what: str = "--warmup") -> float:
    """A warm-up duration ('3s', '0'), a multiple of 0.1 s (it ends on a time block's edge)."""
    text = text if isinstance(text, str) else str(text)
    seconds = parse_duration(text, what) if text.strip() not in ("0", "0s") else 0.0
    tenths = round(seconds * 10)
    if abs(seconds * 10 - tenths) > 1e-6:
        raise UsageError(f"{what}: {text!r} must be a multiple of 0.1 s (e.g. 2.5s)")
    return tenths / 10


def _duration(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f"{what}: expected a duration like \"30s\", got {value!r}")
    return parse_duration(value, what)


def _iterations(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what}: expected a whole number, got {value!r}")
    if not 1 <= value <= MAX_ITERATIONS:
        raise UsageError(f"{what}: must be between 1 and {MAX_ITERATIONS}")
    return value


def _switch(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{what}: expected true or false, got {value!r}")
    return value


def _monitors(value: object, what: str) -> list[str] | None:
    if not isinstance(value, (str, list)) or (
            isinstance(value, list) and not all(isinstance(v, str) for v in value)):
        raise UsageError(f"{what}: expected a string or a list of monitor names")
    try:
        return parse_monitor_list(value)
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None


DEFAULT_DURATION = "30s"   # the documented default of --duration; a plan's is the same


@dataclass
class Plan:
    """What to run: a workload, its options, the variants, and the run settings (declared once
    with option(...): the flags of `stallbench run WORKLOAD` and the top keys of a plan)."""

    workload: str = option(dataclasses.MISSING, flag=None, schema={"type": "string"})
    workload_options: dict[str, Any] = option(dataclasses.MISSING, flag=None,
                                              schema={"$ref": "#/$defs/options"})
    variants: list[VariantSettings] = option(
        dataclasses.MISSING, flag=None,
        schema={"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/variant"}})
    duration_s: float = option(
        parse_duration(DEFAULT_DURATION), name="duration", parse=_duration,
        schema={"$ref": "#/$defs/duration"},
        help=f"length of each run with a unit: 500ms, 30s, 2m, 1h; a bare number is seconds "
             f"({DEFAULT_DURATION})")
    iterations: int = option(1, parse=_iterations, cli_type=int,
                             help="runs of the variant", show=str,
                             schema={"oneOf": [{"type": "integer", "minimum": 1},
                                               {"const": "auto"}]})
    # None, not given: the workload's default_warmup_s and the start-up transient found
    # beyond it (run.json warmup_found); 0 given is obeyed
    warmup_s: float | None = option(
        None, name="warmup", parse=parse_warmup, metavar="DURATION",
        schema={"$ref": "#/$defs/duration"},
        help="run this long first, recorded but left out of the statistics, and nothing more "
             "(default: each run's start-up transient, found in its time blocks, beyond the "
             "workload's own minimum, e.g. pgioperf 1s, randread 0)")
    duet: bool = option(
        False, kind=SWITCH, parse=_switch, schema={"type": "boolean"},
        help="run the variants of each round at the same time, each pinned to its own CPUs, "
             "and compare them pair by pair (Bulej et al., Duet Benchmarking): drift of the "
             "host hits both sides of a pair; only for per-process differences (duet.py)")
    until_decided: list[str] | None = None  # iterations = "auto": these OP:STAT metrics decide
    monitors: list[str] | None = option(None, parse=_monitors, help=monitors_help(),
                                        schema={"oneOf": [{"type": "string"}, {
                                            "type": "array", "items": {"type": "string"}}]})
    results: Path = option(factory=default_results_dir, flag=None, schema={"type": "string"})
    source: Path | None = None         # the plan file, for messages
    text: str | None = None            # the plan file's text as read (run.json `plan.text`)
    hosts: Path | list[str] | None = option(   # fleet: an inventory file or SSH targets
        None, flag=None, schema={
            "description": "fleet: an Ansible inventory file (relative to the plan) or a list "
                           "of SSH targets",
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})

    def options_of(self, variant: VariantSettings) -> dict[str, Any]:
        """The workload options a variant runs with: the plan's, then the variant's own."""
        return merged_options(self.workload_options, variant)

    def workload_of(self, variant: VariantSettings) -> Workload:
        """The variant's workload, its options parsed and checked (UsageError if they fail)."""
        return get_workload(self.workload).from_options(self.options_of(variant))

    def check_workloads(self) -> None:
        """Every variant's options parsed and checked before anything changes on the machine
        (a plan file's were checked as it loaded; one made from flags was not)."""
        for variant in self.variants:
            self.workload_of(variant)


def merged_options(options: dict[str, Any], variant: VariantSettings) -> dict[str, Any]:
    return {**options, **variant.workload_options}


PLAN_FIELDS: tuple[Field, ...] = fields_of(Plan)
RUN_FIELDS = tuple(f for f in PLAN_FIELDS if f.option is not None)   # flags and plan keys
