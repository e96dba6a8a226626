"""A run's monitors: started after the clock, stopped before the run is stored, each one's
tables and status written into the run (runner.run_one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core.context import RunContext
from ..monitors import Monitor, monitor_class
from ..results.rundirs import STACKS_FILE
from ..results.runmeta import MonitorStatus
from ..results.store import RunWriter


def start_monitors(ctx: RunContext, names: list[str], writer: RunWriter,
                    log: Callable[[str], None]) -> list[tuple[str, Monitor]]:
    """Start each named monitor that can run here (recorded as skipped, with the reason, where
    it cannot or fails to start: a monitor never stops the run)."""
    started: list[tuple[str, Monitor]] = []
    for name in names:
        cls = monitor_class(name)
        reason = cls.unavailable(ctx)
        if reason is None and name in [n for n, _ in started]:
            continue
        if reason:
            _skip(writer, name, reason, log)
            continue
        monitor = cls()
        try:
            monitor.start(ctx)
        except Exception as exc:  # noqa: BLE001 - a monitor never stops the run
            _skip(writer, name, f"failed to start: {exc}", log)
            continue
        started.append((name, monitor))
    return started


def _skip(writer: RunWriter, name: str, reason: str, log: Callable[[str], None]) -> None:
    writer.meta.monitors[name] = {"status": MonitorStatus.SKIPPED.value, "reason": reason}
    log(f"monitor {name} skipped: {reason}")


def stop_monitors(monitors: list[tuple[str, Monitor]], writer: RunWriter,
                   log: Callable[[str], None]) -> None:
    """Stop the monitors in reverse order and write what each left into the run."""
    for name, monitor in reversed(monitors):
        written: list[Path] = []
        try:
            result = monitor.stop()
            # a table that cannot be written fails its monitor, not the run, and takes the
            # monitor's other tables with it: a failed monitor leaves no rows to be read
            for table_name, table in result.tables.items():
                schema = result.schemas.get(table_name)
                written.append(writer.write_monitor(
                    table_name, table, schema.units(table.column_names) if schema else None))
        except Exception as exc:  # noqa: BLE001
            for path in written:
                path.unlink(missing_ok=True)
            writer.meta.monitors[name] = {"status": MonitorStatus.FAILED.value,
                                          "reason": str(exc)}
            log(f"monitor {name} failed: {exc}")
            continue
        if result.folded_stacks:
            (writer.path / STACKS_FILE).write_text(result.folded_stacks)
        writer.meta.monitors[name] = {"status": MonitorStatus.OK.value, **result.summary}

