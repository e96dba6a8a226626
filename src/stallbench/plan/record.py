"""What a run records of its plan so that runs of many days and hosts read as one history and
the result can be run again (run.json `plan`): the plan's hash (the same plan gives the same
hash on any host and day), its file and its text as it ran (a run from flags: the plan its
flags make, plan_text), the variant's settings as plan keys (what `series --by KEY` orders by),
a kernel variant's identity (vm/kernel.py kernel_identity: the file's name and sha256, a
build's config hash) and, for a kernel that `bisect --git` built, its commit and the git tree it
came from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..core import tomlwrite
from ..settings.variant import VARIANT_FIELDS, VariantSettings
from ..vm.kernel import kernel_identity
from .plan import Plan

HASH_LENGTH = 16
# settings that say where or on which host, not what was run: left out of the settings and hash
_PLACE_KEYS = ("name", "workload_options", "work_dir", "keep_image", "hosts", "boot")
# a variant's keys that only a fleet reads: a plan made from flags never has them
_FLEET_KEYS = ("hosts", "boot")


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


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def plan_table(plan: Plan) -> dict[str, Any]:
    """The plan as the keys of a plan file (what load_plan reads back to the same plan)."""
    table: dict[str, Any] = {"workload": plan.workload, "duration": plan.duration_s,
                             "iterations": plan.iterations}
    if plan.warmup_s is not None:
        table["warmup"] = plan.warmup_s
    if plan.duet:
        table["duet"] = True
    if plan.monitors is not None:
        table["monitors"] = list(plan.monitors)
    if plan.workload_options:
        table["workload_options"] = {k: _plain(v) for k, v in plan.workload_options.items()}
    variants = []
    for variant in plan.variants:
        entry = {f.name: _plain(getattr(variant, f.target)) for f in VARIANT_FIELDS
                 if f.name not in (*_FLEET_KEYS, "workload_options")
                 and (f.name == "name" or f.is_set(getattr(variant, f.target)))}
        if variant.workload_options:
            entry["workload_options"] = {k: _plain(v)
                                         for k, v in variant.workload_options.items()}
        variants.append(entry)
    table["variants"] = variants
    return table


def plan_text(plan: Plan) -> str:
    """The plan's text as it runs: its file's as read, else the plan file its flags make."""
    if plan.text is not None:
        return plan.text
    return tomlwrite.dumps(plan_table(plan), header=f"stallbench run {plan.workload}: the "
                                                    "plan its flags made")


def plan_record(plan: Plan, variant: VariantSettings) -> dict[str, Any]:
    """run.json `plan`: {hash, file, text, settings}, for a kernel variant its identity
    {kernel: {file, sha256, config_sha256}} and, for a kernel built from a git commit
    (bisect/gitkernels.py: RESULTS/kernels/<commit>/build.json), {commit, git}."""
    record: dict[str, Any] = {"hash": plan_hash(plan),
                              "file": str(plan.source.resolve()) if plan.source else None,
                              "text": plan_text(plan),
                              "settings": variant_settings(variant)}
    if variant.kernel is not None:
        record["kernel"] = kernel_identity(variant.kernel)
        try:
            build = json.loads((Path(variant.kernel) / "build.json").read_text())
        except (OSError, ValueError):
            build = None
        if isinstance(build, dict) and isinstance(build.get("commit"), str):
            record["commit"] = build["commit"]
            record["git"] = build.get("git")
    return record
