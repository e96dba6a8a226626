"""Formatting shared by the renderers: units, changes, intervals, words for missing values."""

from __future__ import annotations

import math
from typing import Any

from ..analysis.bands import Shift
from ..analysis.display import TimeUnit, choose_time_unit, format_ns
from ..analysis.intervals import Change, Verdict
from ..analysis.quantiles import RATE, Stat, latency_stats, row_stats
from ..analysis.summary import SETTLED, STEADY, TOO_SHORT, UNSETTLED
from ..analysis.transient import MIN_DATA_BLOCKS
from ..compare.changes import NO_SAMPLES, NOT_RESOLVED
from ..compare.model import Comparison, OpComparison, OpStats, RunInfo
from ..compare.verdicts import INTERVAL_HOLDS_ZERO, more_runs_decide, why

NOT_RESOLVABLE = "n/r"
# the default set (analysis/quantiles.py declares the statistics)
STAT_LABELS = {s.key: s.label for s in row_stats()}
JSON_KEYS = {s.key: s.json_key for s in (*latency_stats(), row_stats()[0])}


_BAND_UNITS = ("ns", "µs", "ms", "s", "ks")
_NOTE_STATS = ("p50", "p99", "p999", "rate")   # the A/A prior named in the one-run note


def band_label(exponent: int) -> str:
    """'512 µs' for 2**19 ns, '1 ms' for 2**20 ns: 1024 is the step between units, as in bcc's
    histograms ('512 µs' is 524 µs)."""
    unit = min(exponent // 10, len(_BAND_UNITS) - 1)
    return f"{2 ** (exponent - 10 * unit)} {_BAND_UNITS[unit]}"


def band_range_label(first: int, last: int) -> str:
    """'512 µs–1 ms' for bands 19..19, '16–64 ms' for bands 24..25."""
    low, high = band_label(first), band_label(last + 1)
    low_value, low_unit = low.split(" ")
    high_value, high_unit = high.split(" ")
    if low_unit == high_unit:
        return f"{low_value}–{high_value} {high_unit}"
    return f"{low}–{high}"


def shift_sentence(shift: Shift | None, op: str) -> str | None:
    """'8.1% of read ops moved from 512 µs–1 ms into 16–64 ms' (None: nothing worth naming)."""
    if shift is None or not shift.called or not shift.lost or not shift.gained:
        return None
    return (f"{shift.amount:.1%} of {op} ops moved from {band_range_label(*shift.lost)} into "
            f"{band_range_label(*shift.gained)}" + (" (mixed)" if shift.mixed else ""))


def op_unit(op: OpComparison) -> TimeUnit:
    """One time unit for the whole table of an op, chosen from its typical values."""
    values = [value for s in op.stats.values() for value in s.values.values() if value]
    return choose_time_unit(values)


def stat_cell(stats: OpStats, stat: str, unit: TimeUnit) -> str:
    """The value of a statistic as shown in tables; words where there is no number."""
    if stats.samples == 0:
        return "0.0" if stat == RATE.key and stats.rate is not None else NO_SAMPLES
    if stat == RATE.key:
        return format_rate(stats.rate)
    if stat in stats.unresolved:
        return f"{NOT_RESOLVABLE} ({stats.unresolved[stat]}≥)"
    return format_ns(stats.values[stat], unit)


def format_rate(rate: float | None) -> str:
    if rate is None or not math.isfinite(rate):
        return "-"
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.2f}" if rate < 10 else f"{rate:.1f}"


def format_count(n: int) -> str:
    return f"{n:,}"


def format_percent(x: float | None) -> str:
    """+ means the number got larger."""
    if x is None or not math.isfinite(x):
        return "-"
    percent = x * 100
    if abs(percent) >= 100:
        return f"{percent:+.0f}%"
    return f"{percent:+.1f}%"


def format_interval(change: Change) -> str:
    if change.low is None or change.high is None or not change.interval_shown:
        return ""
    return f"[{format_percent(change.low)}, {format_percent(change.high)}]"


def change_cell(change: Change | None, no_samples: bool = False) -> tuple[str, str, str]:
    """(change, interval, verdict-or-note) columns of one row; `no_samples`: a side has none."""
    if change is None:
        return "", "", ""
    if change.change is None:
        note = change.note or ""
        if note == NO_SAMPLES or no_samples:
            return "", "", NO_SAMPLES
        if note == NOT_RESOLVED:
            return NOT_RESOLVABLE, "", NOT_RESOLVED
        return "-", "", note
    return format_percent(change.change), format_interval(change), verdict_word(change)


