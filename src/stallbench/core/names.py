"""Plain names: a variant's, a workload's and a monitor table's name each become one directory
or file name of a run, so they are kept to one safe alphabet, checked where they are read."""

from __future__ import annotations

import re

from .errors import UsageError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@=,:-]{0,99}$")


def check_name(name: str, what: str = "variant name") -> str:
    """Variant and workload names become directory names: keep them plain."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name:
        raise UsageError(
            f"{what} {name!r} is not allowed: use letters, digits and ._+@=,:- "
            "(no '/', spaces or control characters, at most 100 characters)"
        )
    return name
