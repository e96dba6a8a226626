"""Run a recorded result again here and compare (`stallbench reproduce`): the recipe's plans
(recipe.py) run into a new results tree with the ordinary runner, then the recorded variants
compared as they were (the plan's first variant the baseline) and the new runs likewise, and
each change that decides set then against now (compare/agreement.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..compare.agreement import Agreement, agreements
from ..compare.model import Comparison
from ..core.errors import UsageError
from ..results.catalog import scan
from ..results.runmeta import Status
from .recipe import Recipe, recipe


@dataclass
class Reproduction:
    recipe: Recipe
    new: Path
    runs: int                              # complete runs made now
    failed: list[str]                      # runs that did not complete, with their reason
    then: Comparison | None = None         # None: one variant, nothing compared
    now: Comparison | None = None
    found: list[Agreement] | None = None


def default_new(results: Path) -> Path:
    """RESULTS.reproduced (-2, -3, ... where taken), beside a results folder; in the current
    folder for a bundle."""
    base = Path(results)
    stem = base.name.removesuffix(".tar.gz").removesuffix(".tgz").removesuffix(".tar")
    where = base.parent if base.is_dir() else Path.cwd()
    for n in range(1, 1000):
        candidate = where / (f"{stem}.reproduced" + (f"-{n}" if n > 1 else ""))
        if not candidate.exists():
            return candidate
    raise UsageError(f"{where}: too many {stem}.reproduced-N folders; give --results NEW")


def check_new(new: Path, results: Path, variants: list[str]) -> None:
    """The new results tree is another one, and holds no runs of these variants (they would
    be pooled with the new ones)."""
    if new.exists() and results.exists() and new.resolve() == Path(results).resolve():
        raise UsageError("--results NEW is the recorded tree itself: give another folder")
    if new.exists():
        runs, _ = scan(new)
        taken = sorted({r.meta.variant for r in runs} & set(variants))
        if taken:
            raise UsageError(f"--results {new} already holds runs of {', '.join(taken)}: give "
                             "an empty or new folder (they would be pooled with the new runs)")


def reproduce(results: Path, source: Path, new: Path, workload: str | None,
              progress: bool, log: Callable[[str], None]) -> Reproduction:
    """Run the recorded plans again into `new` and compare then with now. `results`: the
    tree to read (a bundle already opened), `source`: what the user named (for messages)."""
    from ..compare.comparison import build_comparison
    from ..compare.model import CompareOptions
    from ..results.runselect import resolve_runs
    from ..run.runner import check_plan, run_plan

    recorded_variants = _variants(results, workload)
    check_new(new, source, recorded_variants)
    made = recipe(results, new, workload)
    for plan in made.plans:
        check_plan(plan)                   # every plan's, before the first runs
    failed, complete = [], 0
    for plan in made.plans:
        log(f"reproduce: {', '.join(v.name for v in plan.variants)} x {plan.iterations} "
            f"into {new}")
        for outcome in run_plan(plan, progress=progress, log=log):
            if outcome.status == Status.INTERRUPTED:
                raise KeyboardInterrupt
            if outcome.status == Status.COMPLETE:
                complete += 1
            else:
                failed.append(f"{outcome.path}: {outcome.status}"
                              + (f" ({outcome.reason})" if outcome.reason else ""))
    done = Reproduction(made, new, complete, failed)
    names = made.recorded.variants
    if len(names) < 2:
        return done
    workload_name = made.recorded.workload
    then = [resolve_runs(n, results, workload_name) for n in names]
    now = [resolve_runs(n, new, workload_name) for n in names]
    if any(not r.runs for r in now):
        return done
    done.then = build_comparison(then[0], then[1:], CompareOptions())
    done.now = build_comparison(now[0], now[1:], CompareOptions())
    done.found = agreements(done.then, done.now)
    return done


def _variants(results: Path, workload: str | None) -> list[str]:
    from .recipe import choose_set
    return choose_set(results, workload).variants
