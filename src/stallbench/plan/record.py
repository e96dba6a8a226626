"""What a run records of its plan so that runs of many days and hosts read as one history
(run.json `plan`): the plan's hash (the same plan gives the same hash on any host and day), its
file, the variant's settings as plan keys (what `series --by KEY` orders by) and, for a kernel
that `bisect --git` built, its commit and the git tree it came from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..settings.variant import VARIANT_FIELDS, VariantSettings
from .plan import Plan

HASH_LENGTH = 16
# settings that say where or on which host, not what was run: left out of the settings and hash
_PLACE_KEYS = ("name", "workload_options", "work_dir", "keep_image", "hosts", "boot")


def variant_settings(variant: VariantSettings) -> dict[str, Any]:
    """The variant's settings that differ from their defaults, by plan key, as JSON values."""
    out: dict[str, Any] = {}
    for f in VARIANT_FIELDS:
        value = getattr(variant, f.target)
        if f.name in _PLACE_KEYS or not f.is_set(value):
            continue
        out[f.name] = str(value) if isinstance(value, Path) else value
    return out


def plan_hash(plan: Plan) -> str:
    """sha256 (first HASH_LENGTH hex digits) of what the plan runs: workload, options, length,
    warm-up and each variant's name, settings and options (not iterations, hosts or paths)."""
    content = {"workload": plan.workload, "options": plan.workload_options,
               "duration_s": plan.duration_s, "warmup_s": plan.warmup_s,
               "variants": [{"name": v.name, "options": v.workload_options,
                             **variant_settings(v)} for v in plan.variants]}
    text = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def plan_record(plan: Plan, variant: VariantSettings) -> dict[str, Any]:
    """run.json `plan`: {hash, file, settings} and, for a kernel built from a git commit
    (bisect/gitkernels.py: RESULTS/kernels/<commit>/build.json), {commit, git}."""
    record: dict[str, Any] = {"hash": plan_hash(plan),
                              "file": str(plan.source.resolve()) if plan.source else None,
                              "settings": variant_settings(variant)}
    if variant.kernel is not None:
        try:
            build = json.loads((Path(variant.kernel) / "build.json").read_text())
        except (OSError, ValueError):
            build = None
        if isinstance(build, dict) and isinstance(build.get("commit"), str):
            record["commit"] = build["commit"]
            record["git"] = build.get("git")
    return record
