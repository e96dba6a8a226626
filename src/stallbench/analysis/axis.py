"""The order of a series' points: kernel releases as versions (`uname -r`: 6.1.0-9 before
6.1.0-10, 6.8-rc3 before 6.8), plan values as numbers where they all are numbers, else as
versions."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"\d+|[A-Za-z]+|~|.")
_END = (1,)          # the end of a string: after "~rc" tokens, before any other suffix


def version_key(text: str) -> tuple:
    """A sort key that reads digit runs as numbers; '-rcN' (and Debian's '~') sorts before
    the release itself, any other suffix after it."""
    text = re.sub(r"[-.]rc(?=\d)", "~rc", str(text))
    key: list[tuple] = []
    for token in _TOKEN.findall(text):
        if token == "~":
            key.append((0,))
        elif token.isdigit():
            key.append((2, int(token), ""))
        else:
            key.append((3, 0, token))
    return (*key, _END)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def axis_order(values: list[Any]) -> list[Any]:
    """The distinct values in axis order: numbers ascending when all are numbers, else as
    versions of their text."""
    distinct = list(dict.fromkeys(values))
    if all(is_number(v) for v in distinct):
        return sorted(distinct)
    return sorted(distinct, key=lambda v: version_key(str(v)))
