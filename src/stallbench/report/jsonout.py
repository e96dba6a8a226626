"""JSON report: every number of the text report, latencies in ns (keys: the comparison
schema, schemas/comparison.schema.json)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ..analysis.intervals import Change
from ..analysis.quantiles import Stat, latency_stats, needed_samples, stat_named
from ..analysis.summary import RESPONSE_SUFFIX
from ..compare.model import Comparison, OpComparison, OpStats
from ..core.version import __version__
from .headline import headline_sections
from .wording import json_number, shift_sentence, verdict_word

SCHEMA_VERSION = 1  # of this JSON document (schemas/comparison.schema.json)


def change_dict(change: Change) -> dict[str, Any]:
    return {
        "change": json_number(change.change),
        "low": json_number(change.low),
        "high": json_number(change.high),
        "p_value": json_number(change.p_value),
        "p_adjusted": json_number(change.p_adjusted),
        "verdict": change.verdict,
        "note": change.note,
        "runs": list(change.runs) if change.runs else None,
        "blocks": list(change.blocks) if change.blocks else None,
        "run_sd": json_number(change.run_sd),
        "run_sd_measured": change.run_sd_measured,
        "interval_shown": change.interval_shown,
        "prior_dof": json_number(change.prior_dof),
        "prior_source": change.prior_source,
        "iterations_needed": change.iterations_needed,
        "verdict_text": verdict_word(change),
    }


def stats_dict(stats: OpStats, latency: tuple[Stat, ...] | None = None) -> dict[str, Any]:
    """One op in one variant; `latency`: its latency statistics (default: the default set)."""
    out: dict[str, Any] = {"samples": stats.samples, "warmup_samples": stats.warmup_samples,
                           "rate": json_number(stats.rate)}
    for stat in latency or latency_stats():
        value = stats.values.get(stat.key)
        out[stat.json_key] = None if stat.key in stats.unresolved else json_number(value)
    out["no_samples"] = stats.samples == 0
    out["not_resolvable"] = {
        stat_named(stat).json_key: {"samples_at_or_beyond": n,
                                    "estimate_ns": stats.values[stat],
                                    "needs_samples": stats.needed.get(stat)}
        for stat, n in stats.unresolved.items()
    }
    out["iterations"] = {
        "samples": stats.iteration_samples,
        "p99_ns": [json_number(v) for v in stats.iteration_p99_ns],
        "p99_spread": json_number(stats.iteration_p99_spread),
    }
    return out


def op_dict(op: OpComparison, comparison: Comparison) -> dict[str, Any]:
    variants: dict[str, Any] = {}
    for label in comparison.labels:
        entry = stats_dict(op.stats[label], comparison.stats[1:])
        if label != comparison.baseline:
            entry["change"] = {stat_named(s).json_key: change_dict(c)
                               for s, c in op.changes[label].items()}
            entry["starved"] = op.starved[label]
            entry["rate_fell"] = op.rate_fell[label]
            entry["slower_probability"] = json_number(op.slower_probability[label])
            shift = op.shift[label]
            entry["shift"] = None if shift is None else {
                "moved": shift.moved, "lost_bands": shift.lost, "gained_bands": shift.gained,
                "lost_share": shift.lost_share, "gained_share": shift.gained_share,
                "sentence": shift_sentence(shift, op.op.removesuffix(RESPONSE_SUFFIX)),
            }
            entry["shift_function"] = asdict(op.shift_curve[label])
        stalls = op.stalls[label]
        entry["stalls"] = {
            "interval_ns": stalls.interval_ns, "threshold_ns": stalls.threshold_ns,
            "episodes": stalls.episodes, "longest_stall": stalls.longest_stall,
            "workers": [{"iteration": w["iteration"],
                         "counts": {str(k): v for k, v in w["counts"].items()},
                         "starved": w["starved"]} for w in stalls.workers],
            "timelines": stalls.timelines,
        }
        entry["bands"] = {"log2_ns_counts": op.bands[label]}
        variants[label] = entry
    return {"kind": op.kind, "variants": variants}


def to_dict(comparison: Comparison) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "stallbench_version": __version__,
        "workload": comparison.workload,
        "baseline": comparison.baseline,
        "candidates": comparison.candidates,
        "sign_convention": "change = candidate / baseline - 1 (+ means the number got larger); "
                           "lower latency is better, higher rate is better",
        "confidence": 0.95,
        "noise": comparison.options.noise,
        "adjustment": comparison.adjustment,
        "method": comparison.method,
        "duet": comparison.duet,
        "accuracy": comparison.accuracy,
        "environment": comparison.environment,
        "level_shifts": comparison.level_shifts,
        "percentiles": [{"stat": s.key, "label": s.label, "key": s.json_key,
                         "probability": s.probability, "needs_samples": needed_samples(
                             s.probability)} for s in comparison.stats if s.probability],
        "headline": [asdict(section, dict_factory=_set_fields)
                     for section in headline_sections(comparison)],
        "decide_hint": comparison.decide_hint,
        "variants": [asdict(v) for v in comparison.variants],
        "ops": {op.op: op_dict(op, comparison) for op in comparison.ops},
        "cpu": {row.name + "_s": {
            "values": {k: json_number(v) for k, v in row.values.items()},
            "change": {k: change_dict(c) for k, c in row.changes.items()},
        } for row in comparison.cpu},
        "where": (comparison.where.to_json() if comparison.where is not None
                  else {"error": comparison.where_error} if comparison.where_error else None),
        "counters": comparison.counters,
        "notes": comparison.notes,
        "noise_profile": comparison.noise_profile,
        "profile_problem": comparison.profile_problem,
        "problems": comparison.problems,
    }


# fields of the table model (tables.py) added after the JSON's headline took its shape: it keeps
# that shape, so they are in it only where they are set
_LATER_FIELDS = frozenset({"title_width", "bar", "lead", "tail", "sentences", "share"})


def _set_fields(items: list[tuple[str, object]]) -> dict[str, object]:
    return {key: value for key, value in items
            if key not in _LATER_FIELDS or value not in (0, "", False, None)}


def render(comparison: Comparison) -> str:
    return json.dumps(to_dict(comparison), indent=1, default=_default) + "\n"


def _default(value: Any) -> Any:
    import numpy as np
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
