"""Renders the verdicts of `stallbench check` (built by compare/gate.py): one line per metric
(text), the check JSON (schemas/check.schema.json), JUnit XML (one testcase per metric) and
the markdown that goes to a CI job's summary."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from ..compare.gate import GateResult
from ..compare.model import Comparison
from ..compare.verdicts import GateOutcome
from ..core.version import __version__
from .wording import format_interval, format_percent, json_number

SCHEMA_VERSION = 1   # of the check JSON (schemas/check.schema.json)
# in JUnit a regression fails its testcase, an undecided one is skipped (as `git bisect run`
# skips it)
_FAILED, _SKIPPED = GateOutcome.REGRESSION, GateOutcome.UNDECIDED


def _name(result: GateResult) -> str:
    return str(result.metric)


def _shown(result: GateResult) -> str:
    """'+15.2% [+9.8%, +21%]': the change and its interval, '-' without one."""
    change = result.change
    shown = "" if change is None else \
        f"{format_percent(change.change)} {format_interval(change)}".strip()
    return shown or "-"


def render(results: list[GateResult]) -> str:
    """'read:p99  +15.2% [+9.8%, +21%]  bound +10.0%  regression: grew beyond the bound'."""
    return "".join(f"{_name(r)}  {_shown(r)}  bound {format_percent(r.bound)}  "
                   f"{r.outcome}: {r.reason}\n" for r in results)


def undecided(results: list[GateResult]) -> str:
    """Why the gate cannot decide, for the exit-125 line."""
    return "; ".join(f"{_name(r)} {r.reason}" for r in results if r.outcome == _SKIPPED)


def to_dict(results: list[GateResult], comparison: Comparison, max_regression: float,
            exit_code: int) -> dict[str, Any]:
    """The check JSON: what was compared, the bound, the exit code and each metric's change,
    interval, bound and outcome with its reason."""
    metrics = []
    for result in results:
        change = result.change
        metrics.append({
            "metric": _name(result), "op": result.metric.op, "stat": result.metric.stat,
            "change": json_number(change.change) if change else None,
            "low": json_number(change.low) if change else None,
            "high": json_number(change.high) if change else None,
            "verdict": change.verdict if change else None,
            "bound": result.bound, "outcome": result.outcome, "reason": result.reason,
        })
    return {"schema_version": SCHEMA_VERSION, "stallbench_version": __version__,
            "workload": comparison.workload, "baseline": comparison.baseline,
            "candidate": comparison.candidates[0], "max_regression": max_regression,
            "exit_code": exit_code, "metrics": metrics}


def junit_xml(results: list[GateResult], comparison: Comparison) -> str:
    """JUnit XML: one testsuite for the check, one testcase per metric; a regression is a
    failure, an undecided metric skipped, with the reason and the change in its message."""
    suite_name = f"stallbench check {comparison.baseline} vs {comparison.candidates[0]}"
    failures = sum(r.outcome == _FAILED for r in results)
    skipped = sum(r.outcome == _SKIPPED for r in results)
    counts = {"tests": str(len(results)), "failures": str(failures), "errors": "0",
              "skipped": str(skipped), "time": "0"}
    root = ElementTree.Element("testsuites", {"name": "stallbench check", **counts})
    suite = ElementTree.SubElement(root, "testsuite", {"name": suite_name, **counts})
    for result, line in zip(results, render(results).splitlines(), strict=True):
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"stallbench.check.{comparison.workload}", "name": _name(result),
            "time": "0"})
        if result.outcome == _FAILED:
            failure = ElementTree.SubElement(case, "failure", {"message": line,
                                                               "type": "regression"})
            failure.text = line
        elif result.outcome == _SKIPPED:
            ElementTree.SubElement(case, "skipped", {"message": line})
        ElementTree.SubElement(case, "system-out").text = line
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + \
        ElementTree.tostring(root, encoding="unicode") + "\n"


def step_summary(results: list[GateResult], comparison: Comparison) -> str:
    """Markdown for a CI job's summary ($GITHUB_STEP_SUMMARY): the headline, then a line per
    metric."""
    from . import markdown

    lines = markdown.render(comparison, ("headline",)).splitlines()
    lines += ["", "| metric | change | bound | outcome |", "|---|---:|---:|---|"]
    for result in results:
        lines.append(f"| {_name(result)} | {_shown(result)} | {format_percent(result.bound)} "
                     f"| **{result.outcome}**: {result.reason} |")
    return "\n".join(lines) + "\n\n"
