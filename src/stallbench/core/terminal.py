"""Whether a report is coloured: `--color auto|always|never`, and in auto only on a terminal
that is not dumb and where NO_COLOR is unset or empty (https://no-color.org)."""

from __future__ import annotations

import os
from typing import TextIO

COLOR_MODES = ("auto", "always", "never")
COLOR_HELP = ("colour the text report (worse red, better green, the headline bold): auto "
              "(default) on a terminal unless NO_COLOR is set, always, never")


def use_color(mode: str, stream: TextIO) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
