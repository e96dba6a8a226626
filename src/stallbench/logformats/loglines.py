"""Reading foreign and live logs line by line: errors that name the file and line, bounded
numbers, and a tail of a file that is still being written (the live workloads read their
programs' logs while they run)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from ..core.errors import UsageError

MAX_LINE_SHOWN = 80
# A sane upper bound for one operation's latency: anything larger is a parse error, not data.
MAX_LATENCY_NS = 10 * 86400 * 1_000_000_000


class LogError(UsageError):
    """A line of a foreign log that cannot be read."""


def line_error(path: Path | str, lineno: int, what: str, line: str = "") -> LogError:
    shown = line.strip()
    if len(shown) > MAX_LINE_SHOWN:
        shown = shown[:MAX_LINE_SHOWN] + "..."
    suffix = f": {shown!r}" if shown else ""
    return LogError(f"{path}:{lineno}: {what}{suffix}")


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without newline) of a text file; undecodable bytes become U+FFFD."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            for lineno, line in enumerate(f, 1):
                if "\x00" in line:
                    raise line_error(path, lineno, "binary data (NUL byte) in a text log")
                yield lineno, line.rstrip("\r\n")
    except IsADirectoryError as exc:
        raise UsageError(f"{path}: is a directory, expected a log file") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from exc


def parse_number(text: str, path: Path | str, lineno: int, line: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise line_error(path, lineno, f"{what} {text!r} is not a number", line) from None
    if not math.isfinite(value) or value < 0:
        raise line_error(path, lineno, f"{what} {text!r} is out of range", line)
    return value


def parse_int(text: str, path: Path | str, lineno: int, line: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise line_error(path, lineno, f"{what} {text!r} is not an integer", line) from None
    if value < 0 or value > 1 << 62:
        raise line_error(path, lineno, f"{what} {text!r} is out of range", line)
    return value


class LineTail:
    """Complete lines appended to a file since the last call; the last partial line waits
    until `final` (the writer has exited)."""

    def __init__(self, path: Path):
        self.path = path
        self.f = None
        self.partial = ""
        self.lineno = 0

    def lines(self, final: bool = False) -> list[tuple[int, str]]:
        if self.f is None:
            try:
                self.f = open(self.path, encoding="utf-8", errors="replace", newline="")
            except FileNotFoundError:
                return []
        data = self.partial + self.f.read()
        parts = data.split("\n")
        self.partial = "" if final else parts.pop()
        result = []
        for part in parts:
            self.lineno += 1
            result.append((self.lineno, part.rstrip("\r")))
        if final:
            self.f.close()
        return result
