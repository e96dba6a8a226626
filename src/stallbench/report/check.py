"""Renders the verdicts of `stallbench check` (built by comparison.gate): one line per metric."""

from __future__ import annotations

from ..compare.gate import GateResult
from .common import format_interval, format_percent


def render(results: list[GateResult]) -> str:
    """'read:p99  +15.2% [+9.8%, +21%]  bound +10.0%  regression: grew beyond the bound'."""
    lines = []
    for result in results:
        change = result.change
        shown = "" if change is None else \
            f"{format_percent(change.change)} {format_interval(change)}".strip()
        lines.append(f"{result.metric.op}:{result.metric.stat}  {shown or '-'}  bound "
                     f"{format_percent(result.bound)}  {result.outcome}: {result.reason}")
    return "".join(line + "\n" for line in lines)


def undecided(results: list[GateResult]) -> str:
    """Why the gate cannot decide, for the exit-125 line."""
    return "; ".join(f"{r.metric.op}:{r.metric.stat} {r.reason}" for r in results
                     if r.outcome == "undecided")
