"""One run or variant alone (`stallbench show`, `compare` with only a baseline): per-op
statistics from the runs' summaries, as the comparison computes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results.runselect import Resolved
from .loading import load_variant, op_names, op_side
from .model import OpStats, VariantInfo


@dataclass
class RunsSummary:
    label: str
    variant: VariantInfo
    metas: list[dict[str, Any]]
    ops: dict[str, OpStats]


def summarize_runs(resolved: Resolved) -> RunsSummary:
    variant, info = load_variant(resolved)
    ops = {name: op_side(name, variant).stats for name in op_names([variant])}
    return RunsSummary(resolved.label, info, [r.meta for r in resolved.runs], ops)
