"""Run a plan: for each iteration, for each variant (interleaved rounds, each in a random order
from a seed each run records, so that drift on a noisy machine spreads evenly): journal ->
environment -> prepare -> drop caches -> clock -> monitors -> workload -> monitors stop -> store
-> environment down -> finalize."""

from __future__ import annotations

import os
import random
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import env
from ..core import machineload
from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.journal import Journal, state_dir
from ..core.journaltrust import refuse_after_a_killed_run
from ..monitors import default_monitor_names
from ..plan.plan import Plan, VariantSettings
from ..plan.record import plan_record
from ..results.runmeta import Status
from ..results.store import RunWriter
from ..workloads import Workload
from . import duet
from .job import Interrupt, RunJob
from .monitorrun import start_monitors, stop_monitors
from .progress import Progress
from .undo import undo_kinds


@dataclass
class RunOutcome:
    path: Path
    variant: str
    status: Status
    reason: str | None


def check_plan(plan: Plan) -> None:
    """What the machine and the plan's settings must allow, checked before anything changes
    (UsageError, one line): no killed run's changes left, each variant's settings, a kernel
    variant's QEMU and kernel file, each variant's workload options."""
    refuse_after_a_killed_run(state_dir())
    for variant in plan.variants:
        env.check_settings(variant)
        if variant.kernel is not None:
            from ..vm.checks import check_vm_settings  # the rest is checked inside the guest

            check_vm_settings(variant)
    plan.check_workloads()


def run_plan(plan: Plan, progress: bool = True, log: Callable[[str], None] | None = None
             ) -> list[RunOutcome]:
    """Run every variant x iteration of the plan; returns one outcome per run."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    check_plan(plan)                                      # before anything changes
    monitor_names = plan.monitors if plan.monitors is not None else default_monitor_names()
    outcomes: list[RunOutcome] = []
    metrics = None
    if plan.until_decided is not None:
        from . import untildecided

        metrics = untildecided.parse_metrics(plan.until_decided)
        if len(plan.variants) < 2:
            raise UsageError("iterations auto compares variants: the plan needs two or more")
    if plan.duet:
        duet.check_plan(plan)
        log(f"duet: each round runs {', '.join(v.name for v in plan.variants)} at the same "
            "time, each pinned to its own CPUs")
    seed = random.SystemRandom().getrandbits(32)
    order_rng = random.Random(seed)
    # a duet's CPU sets rotate by round from a random start, so that over rounds and over
    # invocations no variant keeps CPU 0 (which takes more of the interrupts)
    cpu_offset = order_rng.randrange(len(plan.variants)) if plan.duet else 0
    with Interrupt() as interrupt:
        for iteration in range(plan.iterations):
            if plan.duet:
                done = run_duet_round(plan, iteration, monitor_names, interrupt,
                                      log, cpu_offset)
                outcomes.extend(done)
                if any(o.status == Status.INTERRUPTED for o in done) or interrupt.signalled:
                    return outcomes
            order = [] if plan.duet else round_order(plan.variants, iteration, order_rng, log)
            for position, variant in enumerate(order):
                workload = plan.workload_of(variant)
                label = f"{variant.name} {plan.workload} {iteration + 1}/{plan.iterations}"
                outcome = run_one(RunJob(
                    plan, variant, workload, monitor_names, interrupt, label, log, progress,
                    round_record={"seed": seed, "round": iteration + 1,
                                  "position": position + 1, "of": len(order)}))
                outcomes.append(outcome)
                log(f"{label}: {outcome.status}"
                    + (f" ({outcome.reason})" if outcome.reason else "") + f" -> {outcome.path}")
                if outcome.status == Status.INTERRUPTED or interrupt.signalled:
                    if not any(o.status == Status.INTERRUPTED for o in outcomes):
                        # the signal met a run that ended otherwise (failed, or complete
                        # just before): the caller still stops, as for any Ctrl-C
                        raise KeyboardInterrupt(interrupt.signalled or "signal")
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
    woke, fall on one variant only), the first round too: in a series of single runs the
    plan's order would make the machine's drift over the plan a step along the points (issue
    45: 8 identical variants, 1 run each, called a +7% change point in two of four plans).
    Each run records the seed (run.json round_order), so the order can be replayed."""
    order = list(variants)
    if len(order) > 1:
        rng.shuffle(order)
        log(f"round {iteration + 1}: " + ", ".join(v.name for v in order))
    return order


