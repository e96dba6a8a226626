"""Where each key of a TOML text is written (tomllib keeps no positions): a small line scanner
for the file:line:key errors of plan files (plan/planfile.py)."""

from __future__ import annotations

import re
from typing import Any

_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*(\]\]?)\s*(#.*)?$")
_KEY_RE = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*')"
                     r"(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*'))*)\s*=")
_KEY_PART_RE = re.compile(r"[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*'")


def _split_key(text: str) -> list[str]:
    return [p[1:-1] if p[0] in "\"'" else p for p in _KEY_PART_RE.findall(text)]


def key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map key paths like ('variants', 1, 'memory') to the line where they are written."""
    lines: dict[tuple[Any, ...], int] = {}
    array_counts: dict[tuple[str, ...], int] = {}
    table: tuple[Any, ...] = ()
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER_RE.match(line)
        if header and header.group(1) == header.group(3)[::-1].replace("]", "["):
            names = _split_key(header.group(2))
            resolved = _resolve_arrays(tuple(names), array_counts)
            if header.group(1) == "[[":
                count = array_counts.get(tuple(names), 0)
                array_counts[tuple(names)] = count + 1
                resolved = (*_resolve_arrays(tuple(names[:-1]), array_counts), names[-1], count)
            table = resolved
            lines.setdefault(table, number)
            continue
        key = _KEY_RE.match(line)
        if key:
            lines.setdefault((*table, *_split_key(key.group(1))), number)
            rest = line[key.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
    return lines


def _resolve_arrays(names: tuple[str, ...], array_counts: dict[tuple[str, ...], int]
                    ) -> tuple[Any, ...]:
    """[variants.sysctls] after [[variants]] means the last variants entry: add its index."""
    resolved: list[Any] = []
    for i, name in enumerate(names):
        resolved.append(name)
        count = array_counts.get(names[: i + 1])
        if count:
            resolved.append(count - 1)
    return tuple(resolved)
