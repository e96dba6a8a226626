"""The metrics asked for (`--metric OP:STAT` of check, compare, series, run and bisect; a plan's
`metrics`; bisect.json's): which op and which of its statistics a text names. The command line
parses each --metric here once, as it reads its arguments (cli/flags.py); what a plan or
bisect.json keeps as text is parsed by the same parse_metric. The comparison a metric is judged
in is compare/gate.py's."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.quantiles import Stat, row_stats, stat_named
from ..core.errors import UsageError


@dataclass
class Metric:
    """An op and one of its statistics, by the statistic's key (p99, p9999, rate, ...): the
    statistic is looked up once, here, and kept (`statistic`: its percentile, its direction)."""

    op: str
    stat: str
    statistic: Stat = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.statistic = stat_named(self.stat)        # ValueError: no such statistic
        self.stat = self.statistic.key

    def __str__(self) -> str:
        return f"{self.op}:{self.stat}"


def parse_metric(text: str) -> Metric:
    """'read:p99' -> Metric('read', 'p99'), 'read:p99.99' -> Metric('read', 'p9999'); the op
    name may itself contain ':'. Bad input is a UsageError (one line, exit 2)."""
    op, sep, name = text.rpartition(":")
    try:
        if sep and op:
            return Metric(op, name)
    except ValueError:
        pass
    raise UsageError(f"--metric {text!r}: use OP:STAT with STAT one of "
                     f"{' '.join(s.key for s in row_stats())} or any percentile such as "
                     "p99.99 (e.g. read:p99)")

