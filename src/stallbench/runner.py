"""Run a plan: for each iteration, for each variant (interleaved rounds, each after the first
in a random order, so that drift on a noisy machine spreads evenly): journal -> environment ->
prepare -> drop caches -> clock -> monitors -> workload -> monitors stop -> store -> environment
down -> finalize."""

from __future__ import annotations

import random
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import env, machineload, recovery
from .context import RunContext
from .errors import UsageError
from .journal import Journal
from .monitors import Monitor, default_monitor_names, monitor_class
from .plan import Plan, VariantSettings
from .progress import Progress
from .rundirs import STACKS_FILE
from .runmeta import MonitorStatus, Status
from .store import RunWriter
from .workloads import Workload, get_workload

assert recovery  # imported for its "finalize_run" undo kind


@dataclass
class RunOutcome:
    path: Path
    variant: str
    status: Status
    reason: str | None


class _Interrupt:
    """SIGINT/SIGTERM handling: during the timed run, the first signal asks the workload to
    stop (what was recorded is kept); outside it, or on a second signal, KeyboardInterrupt
    unwinds through the context managers, which undo every change."""

    def __init__(self) -> None:
        self.stop_event: threading.Event | None = None
        self.signalled: str | None = None
        self.deferring = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Interrupt:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        self.signalled = signal.Signals(signum).name
        if self.deferring:
            return
        if self.stop_event is not None and not self.stop_event.is_set():
            self.stop_event.set()
            return
        raise KeyboardInterrupt(self.signalled)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """While monitors stop and the results are written, a signal is only noted: unwinding
        there would lose every op recorded (kill -9 still leaves them to `stallbench cleanup`)."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False

    @contextmanager
    def stoppable(self, event: threading.Event) -> Iterator[None]:
        self.stop_event = event
        try:
            yield
        finally:
            self.stop_event = None


def run_plan(plan: Plan, progress: bool = True, log: Callable[[str], None] | None = None
             ) -> list[RunOutcome]:
    """Run every variant x iteration of the plan; returns one outcome per run."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    workload_cls = get_workload(plan.workload)
    for variant in plan.variants:
        env.check_settings(variant)
    for variant in plan.variants:                         # validate before anything changes
        workload_cls.from_options({**plan.workload_options, **variant.workload_options})
    monitor_names = plan.monitors if plan.monitors is not None else default_monitor_names()
    outcomes: list[RunOutcome] = []
    metrics = None
    if plan.until_decided is not None:
        from . import untildecided

        metrics = untildecided.parse_metrics(plan.until_decided)
        if len(plan.variants) < 2:
            raise UsageError("iterations auto compares variants: the plan needs two or more")
    order_rng = random.Random()
    with _Interrupt() as interrupt:
        for iteration in range(plan.iterations):
            for variant in round_order(plan.variants, iteration, order_rng, log):
                workload = workload_cls.from_options({**plan.workload_options,
                                                      **variant.workload_options})
                label = f"{variant.name} {plan.workload} {iteration + 1}/{plan.iterations}"
                outcome = run_one(plan, variant, workload, monitor_names, interrupt, label,
                                  progress, log)
                outcomes.append(outcome)
                log(f"{label}: {outcome.status}"
                    + (f" ({outcome.reason})" if outcome.reason else "") + f" -> {outcome.path}")
                if outcome.status == Status.INTERRUPTED or interrupt.signalled:
                    return outcomes
            if metrics is not None:
                paths = {v.name: [o.path for o in outcomes if o.variant == v.name]
                         for v in plan.variants}
                decision = untildecided.decide(paths, metrics, iteration + 1)
                if decision.decided or iteration + 1 == plan.iterations:
                    log(decision.sentence(plan.iterations))
                    break
    return outcomes


def round_order(variants: list[VariantSettings], iteration: int, rng: random.Random,
                log: Callable[[str], None]) -> list[VariantSettings]:
    """The variants of one interleaved round in a random order (Abedi & Brecht, ICPE 2017: a
    fixed A-then-B order lets whatever follows a run, a cache it warmed or a neighbour it
    woke, fall on one variant only). The first round keeps the plan's order: a plan may rely
    on its first variant running first (a file read into the page cache)."""
    order = list(variants)
    if iteration > 0 and len(order) > 1:
        rng.shuffle(order)
        log(f"round {iteration + 1}: " + ", ".join(v.name for v in order))
    return order


def warmup_for(plan: Plan, workload: Workload) -> float:
    """The plan's warm-up, else the workload's default; the run lasts warm-up + duration."""
    return plan.warmup_s if plan.warmup_s is not None else float(workload.default_warmup_s)