def verdict_word(change: Change) -> str:
    """The verdict column: the verdict and, where it has one, its reason (verdicts.why:
    'unclear (adjusted)', 'worse (behind schedule)'); without a verdict, why there is no
    interval; empty for a row outside the false-discovery budget."""
    if change.verdict == Verdict.INTERVAL_ONLY:
        return ""
    reason = why(change)
    if change.verdict == Verdict.NA:
        return reason or ""
    if reason and reason != INTERVAL_HOLDS_ZERO:
        return f"{change.verdict} ({reason})"
    return change.verdict


def rate_flag(op: OpComparison, candidate: str) -> str:
    """The flag after the rate row's verdict: STARVED (it stopped completing while other ops
    went on) or FEWER OPS (the rate fell by more than the threshold, nothing starved)."""
    if op.starved.get(candidate):
        return "STARVED"
    if op.rate_fell.get(candidate):
        return "FEWER OPS"
    return ""


def json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def method_line(comparison: Comparison) -> str:
    """The interval method and the accuracy of the numbers, in one sentence."""
    blocks = sorted({r.block_ns for v in comparison.variants for r in v.runs if r.block_ns})
    block_text = " and ".join(f"{b / 1e9:g} s" if b >= 1e9 else f"{b / 1e6:g} ms"
                              for b in blocks)
    error = comparison.accuracy.get("quantile_relative_error")
    accuracy = (f"; quantiles from log-linear histograms within {error:.1%}, counts, min, max and "
                "mean exact") if error else ""
    return (f"95% intervals: {sorted(set(comparison.method.values()))[0]}"
            + (f" (time blocks of {block_text})" if block_text else "") + accuracy)


def duet_lines(comparison: Comparison) -> list[str]:
    """One line per candidate whose runs were duets with the baseline's (analysis/paired.py)."""
    lines = []
    for label, duet in comparison.duet.items():
        if duet["interval"] == "paired":
            own = duet["pairs"] - 1
            dof = f"{own} degrees of freedom" if own else ""
            if duet.get("profile_dof"):
                profile = f"the duet noise profile's {duet['profile_dof']}"
                dof = f"{dof} and {profile}" if dof else f"{profile} degrees of freedom"
            how = (f"intervals paired: a t interval on the {duet['pairs']} pairs' log ratios "
                   f"({dof}), the change their geometric mean")
        else:
            how = f"intervals {duet['interval']}"
        lines.append(f"DUET: {label} ran at the same time as {comparison.baseline}, each on its "
                     f"own CPUs, in {duet['pairs']} round(s) ({duet['pairs']} duet(s)); {how}")
    return lines


def run_count_notes(comparison: Comparison) -> list[str]:
    """Where the run-to-run spread behind the intervals comes from, and what the number of
    runs per variant means for the verdicts."""
    notes = []
    runs = {v.label: len(v.runs) for v in comparison.variants}
    single = [label for label, n in runs.items() if n == 1]
    profile = comparison.noise_profile
    if profile:
        notes.append(f"run-to-run spread: {profile} as the prior, "
                     + ("with one run of " + ", ".join(single) if single else
                        "combined with the spread measured between these runs"))
    elif single:
        prior = comparison.accuracy.get("run_to_run_prior_sd") or {}
        reach = comparison.accuracy.get("one_run_reach") or {}
        shown = [k for k in prior if k in _NOTE_STATS]
        sds = ", ".join(f"{STAT_LABELS.get(k, k)} {prior[k]:.0%}" for k in shown)
        beyond = ", ".join(f"{STAT_LABELS.get(k, k)} {format_percent(reach[k][0])} to "
                           f"{format_percent(reach[k][1])}" for k in shown if k in reach)
        notes.append(f"one run of {', '.join(single)}: how much separate runs differ is not "
                     "measured, so the intervals assume that each run's level may be off by "
                     f"the standard deviation seen between A/A runs of loaded machines ({sds}; "
                     f"a prior worth {comparison.accuracy.get('prior_dof', 0):g} degrees of "
                     "freedom): with one run a side a change is called only beyond about "
                     f"{beyond} (t at those degrees of freedom times √2 sd, widened by the "
                     "runs' own noise) — run 3 or more iterations per variant, duets where the "
                     "variants differ only per process, or measure this host's spread once "
                     "with `stallbench calibrate PLAN`")
    else:
        notes.append("run-to-run spread: measured between these runs (no noise profile of "
                     "this host and workload; `stallbench calibrate PLAN` makes one)")
    if comparison.profile_problem:
        notes.append(comparison.profile_problem)
    note = warmup_note(comparison)
    if note:
        notes.append(note)
    return notes


