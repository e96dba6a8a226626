"""`stallbench bisect`: the first bad variant of a plan's ordered variants, in about log2(n)
measured steps, each step deciding as `stallbench check` decides (compare/gate.py) with rounds added
until decided; or, with `knee`, the first variant whose change against the FIRST crosses the
bound (the memory limit below which read p99 doubles).

Two parts: `Search` (bisectsearch.py), the pure decision logic (which pair to compare next,
what the outcomes so far say; no I/O), and `run_bisect` here, which measures the steps with the
runner and journals every run and every verdict in RESULTS/bisect.json (atomic JSON), so that
an interrupted bisect (Ctrl-C, kill -9) goes on from there with `resume`.

A step that cannot decide (check's 125) is a skip, as in `git bisect`: that variant is never
judged again, and when only skipped variants remain between the last good and the first bad
one the answer is that range, never a guess.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..compare.comparison import build_comparison
from ..compare.gate import (
    GateResult,
    Metric,
    gate,
    gate_exit_code,
    metric_options,
    metric_percents,
    parse_metric,
)
from ..compare.model import CompareOptions, Comparison
from ..core.errors import ExitCode, UsageError
from ..core.jsonfile import write_json_atomic
from ..core.units import parse_percent
from ..plan.plan import DEFAULT_MAX_ITERATIONS, Plan, VariantSettings
from ..results.runmeta import Status
from ..results.runselect import Resolved, complete_runs
from ..workloads import get_workload
from . import DEFAULT_BOUND
from .search import BAD, FOUND, GOOD, NOT_BAD, SKIP, Answer, Search

STATE_FILE = "bisect.json"
STATE_KIND = "stallbench-bisect"
STATE_VERSION = 1
OUTCOME_OF_EXIT = {ExitCode.OK: GOOD, ExitCode.FAILURE: BAD,    # check's exit codes, as git
                   ExitCode.UNDECIDED: SKIP}                     # bisect reads them

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

@dataclass
class MetricVerdict:
    metric: str          # op:stat
    outcome: str         # gate's: ok | regression | undecided
    reason: str
    bound: float
    change: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class Step:
    number: int
    baseline: str
    candidate: str
    outcome: str | None = None          # GOOD | BAD | SKIP; None while it is measured
    exit_code: int | None = None        # as `check` would exit
    rounds: int = 0                     # rounds this step added
    runs: dict[str, int] = field(default_factory=dict)   # runs per side behind the verdict
    seconds: float = 0.0                # time this step took (over resumes)
    build_s: float = 0.0                # of which building its kernels (bisect --git)
    metrics: list[MetricVerdict] = field(default_factory=list)


class VariantSource(Protocol):
    """Variants made on demand (bisectgit.KernelBuilder: a commit's kernel, built when a step
    first needs it): prepare(name) -> None, or why it cannot be made (the step is a skip);
    identity(): what they are made from (a resume with another is refused)."""

    def prepare(self, name: str) -> str | None: ...

    def identity(self) -> dict[str, Any]: ...


@dataclass
class Settings:
    """What decides the steps; fields left None take the plan's (metrics, max_iterations) or
    the defaults, and on resume the stored ones."""

    metrics: list[str] | None = None
    bound_text: str | None = None     # --max-regression, e.g. "10%"
    knee: bool | None = None
    max_rounds: int | None = None

    def filled(self, plan: Plan) -> Settings:
        metrics = self.metrics or plan.until_decided
        if not metrics:
            raise UsageError("bisect needs --metric OP:STAT (or metrics = [...] in the plan)")
        rounds = self.max_rounds or (plan.iterations if plan.until_decided
                                     else DEFAULT_MAX_ITERATIONS)
        return Settings(list(metrics), self.bound_text or DEFAULT_BOUND, bool(self.knee),
                        rounds)

    def describe(self, key: str) -> str:
        """The flag that gives this setting, e.g. '--max-regression 10%'."""
        value = getattr(self, key)
        if key == "metrics":
            return " ".join(f"--metric {m}" for m in value or [])
        if key == "knee":
            return "--knee" if value else "no --knee"
        flag = {"bound_text": "--max-regression", "max_rounds": "--max-rounds"}[key]
        return f"{flag} {value}"


@dataclass
class Result:
    answer: Answer | None           # None: interrupted
    names: list[str]
    steps: list[Step]
    state_path: Path
    settings: Settings
    comparison: Comparison | None = None
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)   # at the first bad one


class State:
    """RESULTS/bisect.json: the plan's fingerprint, the settings, every run this bisect measured
    (complete ones only) and every step with its verdicts. Written atomically after each run
    round and each verdict."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path = path
        self.data = data

    @property
    def steps(self) -> list[Step]:
        return [_step_from(s) for s in self.data["steps"]]

    def runs_of(self, name: str) -> list[str]:
        return self.data["runs"].setdefault(name, [])

    def save(self) -> None:
        write_json_atomic(self.path, self.data)


def state_path(plan: Plan) -> Path:
    return Path(plan.results) / STATE_FILE