def run_duet_round(plan: Plan, iteration: int,
                   monitor_names: list[str], interrupt: Interrupt,
                   log: Callable[[str], None], cpu_offset: int = 0) -> list[RunOutcome]:
    """One duet round (duet.py): every variant at the same time, each in a thread of this
    process that pins itself and its workers to the variant's CPUs; signals reach the main
    thread, which waits here, stops the timed phases (interrupt) or the barriers, and lets
    every side unwind its own journal."""
    variants = plan.variants
    cpus = duet.assign_cpus(len(variants), iteration + cpu_offset, duet.available_cpus())
    drops = variants[0].drop_caches

    def drop() -> str | None:
        return env.drop_caches(log)

    round_ = duet.DuetRound(iteration + 1, variants, cpus, drop if drops else None,
                            duet.slots(len(variants), iteration + cpu_offset))
    log(f"duet round {iteration + 1}/{plan.iterations}: " + ", ".join(
        f"{v.name} on CPU {','.join(map(str, c))}" for v, c in zip(variants, cpus, strict=True)))
    results: dict[str, RunOutcome | BaseException] = {}

    def side(variant: VariantSettings, chosen: list[int]) -> None:
        try:
            os.sched_setaffinity(0, set(chosen))   # this thread, and all it starts
            workload = plan.workload_of(variant)
            label = f"{variant.name} {plan.workload} {iteration + 1}/{plan.iterations} (duet)"
            results[variant.name] = run_one(RunJob(
                plan, variant, workload, monitor_names, interrupt, label, log,
                seat=duet.DuetSeat(round_, chosen)))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            round_.abort()
            results[variant.name] = exc

    threads = [threading.Thread(target=side, args=(v, c), name=f"duet-{v.name}")
               for v, c in zip(variants, cpus, strict=True)]
    # started in a random order: whatever the first thread of a round gets first (the GIL
    # after each barrier, its environment set up before the other's) falls on every variant
    random.shuffle(threads)
    for thread in threads:
        thread.start()
    interrupted = False
    while any(t.is_alive() for t in threads):
        try:
            for thread in threads:
                thread.join(0.2)
        except KeyboardInterrupt:        # outside the timed phase: every side unwinds
            interrupted = True
            round_.abort()
            for event in list(interrupt.stop_events):
                event.set()
    outcomes = []
    for variant in variants:
        result = results.get(variant.name)
        if isinstance(result, RunOutcome):
            outcomes.append(result)
            log(f"{variant.name} {plan.workload} {iteration + 1}/{plan.iterations}: "
                f"{result.status}" + (f" ({result.reason})" if result.reason else "")
                + f" -> {result.path}")
        elif isinstance(result, UsageError):
            raise result
        elif isinstance(result, BaseException) and not isinstance(result, KeyboardInterrupt):
            raise result
    if interrupted and not any(o.status == Status.INTERRUPTED for o in outcomes):
        raise KeyboardInterrupt(interrupt.signalled or "signal")
    return outcomes


def warmup_for(plan: Plan, workload: Workload) -> float:
    """The plan's warm-up, else the workload's default; the run lasts warm-up + duration."""
    return plan.warmup_s if plan.warmup_s is not None else float(workload.default_warmup_s)


