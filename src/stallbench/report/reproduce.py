"""What `stallbench reproduce` prints: per candidate, each change that decides then against now
('reproduced: read p50 +69.4% [+66.4%, +72.5%] then, +67.0% [+63.1%, +71.2%] now', or which
did not come back), and one line that sums it up. Computes nothing: the verdicts are the two
comparisons', the outcomes compare/agreement.py's."""

from __future__ import annotations

from ..analysis.change import Change
from ..compare.agreement import Agreement, Outcome
from .wording import format_interval, format_percent


def _change(change: Change | None, verdict: bool) -> str:
    if change is None:
        return "not measured"
    interval = format_interval(change)
    words = format_percent(change.change) + (f" {interval}" if interval else "")
    return f"{change.verdict} {words}" if verdict else words


def agreement_line(a: Agreement) -> str:
    """'reproduced: read p50 +69.4% [...] then, +67.0% [...] now'; a row that did not agree
    says each side's verdict."""
    verdict = a.outcome != Outcome.REPRODUCED
    return (f"{a.outcome}: {a.op} {a.stat.label} {_change(a.then, verdict)} then, "
            f"{_change(a.now, verdict)} now")


def lines(found: list[Agreement], baseline: str, candidates: list[str]) -> list[str]:
    out = []
    for candidate in candidates:
        mine = [a for a in found if a.candidate == candidate]
        out.append(f"{candidate} against {baseline}:")
        out += [f"  {agreement_line(a)}" for a in mine] or ["  no row that decides"]
    called = [a for a in found if a.then.verdict in ("better", "worse")]
    back = sum(a.outcome == Outcome.REPRODUCED for a in called)
    new = sum(a.outcome in (Outcome.NEW, Outcome.DECIDED_NOW) for a in found)
    out.append(f"{back} of {len(called)} change(s) called then came back"
               + (f"; {new} called now only" if new else ""))
    return out
