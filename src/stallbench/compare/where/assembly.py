"""The where section built: for each variant, what its runs' monitors left (variantdata.py)
handed to the steps of analysis/where/ in the order that package's face lists them (and
analysis/montables.py for the tables' totals), then each candidate's counters and one-line
explanations against the baseline.

`build` returns the typed WhereSection (the comparison's `where`), `explain` its JSON form.
"""

from __future__ import annotations

from ...analysis import monitornames
from ...analysis.where import section as ws
from ...analysis.where.counters import counter_rows
from ...analysis.where.delays import role_delays, role_io
from ...analysis.where.device import device_vs_above
from ...analysis.where.disk import disk_summaries
from ...analysis.where.explanations import (
    explanations,
    impossible_warnings,
    off_cpu_warnings,
    variant_lines,
)
from ...analysis.where.growth import TailChange
from ...analysis.where.histograms import histograms
from ...analysis.where.longest import longest_per_kind, merge_runs
from ...analysis.where.mechanism import limit_warning
from ...analysis.where.oncpu import RoleSteps, cpu_changes, cpu_steps, role_cpu
from ...analysis.where.pressure import pressure
from ...analysis.where.stacks import blocked_stacks
from ...analysis.where.tracedstalls import merge as merge_stalls
from ...analysis.where.tracedstalls import op_stalls
from ...monitors.counters import COUNTERS
from ...results.store import Run
from .profiles import add_profiles
from .slowopdata import SLOW_FACTOR, slow_ops
from .stalldata import stalls_in_ops
from .variantdata import VariantData


def explain(baseline_runs: list[Run], candidate_runs_by_label: dict[str, list[Run]],
            baseline_label: str, tail_changes: dict[str, dict[str, TailChange]]
            ) -> dict:
    """The "where did the time go" section as JSON (see `build`)."""
    return build(baseline_runs, candidate_runs_by_label, baseline_label, tail_changes).to_json()


def build(baseline_runs: list[Run], candidate_runs_by_label: dict[str, list[Run]],
          baseline_label: str, tail_changes: dict[str, dict[str, TailChange]]
          ) -> ws.WhereSection:
    """The "where did the time go" section.

    `tail_changes[label][op]` is (statistic, relative change against the baseline: 0.31 =
    +31%, whether the comparison decided it) as the comparison computed it, the statistic from
    analysis/where/growth.py `growth`; ops whose tail or mean grew get a one-line explanation,
    marked "if real" where the change was not decided.
    """
    variants: dict[str, list[Run]] = {baseline_label: baseline_runs, **candidate_runs_by_label}
    data = {label: VariantData(runs) for label, runs in variants.items()}
    base = data[baseline_label]
    steps_of: dict[str, dict[str, list[RoleSteps]]] = {}
    section = ws.WhereSection(baseline=baseline_label, variants=list(variants),
                              slow_factor=SLOW_FACTOR)
    for label, variant in data.items():
        for monitor, reason in variant.skipped.items():
            section.skipped.append(ws.Skipped(label, monitor, reason))
        if variant.used(monitornames.TRACE_FULL):
            section.warnings.append(
                f"{label}: trace-full ran (block requests and every syscall traced); it perturbs "
                "the run, so its latencies are not comparable with untraced runs")
        facts = section.facts[label] = variant.facts()
        warning = limit_warning(label, facts)
        if warning:
            section.warnings.append(warning)
        section.psi[label] = pressure(variant.psi(), variant.seconds)
        section.diskstats[label] = disk_summaries(variant.diskstats())
        delays = variant.delays()
        section.delay[label] = role_delays(delays, variant.ops_by_role())
        steps_of[label] = cpu_steps(delays)
        section.cpu[label] = role_cpu(steps_of[label])
        section.warnings += impossible_warnings(label, section.delay[label])
        section.warnings += off_cpu_warnings(label, section.delay[label])
        totals = {op: (n, total) for op, (n, total, _) in variant.op_totals.items()}
        section.stalls[label] = op_stalls(
            merge_stalls(stalls_in_ops(run) for run in variant.runs), totals)
        section.device[label] = device_vs_above(
            section.diskstats[label], totals, len(variant.runs),
            role_io(section.delay[label]), variant.roles_of_ops(), facts,
            {op: {kind: stall.share or 0.0 for kind, stall in kinds.items()}
             for op, kinds in section.stalls[label].items()},
            section.device.get(baseline_label) if label != baseline_label else None)
        per_run, missing = variant.delay_max()
        longest = longest_per_kind(per_run)
        if longest:
            section.delay_max[label] = longest
        dropped = sorted(kind for kind, entry in merge_runs(per_run).items()
                         if entry["impossible"])
        if dropped:
            section.warnings.append(
                f"{label}: taskstats accounted more {', '.join(dropped)} delay to some tasks "
                "than they lived, or a longest wait longer than the run or than any op of "
                "the worker's run: those tasks' maxima are not shown (a kernel accounting "
                "fault, not a measurement)")
        if missing:
            section.skipped.append(ws.Skipped(label, "delay maximum", missing))
        section.stacks[label] = blocked_stacks(variant.folded(), variant.trace_dstate())
        section.histograms[label] = histograms(variant.trace_durations())
        section.slow_ops[label] = slow_ops(variant.runs, variant.op_totals)
        if label == baseline_label:
            continue
        base_deltas, cand_deltas = base.counter_deltas(), variant.counter_deltas()
        missing_in = [name for name, deltas in ((baseline_label, base_deltas),
                                                (label, cand_deltas)) if not deltas]
        if missing_in and (base_deltas or cand_deltas):
            # one side without the counters monitor would read as every counter -> 0
            section.warnings.append(
                f"counters not collected in {', '.join(missing_in)}: {baseline_label} and "
                f"{label} are not compared on kernel counters")
        section.cpu_changes[label] = cpu_changes(steps_of[baseline_label], steps_of[label])
        section.counters[label] = [] if missing_in else counter_rows(
            base_deltas, cand_deltas, base.seconds, variant.seconds, base.op_count,
            variant.op_count, COUNTERS.unit)
        section.explanations += explanations(
            label, tail_changes.get(label, {}), section.slow_ops[label], section.delay[label],
            variant.roles_of_ops(), section.delay_max.get(label, {}),
            section.delay_max.get(baseline_label, {}), facts, section.device[label],
            section.delay.get(baseline_label, []), section.facts.get(baseline_label),
            section.stalls[label], section.stalls.get(baseline_label, {}),
            section.device.get(baseline_label, {}),
            totals, {op: (n, total) for op, (n, total, _) in base.op_totals.items()},
            section.cpu[label], section.cpu[baseline_label], section.cpu_changes[label])
        section.explanations += variant_lines(
            label, section.psi.get(label, {}), section.psi.get(baseline_label, {}),
            section.stacks[label], section.stacks.get(baseline_label))
    add_profiles(section, data, baseline_label, tail_changes)
    return section