def run_one(job: RunJob) -> RunOutcome:
    """One run of one variant, here or (a kernel variant) in a guest booted for it."""
    if job.variant.kernel is not None:             # booted under QEMU, run in the guest: vm/
        from .vmhost import run_in_guest

        path, status, reason = run_in_guest(job)
        return RunOutcome(path, job.variant.name, status, reason)
    plan, variant, workload, in_duet = job.plan, job.variant, job.workload, job.seat
    interrupt = job.interrupt
    writer: RunWriter | None = None
    with Journal(kinds=undo_kinds()) as journal:
        try:
            with env.environment(variant, journal, workload, plan.results,
                                 own_dir=in_duet.round.slot_dir(variant.name) if in_duet
                                 else None) as state:
                writer = RunWriter(plan.results, variant.name, workload.name, workload.params())
                writer.meta.plan = plan_record(plan, variant)
                writer.meta.round_order = job.round_record
                unfinished = journal.push("finalize_run", path=str(writer.path.resolve()))
                before_run = None
                if in_duet is not None:
                    in_duet.round.register(variant.name, writer.path)
                    state.child_setup = duet.pinned(in_duet.cpus, state.child_setup)
                    before_run = in_duet.round.wait_start
                warmup = warmup_for(plan, workload)
                writer.meta.ops_declared = list(workload.ops)
                writer.meta.warmup_s = warmup
                writer.meta.warmup_found = plan.warmup_s is None
                writer.meta.duration_planned_s = plan.duration_s + warmup
                ctx = RunContext(run_dir=writer.path, env=state,
                                 duration_s=plan.duration_s + warmup, journal=journal)
                workload.prepare(ctx)
                if in_duet is not None:
                    note = in_duet.round.wait_prepared()      # the round's one cache drop
                elif variant.drop_caches:
                    note = env.drop_caches(job.log)
                else:
                    note = None
                if note:
                    writer.note(note)
                _execute(job, ctx, writer, lambda: journal.update(unfinished, t0_ns=ctx.t0_ns),
                         before_run)
                if in_duet is not None:
                    writer.meta.duet = in_duet.round.record(variant.name)
                journal.forget(unfinished)
            writer.meta.environment = state.metadata
            errors = list(journal.undo_all())
            if errors:
                writer.note("cleanup problems: " + "; ".join(errors))
                for error in errors:
                    job.log(f"stallbench: cleanup: {error}")
            meta = writer.meta
            if meta.status == Status.RUNNING:
                meta.status = Status.COMPLETE
            writer.finalize(meta.status, meta.reason)
            return RunOutcome(writer.path, variant.name, meta.status, meta.reason)
        except (KeyboardInterrupt, threading.BrokenBarrierError) as exc:
            if in_duet is not None:
                in_duet.round.abort()
            if isinstance(exc, threading.BrokenBarrierError):
                status = Status.INTERRUPTED if interrupt.signalled else Status.FAILED
                reason = (f"stopped by {interrupt.signalled} before the run started"
                          if interrupt.signalled else "a duet partner failed before the start")
                if writer is None:
                    return RunOutcome(Path(plan.results), variant.name, status, reason)
                writer.finalize(status, reason)
                return RunOutcome(writer.path, variant.name, status, reason)
            if writer is not None:
                writer.finalize(Status.INTERRUPTED, f"stopped by {interrupt.signalled or 'signal'}"
                                " before the run finished")
                return RunOutcome(writer.path, variant.name, Status.INTERRUPTED,
                                  writer.meta.reason)
            raise
        except UsageError as exc:
            if in_duet is not None:
                in_duet.round.abort()
            if writer is not None:
                writer.finalize(Status.FAILED, str(exc))   # the run.json says what was wrong
            raise
        except Exception as exc:
            if in_duet is not None:
                in_duet.round.abort()
            if writer is None:
                raise
            reason = f"{type(exc).__name__}: {exc}"
            writer.finalize(Status.FAILED, reason)
            return RunOutcome(writer.path, variant.name, Status.FAILED, reason)


def _execute(job: RunJob, ctx: RunContext, writer: RunWriter, clock_started: Callable[[], None],
             before_run: Callable[[], None] | None = None) -> None:
    workload, interrupt, log = job.workload, job.interrupt, job.log
    ctx.start_clock()
    clock_started()
    monitors = start_monitors(ctx, job.monitors, writer, log)
    result = None
    try:
        if before_run is not None:
            before_run()                # a duet: every side's monitors run, start together
        load_at_start = machineload.snapshot()
        with interrupt.stoppable(ctx.stop):
            with Progress(job.label, ctx.duration_s, list(workload.ops),
                          enabled=job.show_progress) as display:
                result = workload.run(ctx, display.update)
        ctx.workload_ended()
        writer.meta.machine_load = machineload.between(load_at_start, machineload.snapshot())
        dropped = machineload.others_dropped_note(writer.meta.machine_load)
        if dropped:
            writer.note(dropped)
    finally:
        with interrupt.deferred():
            ctx.workload_ended()     # (a second call does nothing)
            stop_monitors(monitors, writer, log)
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
