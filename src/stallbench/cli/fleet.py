"""`stallbench run --plan PLAN --hosts INVENTORY`: the fleet run's summary and comparison
(the work is in fleet/orchestrate.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import ExitCode, RunDataError, UsageError
from ..plan.plan import Plan


def _source(plan: Plan, hosts: str | None) -> Path | list[str]:
    from ..settings.hosts import check_hosts_option

    if hosts:
        return check_hosts_option(hosts)
    if plan.hosts is not None:
        return plan.hosts
    targets = [name for v in plan.variants for name in (v.hosts or [])]
    if not all(v.hosts for v in plan.variants):
        raise UsageError(f"{plan.source}: some variants name no hosts: give hosts = "
                         "\"INVENTORY\" in the plan or --hosts INVENTORY")
    return list(dict.fromkeys(targets))


def run_fleet_plan(plan: Plan, hosts: str | None) -> int:
    from ..fleet.orchestrate import run_fleet

    if getattr(plan, "until_decided", None):
        raise UsageError("iterations \"auto\" is not supported with hosts yet: give a number "
                         "of iterations")
    outcome = run_fleet(plan, _source(plan, hosts), log=lambda line: print(line, flush=True))
    print()
    print(f"fleet run {outcome.fleet_run} (log: {outcome.directory})")
    incomplete = 0
    for report in outcome.reports:
        runs = len(report.runs)
        complete = 0
        for path in report.runs:
            from ..results.store import load_run
            complete += load_run(path).complete
        incomplete += runs - complete
        state = "ok" if report.ok else "FAILED"
        line = f"  {report.host}: {state}: {complete}/{runs} runs complete pulled"
        line += f" ({', '.join(report.variants)}; {report.status_checks} status check(s))"
        print(line + (f": {report.failure}" if report.failure else ""))
        for event in report.events:
            print(f"      {event}")
    pulled = {path.parent.parent.name for r in outcome.reports for path in r.runs}
    names = [v for v in outcome.variants if v in pulled] + sorted(pulled - set(outcome.variants))
    printed = _comparison(plan, names)   # a plan without variants: each host's `uname -r`
    failed = [r.host for r in outcome.reports if not r.ok]
    if outcome.interrupted:
        print("stallbench: interrupted; every host's stallbench was stopped and what it "
              "recorded pulled", file=sys.stderr)
        return ExitCode.INTERRUPTED
    if failed:
        print(f"stallbench: fleet: {len(failed)} of {len(outcome.reports)} host(s) failed: "
              f"{', '.join(failed)}; the other hosts' results are kept", file=sys.stderr)
        return ExitCode.FAILURE
    if incomplete or not printed:
        print("stallbench: some runs failed; see run.json of each", file=sys.stderr)
        return ExitCode.FAILURE
    return ExitCode.OK


def _comparison(plan: Plan, variants: list[str]) -> bool:
    """One comparison of everything pulled, hosts shown apart (VARIANT@HOST)."""
    from ..compare.comparison import build_comparison
    from ..compare.model import CompareOptions
    from ..fleet.labels import split_hosts
    from ..report import render
    from ..results.runselect import resolve_runs

    sides = []
    for name in variants:
        try:
            sides.append(resolve_runs(name, plan.results, plan.workload))
        except (UsageError, RunDataError) as exc:
            print(f"stallbench: {name}: {exc}", file=sys.stderr)
    sides, notes = split_hosts(sides, pool=False)
    for note in notes:
        print(f"stallbench: {note}", file=sys.stderr)
    if len(sides) < 2:
        return bool(sides)
    print()
    print(render(build_comparison(sides[0], sides[1:], CompareOptions()), "text"), end="")
    return True