def warmup_note(comparison: Comparison) -> str | None:
    """What each variant's runs left out at their start: 'warm-up left out of the statistics
    (...): free the first 0.7 s, found (the level settled: read p50); tight none needed (the
    level was steady from the start)'; None when nothing was stated or looked for."""
    parts = [f"{v.label} {phrase}" for v in comparison.variants
             if (phrase := warmup_phrase(v.runs))]
    if not parts:
        return None
    return ("warm-up left out of the statistics (recorded, shown in the timelines): "
            + "; ".join(parts))


def warmup_phrase(runs: list[RunInfo]) -> str | None:
    """One variant's warm-ups: stated, or found by analysis/transient.py where none was."""
    def span(some: list[RunInfo]) -> str:
        low, high = min(r.warmup_s for r in some), max(r.warmup_s for r in some)
        return f"{low:g} s" if low == high else f"{low:g}-{high:g} s"

    def share(some: list[RunInfo]) -> str:
        return "" if len(some) == len(runs) else f" in {len(some)} of {len(runs)} runs"

    parts = []
    stated = [r for r in runs if r.warmup_found is None and r.warmup_s]
    if stated:
        parts.append(f"the first {span(stated)}, as stated{share(stated)}")
    for outcome, why_so in _FOUND.items():
        some = [r for r in runs if r.warmup_found == outcome]
        if not some:
            continue
        if outcome == SETTLED:
            by = sorted({r.warmup_found_by for r in some if r.warmup_found_by})
            parts.append(f"the first {span(some)}, found{share(some)} ({why_so}"
                         + (f": {', '.join(by)}" if by else "") + ")")
        else:
            least = f"the first {span(some)} (the workload's own)" \
                if any(r.warmup_s for r in some) else "none"
            parts.append(f"{least}{share(some)}, {why_so}")
    return "; ".join(parts) or None


_FOUND = {SETTLED: "the level settled",
          STEADY: "no transient found (the level was steady from the start)",
          UNSETTLED: "no transient found in the first half (the level moved later: see "
                     "NOT STATIONARY)",
          TOO_SHORT: "too short to look for a transient, or to leave one out and keep "
                     f"{MIN_DATA_BLOCKS} time blocks"}


def level_shift_notes(comparison: Comparison) -> list[str]:
    """One sentence per run that mixes two regimes, with what to do."""
    out = []
    for shift in comparison.level_shifts:
        before, after = shift["before"], shift["after"]
        verb = "fell" if after < before else "rose"
        where = f"{shift['variant']} iteration {shift['iteration']}"
        if shift["stat"] == RATE.key:
            levels = f"{RATE.label} {verb} from {format_rate(before)} to {format_rate(after)}"
        else:
            unit = choose_time_unit([before, after])
            levels = (f"{shift['stat']} {verb} from {format_ns(before, unit)} {unit.name} to "
                      f"{format_ns(after, unit)} {unit.name}")
        text = f"{shift['op']} {levels} at {shift['at_ns'] / 1e9:.1f} s in {where}"
        if shift["early"] and shift["suggested_warmup_s"]:
            text += (": the run mixes two regimes (a cold and a warm cache?); use --warmup "
                     f"{shift['suggested_warmup_s']}s, a larger file or a longer run")
        else:
            text += ": the run changed regime part way; see the stalls over time"
        out.append(text)
    return out


def decide_advice(changes: dict[str, Change], stats: tuple[Stat, ...]) -> str | None:
    """'to decide: p99 ~6 runs per variant, ...' for the rows the intervals left unclear."""
    parts = []
    for stat in stats:
        change = changes.get(stat.key)
        if change is None or not more_runs_decide(change):
            continue
        needed = change.iterations_needed
        parts.append(f"{stat.label} ~{needed}" if needed else f"{stat.label} >30")
    if not parts:
        return None
    return ("unclear rows would likely be decided by this many runs per variant (from the "
            "variance seen): " + ", ".join(parts))


def format_seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.2f}"
