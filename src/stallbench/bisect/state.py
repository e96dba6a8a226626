"""RESULTS/bisect.json, what a bisect keeps so that `--resume` goes on after Ctrl-C or kill -9:
the plan's fingerprint (a resume refuses a changed plan), the settings that decide the steps
(stored; a setting given again on resume must be the same), every complete run it measured and
every step with its metrics' verdicts, written atomically after each run round and verdict;
the search is replayed from the decided steps (`search_of`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.metrics import parse_metric
from ..core.errors import UsageError
from ..core.jsonfile import write_json_atomic
from ..core.units import parse_percent
from ..plan.plan import DEFAULT_MAX_ITERATIONS, Plan
from . import DEFAULT_BOUND
from .search import Search

STATE_FILE = "bisect.json"
STATE_KIND = "stallbench-bisect"
STATE_VERSION = 1


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


class State:
    """RESULTS/bisect.json: the plan's fingerprint, the settings, every run this bisect measured
    (complete ones only) and every step with its verdicts. Written atomically after each run
    round and each verdict."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path = path
        self.data = data

    @property
    def steps(self) -> list[Step]:
        return [step_from(s) for s in self.data["steps"]]

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
    # the metrics as --metric gives them (read:p99.9 is read:p999), to be compared with those given
    stored = Settings([str(parse_metric(m)) for m in data["metrics"]], data["max_regression"],
                      data["mode"] == "knee", int(data["max_rounds"]))
    for key in ("metrics", "bound_text", "knee", "max_rounds"):
        value = getattr(given, key)
        if value not in (None, []) and value != getattr(stored, key):
            raise UsageError(f"--resume: this bisect was begun with {stored.describe(key)}: "
                             "give the same or leave it out")
    return State(path, data), stored


def step_from(data: dict[str, Any]) -> Step:
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
