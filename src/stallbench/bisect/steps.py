"""`stallbench bisect`: the first bad variant of a plan's ordered variants, in about log2(n)
measured steps, each step deciding as `stallbench check` decides (compare/gate.py) with rounds added
until decided; or, with `knee`, the first variant whose change against the FIRST crosses the
bound (the memory limit below which read p99 doubles).

Three parts: `Search` (search.py), the pure decision logic (which pair to compare next,
what the outcomes so far say; no I/O); `run_bisect` here, which measures the steps with the
runner and judges each; and the journal of every run and every verdict in RESULTS/bisect.json
(state.py), so that an interrupted bisect (Ctrl-C, kill -9) goes on from there with `resume`.

A step that cannot decide (check's 125) is a skip, as in `git bisect`: that variant is never
judged again, and when only skipped variants remain between the last good and the first bad
one the answer is that range, never a guess.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..compare.comparison import build_comparison
from ..compare.gate import GateResult, gate, gate_outcome, metric_options
from ..compare.metrics import Metric, parse_metric
from ..compare.model import CompareOptions, Comparison
from ..compare.verdicts import EXIT_CODE, GateOutcome
from ..core.errors import UsageError
from ..core.units import parse_percent
from ..plan.plan import Plan, VariantSettings
from ..results.runmeta import Status
from ..results.runselect import Resolved, complete_runs
from ..workloads import get_workload
from . import DEFAULT_BOUND
from .search import BAD, FOUND, GOOD, NOT_BAD, SKIP, Answer, Search
from .state import MetricVerdict, Settings, State, Step, open_state, search_of, step_from

# the gate's outcome of a step (the policy's, compare/verdicts/) -> the step's, as `git
# bisect run` reads check's exit codes
STEP_OUTCOME = {GateOutcome.OK: GOOD, GateOutcome.REGRESSION: BAD, GateOutcome.UNDECIDED: SKIP}


def differences(plan: Plan, before: str, after: str) -> list[tuple[str, Any, Any]]:
    """(setting, before, after) for each variant setting and workload option in which two of
    the plan's variants differ: what changed at the first bad one."""
    by_name = {v.name: v for v in plan.variants}
    a, b = by_name[before], by_name[after]
    found = [(f.name, getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
             if f.name not in ("name", "workload_options")
             and getattr(a, f.name) != getattr(b, f.name)]
    parse = get_workload(plan.workload).parse_options     # defaults filled in, values parsed
    options_a = vars(parse(plan.options_of(a)))
    options_b = vars(parse(plan.options_of(b)))
    found += [(key, options_a[key], options_b.get(key)) for key in options_a
              if options_a[key] != options_b.get(key)]
    return found


# -- the measured steps ---------------------------------------------------------------------

class VariantSource(Protocol):
    """Variants made on demand (gitkernels.KernelBuilder: a commit's kernel, built when a step
    first needs it): prepare(name) -> None, or why it cannot be made (the step is a skip);
    identity(): what they are made from (a resume with another is refused)."""

    def prepare(self, name: str) -> str | None: ...

    def identity(self) -> dict[str, Any]: ...


@dataclass
class Result:
    answer: Answer | None           # None: interrupted
    names: list[str]
    steps: list[Step]
    state_path: Path
    settings: Settings
    comparison: Comparison | None = None
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)   # at the first bad one


def judge(state: State, baseline: str, candidate: str, metrics: list[Metric], bound: float
          ) -> tuple[GateOutcome, list[GateResult] | None, dict[str, int], str | None]:
    """check's decision on this bisect's complete runs of the two: (the gate's outcome, its
    results, runs per side, why there is no comparison)."""
    sides = [Resolved(name, complete_runs(state.runs_of(name)), [])
             for name in (baseline, candidate)]
    counts = {side.label: len(side.runs) for side in sides}
    missing = [side.label for side in sides if not side.runs]
    if missing:
        return GateOutcome.UNDECIDED, None, counts, f"no complete run of {', '.join(missing)}"
    comparison = build_comparison(sides[0], sides[1:],
                                  metric_options(metrics, CompareOptions(explain=False)))
    results = gate(comparison, metrics, bound)
    return gate_outcome(results), results, counts, None


def _verdicts(results: list[GateResult] | None, reason: str | None) -> list[MetricVerdict]:
    if results is None:
        return [MetricVerdict("-", GateOutcome.UNDECIDED, reason or "no comparison", 0.0)]
    verdicts = []
    for r in results:
        verdict = MetricVerdict(str(r.metric), r.outcome, r.reason, r.bound)
        if r.change is not None:
            verdict.change = r.change.change
            if r.change.interval_shown:
                verdict.low, verdict.high = r.change.low, r.change.high
        verdicts.append(verdict)
    return verdicts


