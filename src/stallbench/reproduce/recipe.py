"""What a results tree recorded that runs it again (`stallbench reproduce`): the workload's
complete runs by variant (compare/provenance.py recorded_sets), the plans they ran as written
(run.json plan.text), and each kernel variant's identity. Each thing that would make the runs
of today differ from the record is refused here, in one line, before anything runs: a tree
recorded without the plan's text (before 0.6.0), a recorded variant its plan does not have, a
kernel file that is gone or whose sha256 changed."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..compare.provenance import RecordedSet, recorded_sets
from ..core.errors import UsageError
from ..plan.plan import Plan
from ..plan.planfile import load_plan
from ..vm.kernel import kernel_identity

PLANS_FOLDER = ".reproduce"   # in the new results: each plan as it is run again


@dataclass
class Recipe:
    """The recorded set and the plans that run its variants again, in the recorded order."""
    recorded: RecordedSet
    plans: list[Plan]
    texts: list[str]


def choose_set(results: Path, workload: str | None) -> RecordedSet:
    sets, _problems = recorded_sets(results)
    if workload is not None:
        sets = [s for s in sets if s.workload == workload]
    if not sets:
        raise UsageError(f"{results}: no complete run" + (f" of {workload}" if workload else "")
                         + " to reproduce")
    if len(sets) > 1:
        raise UsageError(f"{results} holds runs of {', '.join(s.workload for s in sets)}: "
                         "give --workload NAME")
    return sets[0]


def recipe(results: Path, new: Path, workload: str | None = None) -> Recipe:
    """The plans that run the recorded variants again into `new`, each checked (UsageError,
    one line, when it cannot be the same)."""
    recorded = choose_set(results, workload)
    texts: list[str] = []
    wanted: dict[str, list[str]] = {}        # plan text -> its recorded variants
    for name in recorded.variants:
        for run in recorded.runs[name]:
            text = (run.meta.plan or {}).get("text")
            if not isinstance(text, str):
                version = run.meta.stallbench_version or "an older version"
                raise UsageError(
                    f"{results}: the runs of {name} were recorded by stallbench {version} "
                    "without the text of their plan (0.6.0 and later record it), so there is "
                    "nothing to run again; run the plan again with `stallbench run --plan "
                    "PLAN` and compare")
            if text not in wanted:
                texts.append(text)
                wanted[text] = []
            if name not in wanted[text]:
                wanted[text].append(name)
    plans = []
    with tempfile.TemporaryDirectory(prefix="stallbench-plan-") as scratch:
        for text in texts:
            path = Path(scratch) / _plan_name(text)
            path.write_text(text)
            plan = load_plan(path)
            names = {v.name for v in plan.variants}
            missing = [n for n in wanted[text] if n not in names]
            if missing:
                raise UsageError(f"{results}: variant {missing[0]} is not in the plan its runs "
                                 "recorded (a `bisect --git` step, or a plan without "
                                 "[[variants]] run on another host)")
            plan.variants = [v for v in plan.variants if v.name in wanted[text]]
            plan.results, plan.hosts = new, None
            for variant in plan.variants:
                variant.hosts = variant.boot = None
                _check_kernel(recorded, variant.name, variant.kernel)
            plans.append(plan)
    folder = new / PLANS_FOLDER         # only once every check passed
    folder.mkdir(parents=True, exist_ok=True)
    for plan, text in zip(plans, texts, strict=True):
        plan.source = folder / _plan_name(text)
        plan.source.write_text(text)
    return Recipe(recorded, plans, texts)


def _plan_name(text: str) -> str:
    return f"plan-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"


def _check_kernel(recorded: RecordedSet, name: str, spec: str | None) -> None:
    """A kernel variant runs the file its runs recorded: the same sha256 (where recorded)."""
    if spec is None:
        return
    then = next(((run.meta.plan or {}).get("kernel") for run in recorded.runs[name]
                 if isinstance((run.meta.plan or {}).get("kernel"), dict)), None)
    if not then or not then.get("sha256"):
        return
    now = kernel_identity(spec)
    if not now:
        raise UsageError(f"variant {name}: its kernel {spec} is not there (the runs recorded "
                         f"{then.get('file')} with sha256 {then['sha256'][:16]}...): put that "
                         "file there")
    if now.get("sha256") != then["sha256"]:
        raise UsageError(f"variant {name}: the kernel {spec} has sha256 "
                         f"{str(now.get('sha256'))[:16]}... now, the recorded runs ran "
                         f"{then.get('file')} with sha256 {then['sha256'][:16]}...: give the "
                         "same image")
