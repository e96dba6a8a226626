"""schemas/plan.schema.json, generated from the option tables that planfile.py's reader uses
(`make cli-docs`; tests/core/test_options_schema.py holds the committed file equal to it)."""

from __future__ import annotations

from typing import Any

from ..core.options import json_schema
from ..core.version import schema_id
from ..settings.variant import VARIANT_FIELDS
from ..workloads import available_workloads, get_workload
from .plan import PLAN_FIELDS
from .planfile import OTHER_TOP_KEYS


def plan_json_schema() -> dict[str, Any]:
    """schemas/plan.schema.json, from the tables (tests/plan/test_plan_schema.py compares them):
    what the reader accepts, so a key it refuses fails validation too (each workload's option
    table names its keys, chosen by the plan's `workload`)."""
    from ..settings.hosts import BOOT_SCHEMA
    from ..settings.shapes import OPTION_KEY_RE

    workloads = available_workloads()
    variant = json_schema(VARIANT_FIELDS)
    variant["boot"] = BOOT_SCHEMA
    properties = json_schema(PLAN_FIELDS + OTHER_TOP_KEYS)
    properties["workload"] = {"enum": workloads}
    by_workload = []
    for name in workloads:
        ref = {"$ref": f"#/$defs/options-{name}"}
        by_workload.append({
            "if": {"required": ["workload"], "properties": {"workload": {"const": name}}},
            "then": {"properties": {"options": ref, "workload_options": ref, "variants": {
                "items": {"properties": {"workload_options": ref}}}}}})
    auto = {"required": ["iterations"], "properties": {"iterations": {"const": "auto"}}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id("plan.schema.json"),
        "title": "stallbench plan file (TOML, as parsed)",
        "description": "stallbench run --plan PLAN.toml. Keys mirror the command-line flags; "
                       "unknown keys are refused. Sizes are strings like 512M or integers in "
                       "bytes, durations strings like 20s or numbers of seconds.",
        "type": "object", "required": ["workload", "variants"], "additionalProperties": False,
        "properties": properties,
        "allOf": [
            *by_workload,
            {"not": {"required": ["options", "workload_options"]}},
            {"if": auto, "then": {"required": ["metrics"]},
             "else": {"not": {"anyOf": [{"required": ["metrics"]},
                                        {"required": ["max_iterations"]}]}}},
        ],
        "$defs": {
            "size": {"oneOf": [{"type": "string", "pattern": "^[0-9.]+ ?[KMGTkmgt]?i?[Bb]?$"},
                               {"type": "integer", "minimum": 1}]},
            "duration": {"oneOf": [{"type": "string"},
                                   {"type": "number", "exclusiveMinimum": 0}]},
            "options": {"type": "object",
                        "propertyNames": {"pattern": OPTION_KEY_RE.pattern}},
            "variant": {"type": "object", "required": ["name"], "additionalProperties": False,
                        "properties": variant},
            **{f"options-{name}": _options_schema(name) for name in workloads},
        },
    }


def _options_schema(workload: str) -> dict[str, Any]:
    """A workload's option table: its keys, as written with underscores or dashes."""
    properties: dict[str, Any] = {}
    for f in get_workload(workload).option_fields():
        for key in dict.fromkeys((f.name, f.name.replace("_", "-"))):
            properties[key] = dict(f.schema)
    return {"type": "object", "additionalProperties": False, "properties": properties}