def run_bisect(plan: Plan, given: Settings, resume: bool,
               on_step: Callable[[Step, list[str]], None],
               log: Callable[[str], None], progress: bool = False,
               source: VariantSource | None = None) -> Result:
    """Measure the steps until the answer is known; every round and verdict is journaled.
    With a `source`, each step first has it prepare the candidate, then the baseline."""
    if plan.hosts or any(v.hosts for v in plan.variants):
        raise UsageError("bisect runs on this machine: remove the plan's hosts")
    names = [v.name for v in plan.variants]
    Search(len(names))                                   # 2 or more variants
    state, settings = open_state(plan, given, resume,
                                 source.identity() if source is not None else None)
    metrics = [parse_metric(m) for m in settings.metrics]
    bound = parse_percent(settings.bound_text or DEFAULT_BOUND, "--max-regression")
    by_name = {v.name: v for v in plan.variants}
    rng = random.Random()
    search = search_of(state, bool(settings.knee))
    for step in state.steps:
        if step.outcome is not None:
            on_step(step, names)
    fresh = not resume
    while (pair := search.next_step()) is not None:
        baseline, candidate = names[pair[0]], names[pair[1]]
        steps = state.data["steps"]
        if steps and steps[-1]["outcome"] is None:
            step = step_from(steps[-1])                  # resumed in the middle of a step
            if (step.baseline, step.candidate) != (baseline, candidate):
                raise UsageError(f"{state.path}: the unfinished step does not follow from the "
                                 "decided ones; remove the file to start again")
        else:
            step = Step(len(steps) + 1, baseline, candidate)
            steps.append(asdict(step))
        started = time.monotonic()
        seconds = step.seconds
        outcome, results, counts, reason = GateOutcome.UNDECIDED, None, {}, None
        measured = step.rounds > 0
        why = _prepare(source, step, (candidate, baseline)) if source is not None else None
        if why is not None:
            outcome, reason, measured = GateOutcome.UNDECIDED, why, True
        elif measured:
            outcome, results, counts, reason = _judge_step(state, step, metrics, bound, fresh)
        while why is None and (not measured or outcome == GateOutcome.UNDECIDED
                               and step.rounds < (settings.max_rounds or 1)):
            interrupted = _run_round(plan, state, [by_name[baseline], by_name[candidate]],
                                     rng, log, progress)
            if not interrupted:
                state.data["rounds"] += 1
                step.rounds += 1
            step.seconds = seconds + time.monotonic() - started
            steps[-1] = asdict(step)
            state.save()
            if interrupted:
                return Result(None, names, state.steps, state.path, settings)
            measured = True
            outcome, results, counts, reason = _judge_step(state, step, metrics, bound, fresh)
        step.exit_code, step.outcome = EXIT_CODE[outcome], STEP_OUTCOME[outcome]
        step.runs = counts
        step.metrics = _verdicts(results, reason)
        step.seconds = seconds + time.monotonic() - started
        steps[-1] = asdict(step)
        state.save()
        search.record(names.index(candidate), step.outcome)
        on_step(step, names)
    answer = search.answer()
    state.data["answer"] = {"kind": answer.kind,
                            "last_good": names[answer.last_good],
                            "first_bad": names[answer.first_bad]
                            if answer.first_bad is not None else None,
                            "candidates": [names[i] for i in answer.candidates],
                            "skipped": [names[i] for i in answer.skipped]}
    state.save()
    changed = differences(plan, names[answer.first_bad - 1], names[answer.first_bad]) \
        if answer.kind == FOUND and answer.first_bad is not None and source is None else []
    return Result(answer, names, state.steps, state.path, settings,
                  final_comparison(state, answer, metrics, bool(settings.knee)), changed)


def _prepare(source: VariantSource, step: Step, names: tuple[str, str]) -> str | None:
    started = time.monotonic()
    why = next((f"{n}: {w}" for n in names if (w := source.prepare(n)) is not None), None)
    step.build_s += time.monotonic() - started
    return why


def _run_round(plan: Plan, state: State, pair: list[VariantSettings], rng: random.Random,
               log: Callable[[str], None], progress: bool) -> bool:
    """One run of each of the two, in the runner's round order; the complete ones join the
    state's runs. True when a run was interrupted (Ctrl-C, SIGTERM)."""
    from ..run.runner import round_order, run_plan

    order = round_order(pair, state.data["rounds"], rng, log)
    outcomes = run_plan(dataclasses.replace(plan, variants=order, iterations=1,
                                            until_decided=None), progress=progress, log=log)
    for outcome in outcomes:
        if outcome.status == Status.COMPLETE:
            state.runs_of(outcome.variant).append(str(outcome.path))
    return any(o.status == Status.INTERRUPTED for o in outcomes)


def _judge_step(state: State, step: Step, metrics: list[Metric], bound: float,
                 fresh: bool
                 ) -> tuple[GateOutcome, list[GateResult] | None, dict[str, int], str | None]:
    """judge(); a metric not in the runs is bad input: a bisect that decided nothing yet
    leaves no state behind, so that it can be started again with the metric corrected."""
    try:
        return judge(state, step.baseline, step.candidate, metrics, bound)
    except UsageError:
        if fresh and not any(s["outcome"] for s in state.data["steps"]):
            state.path.unlink(missing_ok=True)
        raise


def final_comparison(state: State, answer: Answer, metrics: list[Metric], knee: bool
                     ) -> Comparison | None:
    """The first bad one against its predecessor (a range: its ends; knee: the first variant
    against the predecessor and the knee), on this bisect's runs, as `compare` shows it."""
    names = state.data["variants"]
    if answer.first_bad is None:
        if answer.kind != NOT_BAD:
            return None
        labels = [names[0], names[-1]]
    else:
        labels = [names[answer.last_good], names[answer.first_bad]]
        if knee and answer.last_good != 0:
            labels.insert(0, names[0])
    sides = [Resolved(name, complete_runs(state.runs_of(name)), []) for name in labels]
    if any(not side.runs for side in sides):
        return None
    return build_comparison(sides[0], sides[1:], metric_options(metrics))