def run_one(plan: Plan, variant: VariantSettings, workload: Workload, monitor_names: list[str],
            interrupt: _Interrupt, label: str, show_progress: bool,
            log: Callable[[str], None]) -> RunOutcome:
    if variant.kernel is not None:                 # booted under QEMU, run in the guest: vm/
        from .vm.host import run_in_guest

        path, status, reason = run_in_guest(plan, variant, workload, monitor_names, interrupt,
                                            log)
        return RunOutcome(path, variant.name, status, reason)
    writer: RunWriter | None = None
    with Journal() as journal:
        try:
            with env.environment(variant, journal, workload, plan.results) as state:
                writer = RunWriter(plan.results, variant.name, workload.name, workload.params())
                unfinished = journal.push("finalize_run", path=str(writer.path.resolve()))
                warmup = warmup_for(plan, workload)
                writer.meta.ops_declared = list(workload.ops)
                writer.meta.warmup_s = warmup
                writer.meta.duration_planned_s = plan.duration_s + warmup
                ctx = RunContext(run_dir=writer.path, env=state,
                                 duration_s=plan.duration_s + warmup, journal=journal)
                workload.prepare(ctx)
                if variant.drop_caches:
                    note = env.drop_caches(log)
                    if note:
                        writer.note(note)
                _execute(ctx, workload, writer, monitor_names, interrupt, label, show_progress,
                         log, lambda: journal.update(unfinished, t0_ns=ctx.t0_ns))
                journal.forget(unfinished)
            writer.meta.environment = state.metadata
            errors = list(journal.undo_all())
            if errors:
                writer.note("cleanup problems: " + "; ".join(errors))
                for error in errors:
                    log(f"stallbench: cleanup: {error}")
            meta = writer.meta
            if meta.status == Status.RUNNING:
                meta.status = Status.COMPLETE
            writer.finalize(meta.status, meta.reason)
            return RunOutcome(writer.path, variant.name, meta.status, meta.reason)
        except KeyboardInterrupt:
            if writer is not None:
                writer.finalize(Status.INTERRUPTED, f"stopped by {interrupt.signalled or 'signal'}"
                                " before the run finished")
                return RunOutcome(writer.path, variant.name, Status.INTERRUPTED,
                                  writer.meta.reason)
            raise
        except UsageError as exc:
            if writer is not None:
                writer.finalize(Status.FAILED, str(exc))   # the run.json says what was wrong
            raise
        except Exception as exc:
            if writer is None:
                raise
            reason = f"{type(exc).__name__}: {exc}"
            writer.finalize(Status.FAILED, reason)
            return RunOutcome(writer.path, variant.name, Status.FAILED, reason)


def _execute(ctx: RunContext, workload: Workload, writer: RunWriter, monitor_names: list[str],
             interrupt: _Interrupt, label: str, show_progress: bool,
             log: Callable[[str], None], clock_started: Callable[[], None]) -> None:
    ctx.start_clock()
    clock_started()
    monitors = _start_monitors(ctx, monitor_names, writer, log)
    result = None
    load_at_start = machineload.snapshot()
    try:
        with interrupt.stoppable(ctx.stop):
            with Progress(label, ctx.duration_s, list(workload.ops),
                          enabled=show_progress) as display:
                result = workload.run(ctx, display.update)
        ctx.workload_ended()
        writer.meta.machine_load = machineload.between(load_at_start, machineload.snapshot())
    finally:
        with interrupt.deferred():
            ctx.workload_ended()     # (a second call does nothing)
            _stop_monitors(monitors, writer, log)
            if result is not None:
                _store_result(ctx, writer, result)
            shutil.rmtree(ctx.run_dir / ".spool", ignore_errors=True)
    writer.meta.notes.extend(ctx.notes)
    status = Status(result.status)
    if interrupt.signalled and status in (Status.COMPLETE, Status.INTERRUPTED):
        status, result.reason = Status.INTERRUPTED, f"stopped by {interrupt.signalled}"
    if status != Status.COMPLETE:
        writer.meta.status = status
        writer.meta.reason = result.reason


def _store_result(ctx: RunContext, writer: RunWriter, result) -> None:
    meta = writer.meta
    meta.duration_s = result.rusage.get("elapsed_s", ctx.duration_s)
    samples = writer.write_ops(result.batches)
    meta.samples = {**{op: 0 for op in meta.ops_declared}, **samples}
    meta.counted = result.counted
    meta.rusage = result.rusage
    meta.workload_summary = result.extra
    writer.save()


def _start_monitors(ctx: RunContext, names: list[str], writer: RunWriter,
                    log: Callable[[str], None]) -> list[tuple[str, Monitor]]:
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


def _stop_monitors(monitors: list[tuple[str, Monitor]], writer: RunWriter,
                   log: Callable[[str], None]) -> None:
    for name, monitor in reversed(monitors):
        try:
            result = monitor.stop()
        except Exception as exc:  # noqa: BLE001
            writer.meta.monitors[name] = {"status": MonitorStatus.FAILED.value,
                                          "reason": str(exc)}
            log(f"monitor {name} failed: {exc}")
            continue
        for table_name, table in result.tables.items():
            schema = result.schemas.get(table_name)
            writer.write_monitor(table_name, table,
                                 schema.units(table.column_names) if schema else None)
        if result.folded_stacks:
            (writer.path / STACKS_FILE).write_text(result.folded_stacks)
        writer.meta.monitors[name] = {"status": MonitorStatus.OK.value, **result.summary}