def plan_fingerprint(plan: Plan) -> str:
    """What the runs of a bisect depend on: a resumed bisect refuses a changed plan."""
    text = json.dumps({"workload": plan.workload, "options": plan.workload_options,
                       "duration_s": plan.duration_s, "warmup_s": plan.warmup_s,
                       "monitors": plan.monitors,
                       "variants": [dataclasses.asdict(v) for v in plan.variants]},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def open_state(plan: Plan, given: Settings, resume: bool,
               source: dict[str, Any] | None = None) -> tuple[State, Settings]:
    """The journal of this bisect: a new one, or (resume) the one in RESULTS, whose settings
    stand (a setting given again must be the same); `source`: VariantSource.identity()."""
    path = state_path(plan)
    names = [v.name for v in plan.variants]
    if not resume:
        if path.exists():
            raise UsageError(f"{path} holds a bisect already: go on with --resume, or remove "
                             "the file to start again")
        settings = given.filled(plan)
        for metric in settings.metrics or []:
            parse_metric(metric)                      # bad input before any state is kept
        parse_percent(settings.bound_text or DEFAULT_BOUND, "--max-regression")
        Path(plan.results).mkdir(parents=True, exist_ok=True)
        state = State(path, {
            "kind": STATE_KIND, "version": STATE_VERSION, "plan": str(plan.source or ""),
            "fingerprint": plan_fingerprint(plan), "variants": names,
            "mode": "knee" if settings.knee else "bisect", "metrics": settings.metrics,
            "max_regression": settings.bound_text, "max_rounds": settings.max_rounds,
            "rounds": 0, "runs": {}, "steps": [], "answer": None, "source": source})
        state.save()
        return state, settings
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"--resume: no bisect state in {path} (start one without "
                         "--resume)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"--resume: cannot read {path} ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != STATE_KIND \
            or data.get("version") != STATE_VERSION:
        raise UsageError(f"--resume: {path} is not a stallbench bisect state of version "
                         f"{STATE_VERSION}")
    if data.get("variants") != names or data.get("fingerprint") != plan_fingerprint(plan):
        raise UsageError(f"--resume: the plan changed since the bisect in {path} began "
                         "(variants, options or durations): remove the file to start again")
    if data.get("source") != source:
        raise UsageError(f"--resume: this bisect was begun with {data.get('source')}: give the "
                         f"same (--git, --good, --bad, --build), or remove {path}")
    stored = Settings(list(data["metrics"]), data["max_regression"], data["mode"] == "knee",
                      int(data["max_rounds"]))
    for key in ("metrics", "bound_text", "knee", "max_rounds"):
        value = getattr(given, key)
        if value not in (None, []) and value != getattr(stored, key):
            raise UsageError(f"--resume: this bisect was begun with {stored.describe(key)}: "
                             "give the same or leave it out")
    return State(path, data), stored


def _step_from(data: dict[str, Any]) -> Step:
    step = Step(**{k: v for k, v in data.items() if k != "metrics"})
    step.metrics = [MetricVerdict(**m) for m in data.get("metrics", [])]
    return step


def search_of(state: State, knee: bool) -> Search:
    """The search replayed from the decided steps (the state keeps only the steps)."""
    names = state.data["variants"]
    search = Search(len(names), knee)
    for step in state.steps:
        if step.outcome is not None:
            search.record(names.index(step.candidate), step.outcome)
    return search


def judge(state: State, baseline: str, candidate: str, metrics: list[Metric], bound: float
          ) -> tuple[int, list[GateResult] | None, dict[str, int], str | None]:
    """check's decision on this bisect's complete runs of the two: (exit code, the gate's
    results, runs per side, why there is no comparison)."""
    sides = [Resolved(name, complete_runs(state.runs_of(name)), [])
             for name in (baseline, candidate)]
    counts = {side.label: len(side.runs) for side in sides}
    missing = [side.label for side in sides if not side.runs]
    if missing:
        return ExitCode.UNDECIDED, None, counts, f"no complete run of {', '.join(missing)}"
    comparison = build_comparison(sides[0], sides[1:], CompareOptions(
        explain=False, percentiles=metric_percents(metrics),
        metrics=tuple((m.op, m.stat) for m in metrics)))
    results = gate(comparison, metrics, bound)
    return gate_exit_code(results), results, counts, None


def _verdicts(results: list[GateResult] | None, reason: str | None) -> list[MetricVerdict]:
    if results is None:
        return [MetricVerdict("-", "undecided", reason or "no comparison", 0.0)]
    verdicts = []
    for r in results:
        verdict = MetricVerdict(f"{r.metric.op}:{r.metric.stat}", r.outcome, r.reason, r.bound)
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
            step = _step_from(steps[-1])                  # resumed in the middle of a step
            if (step.baseline, step.candidate) != (baseline, candidate):
                raise UsageError(f"{state.path}: the unfinished step does not follow from the "
                                 "decided ones; remove the file to start again")
        else:
            step = Step(len(steps) + 1, baseline, candidate)
            steps.append(asdict(step))
        started = time.monotonic()
        seconds = step.seconds
        code, results, counts, reason = ExitCode.UNDECIDED, None, {}, None
        measured = step.rounds > 0
        why = _prepare(source, step, (candidate, baseline)) if source is not None else None
        if why is not None:
            code, reason, measured = ExitCode.UNDECIDED, why, True
        elif measured:
            code, results, counts, reason = _judge_step(state, step, metrics, bound, fresh)
        while why is None and (not measured or code == ExitCode.UNDECIDED
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
            code, results, counts, reason = _judge_step(state, step, metrics, bound, fresh)
        step.exit_code, step.outcome = code, OUTCOME_OF_EXIT[code]
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
                 fresh: bool) -> tuple[int, list[GateResult] | None, dict[str, int], str | None]:
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
