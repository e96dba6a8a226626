"""Live progress while a workload runs: per op ops/s, max latency of the last second, and ops
that stopped completing while others go on (starvation, visible while it happens).

On a terminal it is a rich Live table on stderr, its title one line above it (a table title
wraps to the table's width); otherwise one plain line every few seconds and one at the end, so
that a run shorter than the period still leaves a line in a log. rich is imported only when the
display is enabled (a guest under TCG spends ~1 s importing it).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.live import Live

from ..analysis.display import format_ns

PLAIN_PERIOD_S = 5.0
STARVED_AFTER_S = 1.0
MIN_RATE_PERIOD_S = 0.25


@dataclass
class _OpState:
    total: int = 0
    rate: float = 0.0
    recent_max_ns: int = 0
    last_change_s: float = field(default_factory=time.monotonic)


class Progress:
    def __init__(self, title: str, duration_s: float, ops: list[str], enabled: bool = True):
        self.title = title
        self.duration_s = duration_s
        self.ops = {op: _OpState() for op in ops}
        self.enabled = enabled
        self.console: Console | None = None
        self.interactive = False
        if enabled:
            from rich.console import Console

            self.console = Console(stderr=True)
            self.interactive = self.console.is_terminal
        self._live: Live | None = None
        self._start = time.monotonic()
        self._last_update = self._start
        self._last_plain = self._start
        self._plain_lines = 0

    def __enter__(self) -> Progress:
        self._start = self._last_update = self._last_plain = time.monotonic()
        if self.interactive:
            from rich.live import Live

            self._live = Live(self._render(), console=self.console, refresh_per_second=4,
                              transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(*exc)
            self._live = None
        elif self.enabled and not self.interactive and self._plain_lines == 0:
            self._print_plain()

    def update(self, counts: dict[str, tuple[int, int]]) -> None:
        now = time.monotonic()
        dt = now - self._last_update
        if dt < MIN_RATE_PERIOD_S:
            return
        for op, (total, recent_max) in counts.items():
            state = self.ops.setdefault(op, _OpState(last_change_s=self._start))
            if total != state.total:
                state.last_change_s = now
            state.rate = (total - state.total) / dt
            state.total = total
            state.recent_max_ns = recent_max
        self._last_update = now
        if self._live is not None:
            self._live.update(self._render())
        elif self.enabled and now - self._last_plain >= PLAIN_PERIOD_S:
            self._last_plain = now
            self._print_plain()

    def _print_plain(self) -> None:
        self._plain_lines += 1
        print(self._plain_line(), file=sys.stderr, flush=True)

    def starving(self) -> list[str]:
        """Ops that completed before but nothing for a while, although some other op did.
        (An op that has not completed once yet, like a rare fsync, is not called starved.)"""
        now = time.monotonic()
        active = [s for s in self.ops.values() if now - s.last_change_s < STARVED_AFTER_S]
        if not active:
            return []
        return [op for op, s in self.ops.items()
                if s.total > 0 and now - s.last_change_s >= STARVED_AFTER_S]

    def _times(self) -> str:
        elapsed = time.monotonic() - self._start
        remaining = max(0.0, self.duration_s - elapsed)
        return f"{elapsed:5.1f} s elapsed, {remaining:5.1f} s left"

    def _render(self) -> Group:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        title = Text(f"{self.title} — {self._times()}", style="bold", no_wrap=True,
                     overflow="ellipsis")
        table = Table(expand=False)
        for column in ("op", "ops", "ops/s", "max (last s)", ""):
            table.add_column(column, justify="left" if column in ("op", "") else "right")
        starving = set(self.starving())
        now = time.monotonic()
        for op, s in self.ops.items():
            flag = ""
            if op in starving:
                flag = f"[bold red]STARVED: nothing completed for {now - s.last_change_s:.1f} s"
            table.add_row(op, f"{s.total:,}", f"{s.rate:,.0f}",
                          format_ns(s.recent_max_ns) if s.recent_max_ns else "-", flag)
        return Group(title, table)

    def _plain_line(self) -> str:
        parts = []
        starving = set(self.starving())
        for op, s in self.ops.items():
            text = f"{op} {s.rate:,.0f}/s max {format_ns(s.recent_max_ns)}"
            if op in starving:
                text += " STARVED"
            parts.append(text)
        return f"[{self.title}] {self._times()}: " + "; ".join(parts)
