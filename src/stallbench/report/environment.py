"""Render the environment diff (analysis/environment.py) as text lines; computes nothing."""

from __future__ import annotations

import textwrap
from typing import Any

MAX_ROWS = 20


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ") \
        or [""]


def _values(values: dict[str, str]) -> str:
    return " vs ".join(f"{value} ({label})" for label, value in values.items())


def render_lines(diff: dict[str, Any] | None, width: int = 100) -> list[str]:
    """The lines printed under the comparison's header; [] when there is nothing to say."""
    if not diff or not diff.get("compared"):
        return []      # nothing recorded anywhere (imports, older runs): nothing to say
    lines: list[str] = []
    differences = diff.get("differences") or []
    unplanned = [d for d in differences if not d["planned"]]
    planned = [d for d in differences if d["planned"]]
    for d in unplanned:
        if d["must_equal"]:
            lines += _wrap(f"WARNING: {d['key']} differs: {_values(d['values'])}; it should be "
                           "equal between variants, so the comparison may measure the machine, "
                           "not the change", width, "")
    if len(diff.get("compared") or []) >= 2:
        if unplanned:
            lines.append(f"environment: {len(unplanned)} difference(s) besides the plan's "
                         f"settings (of {diff.get('facts', 0)} facts recorded):")
            for d in unplanned[:MAX_ROWS]:
                lines += _wrap(f"{d['key']}: {_values(d['values'])}", width)
            if len(unplanned) > MAX_ROWS:
                lines.append(f"  … and {len(unplanned) - MAX_ROWS} more "
                             "(environment.inventory in each run.json)")
        else:
            lines.append(f"environment: the same in all {diff.get('facts', 0)} facts recorded "
                         "besides the plan's settings")
        if planned:
            lines += _wrap("also differed, as the plan set: "
                           + ", ".join(d["key"] for d in planned[:MAX_ROWS])
                           + (" …" if len(planned) > MAX_ROWS else ""), width)
    for label, keys in (diff.get("within") or {}).items():
        lines += _wrap(f"WARNING: the runs of {label} differed among themselves in: "
                       + ", ".join(keys), width, "")
    if diff.get("missing"):
        lines += _wrap("environment not recorded for " + ", ".join(diff["missing"])
                       + " (imported, or recorded by an older stallbench)", width)
    return lines
