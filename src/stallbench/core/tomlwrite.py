"""A small TOML writer for what tomllib reads back: strings, numbers, booleans, arrays and
tables (a table of tables and an array of tables as TOML sections), within a width where asked.

It writes the plans stallbench makes: a fleet host's part of a plan (fleet/subplan.py), the plan
a run from flags records (plan/record.py) and the plan an email prints to be pasted as it is
(report/email.py: every line within 72 columns, a long string split with TOML's line-ending
backslash, a long array one element a line).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
# one unit of a JSON-escaped string: an escape sequence (never split) or one character
_UNIT = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|.", re.DOTALL)


def dumps(data: dict[str, Any], width: int | None = None, header: str = "") -> str:
    """`data` as TOML: its values first, then each table as a [section] and each list of
    tables as [[sections]] (their own tables as [section.key] after each entry); `header`:
    comment lines first; `width`: no line longer, where a value can be split."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += _table(data, (), width)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(data: dict[str, Any], path: tuple[str, ...], width: int | None) -> list[str]:
    lines = []
    for key, value in data.items():
        if not _is_table(value) and not _is_table_array(value):
            lines += _key_value(key, value, width)
    for key, value in data.items():
        if _is_table(value):
            lines += ["", f"[{_dotted((*path, key))}]", *_table(value, (*path, key), width)]
        elif _is_table_array(value):
            for entry in value:
                lines += ["", f"[[{_dotted((*path, key))}]]",
                          *_table(entry, (*path, key), width)]
    return lines


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(key_text(k) for k in path)


def key_text(key: str) -> str:
    key = str(key)
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _key_value(key: str, value: Any, width: int | None) -> list[str]:
    lead = f"{key_text(key)} = "
    text = lead + value_text(value)
    if width is None or len(text) <= width:
        return [text]
    if isinstance(value, str):
        return _split_string(lead, value, width)
    if isinstance(value, list) and value:
        items = [f"  {value_text(v)}," for v in value]
        return [lead + "[", *items, "]"]
    return [text]


def _split_string(lead: str, value: str, width: int) -> list[str]:
    """A multi-line basic string whose lines end in a backslash: TOML joins them and trims
    the backslash, the newline and the whitespace that starts the next line (so no piece
    starts with a space: one is written as its escape)."""
    units = _UNIT.findall(json.dumps(value)[1:-1])
    lines = [lead + '"""\\']
    piece = ""
    for unit in units:
        if not piece and unit in (" ", "\\t"):
            unit = "\\u0020" if unit == " " else unit
        if piece and len(piece) + len(unit) + len('"""') > width:
            lines.append(piece + "\\")
            piece = "\\u0020" if unit == " " else unit
        else:
            piece += unit
    lines.append(piece + '"""')
    return lines


def value_text(value: Any) -> str:
    """One value in TOML's inline syntax."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)        # JSON's escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key_text(k)} = {value_text(v)}" for k, v in value.items()) \
            + "}"
    raise ValueError(f"cannot write {type(value).__name__} values as TOML")
