"""What a fleet run tells: a report per host (its failure in one line, its events, the runs
pulled) and the whole run's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class HostReport:
    host: str
    variants: list[str]
    ok: bool = True
    failure: str | None = None          # what went wrong, in one line
    events: list[str] = field(default_factory=list)
    runs: list[Path] = field(default_factory=list)
    status_checks: int = 0
    boot_ids: list[str] = field(default_factory=list)
    release: str | None = None

    def fail(self, what: str) -> None:
        if self.failure is None:
            self.failure = what
        else:
            self.events.append(what)
        self.ok = False


@dataclass
class FleetOutcome:
    fleet_run: str
    directory: Path
    reports: list[HostReport]
    variants: list[str]
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports)
