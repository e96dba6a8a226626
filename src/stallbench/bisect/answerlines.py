"""What `stallbench bisect` prints: a line per decided step, the answer (report/wording.py's
number formats)."""

from __future__ import annotations

from collections.abc import Sequence

from ..report.wording import format_percent
from .search import FOUND, NOT_BAD, RANGE, Answer
from .state import Step
from .steps import Result


def step_line(step: Step) -> str:
    """'step 1: r0 vs r6: bad (check exit 1) after 1 round(s), 1+1 runs, 2.9 s: read:p50
    +4211% [+2402%, +7329%] regression (grew beyond the bound)'."""
    runs = "+".join(str(step.runs.get(name, 0)) for name in (step.baseline, step.candidate))
    verdicts = []
    for v in step.metrics:
        interval = "" if v.low is None or v.high is None else \
            f" [{format_percent(v.low)}, {format_percent(v.high)}]"
        shown = "" if v.change is None else f" {format_percent(v.change)}{interval}"
        verdicts.append(f"{v.metric}{shown} {v.outcome} ({v.reason})")
    built = f" (building kernels {step.build_s:.0f} s)" if step.build_s >= 1 else ""
    head = f"step {step.number}: {step.baseline} vs {step.candidate}: {step.outcome}"
    if step.rounds == 0:                          # not measured: a variant could not be made
        return (f"{head}, not measured, {step.seconds:.1f} s{built}: "
                + "; ".join(v.reason for v in step.metrics) + "\n")
    return (f"{head} (check exit {step.exit_code}) after {step.rounds} round(s), {runs} runs, "
            f"{step.seconds:.1f} s{built}: " + "; ".join(verdicts) + "\n")


def answer_lines(result: Result, described: Sequence[str] = ()) -> str:
    """The summary; the last line is `first bad: NAME` or `first bad: between A and B`, after
    the `described` lines (bisect --git: what git says of the commits)."""
    answer, names = result.answer, result.names
    assert answer is not None
    steps = len(result.steps)
    seconds = sum(s.seconds for s in result.steps)
    lines = [f"bisect: {steps} measured step(s) over {len(names)} variants in "
             f"{seconds:.0f} s; every verdict in {result.state_path}"]
    if result.settings.knee:
        lines.append(f"knee: the first variant whose change against {names[0]} crosses "
                     f"{result.settings.bound_text} on {', '.join(result.settings.metrics or [])}")
    if answer.kind == RANGE:
        lines.append(f"last good: {names[answer.last_good]}; could not be decided: "
                     + ", ".join(names[i] for i in answer.skipped))
        lines.append(f"first bad: between {names[answer.last_good + 1]} and "
                     f"{names[answer.first_bad]}")
    elif answer.kind == FOUND:
        if result.changed:
            lines.append(f"{names[answer.first_bad]} differs from {names[answer.first_bad - 1]} "
                         "in: " + ", ".join(f"{key} {_value(a)} -> {_value(b)}"
                                            for key, a, b in result.changed))
        lines.append(f"first bad: {names[answer.first_bad]}")
    if answer.kind in (RANGE, FOUND):
        lines[-1:-1] = described
    return "".join(line + "\n" for line in lines)


def _value(value: object) -> str:
    return "(none)" if value is None else str(value)


def no_answer(answer: Answer, names: list[str], settings_text: str) -> str:
    """Why there is nothing to bisect: the last variant is not bad, or that was undecided."""
    if answer.kind == NOT_BAD:
        return (f"{names[-1]} did not regress against {names[0]} beyond {settings_text}: "
                "no first bad variant")
    return (f"whether {names[-1]} regressed against {names[0]} (see the step above): no "
            "first bad variant")
