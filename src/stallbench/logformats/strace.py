"""strace output with -T (time spent in each system call), one op per system call name.

Understood: `-f` pid prefixes (`1234 ` as written with -o, `[pid  1234] ` as written to stderr),
timestamps from -t (HH:MM:SS), -tt (HH:MM:SS.us), -ttt (epoch.us) and -r (relative to the
previous line), `<unfinished ...>` / `<... NAME resumed>` pairs (start from the first line, the
-T time from the second, which covers the whole call), signal lines (`--- SIG... ---`), exit
lines (`+++ exited with 0 +++`), and strace's own messages (`strace: Process N attached`).
Calls that never returned (`exit_group(0) = ?`) have no duration and are not operations.
"""

from __future__ import annotations

import re
from pathlib import Path

from .loglines import MAX_LATENCY_NS, line_error
from .samples import Samples

_PREFIX_RE = re.compile(
    r"^(?:\[pid\s+(?P<pid1>\d{1,9})\]\s+|(?P<pid2>\d{1,9})\s+(?=\S))?"
    r"\s*(?:(?P<ts>\d\d:\d\d:\d\d(?:\.\d{1,9})?|\d{1,12}\.\d{1,9})\s+)?"
)
_NAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_]*|\?\?\?)"
_CALL_RE = re.compile(r"^" + _NAME + r"\(")
_RESUMED_RE = re.compile(r"^<\.\.\. " + _NAME + r" resumed>")
_DURATION_RE = re.compile(r"<(?P<dur>\d{1,9}(?:\.\d{1,9})?)>\s*$")
_RESULT_RE = re.compile(r"\)\s+=\s+\S")
_UNFINISHED = "<unfinished ...>"
_DAY_NS = 86400 * 1_000_000_000


class StraceParser:
    """Incremental parser (the command workload feeds it lines while strace runs)."""

    def __init__(self, path: Path | str, syscalls: set[str] | None = None):
        self.path = path
        self.syscalls = syscalls
        self.samples: Samples | None = None
        self.clock: str | None = None      # "epoch" | "relative" | "ordinal", fixed by line 1
        self.pending: dict[tuple[int, str], int] = {}
        self.no_duration = 0
        self.signals = 0
        self.exits = 0
        self.unpaired_resumed = 0
        self.ts_kind: str | None = None
        self._last_ts = 0
        self._day_offset = 0
        self._line_index = 0

    def _timestamp(self, text: str | None, lineno: int, line: str) -> int:
        kind = "none" if text is None else ("tod" if ":" in text else "float")
        if self.ts_kind is None:
            self.ts_kind = kind
            if kind == "float":
                # -ttt prints epoch seconds; -r prints small offsets from the previous line
                self.ts_kind = "epoch" if float(text) > 1e8 else "rel"
            self.clock = {"epoch": "epoch", "none": "ordinal"}.get(self.ts_kind, "relative")
            self.samples = Samples(self.clock)
        elif (kind == "none") != (self.ts_kind == "none") or (
                kind == "tod") != (self.ts_kind == "tod"):
            raise line_error(self.path, lineno, "timestamp format changes within the log", line)
        self._line_index += 1
        if self.ts_kind == "none":
            return self._line_index
        if self.ts_kind == "tod":
            hours, minutes, seconds = text.split(":")
            if int(hours) > 23 or int(minutes) > 59 or float(seconds) >= 61:
                raise line_error(self.path, lineno, f"bad time of day {text!r}", line)
            value = int((int(hours) * 3600 + int(minutes) * 60) * 1e9 + _seconds_ns(seconds))
            value += self._day_offset
            if value < self._last_ts - _DAY_NS // 2:   # past midnight
                self._day_offset += _DAY_NS
                value += _DAY_NS
            self._last_ts = value
            return value
        if self.ts_kind == "rel":
            self._last_ts += _seconds_ns(text)
            return self._last_ts
        return _seconds_ns(text)

    def feed(self, lineno: int, line: str) -> None:
        if not line.strip():
            return
        stripped = line.lstrip()
        if stripped.startswith(("strace: ", "> ", "[ Process", "[ ")):
            return
        prefix = _PREFIX_RE.match(line)
        pid = int(prefix["pid1"] or prefix["pid2"] or 0)
        body = line[prefix.end():]
        if body.startswith("---") and body.rstrip().endswith("---"):
            self.signals += 1
            return
        if body.startswith("+++") and body.rstrip().endswith("+++"):
            self.exits += 1
            return
        resumed = _RESUMED_RE.match(body)
        call = None if resumed else _CALL_RE.match(body)
        if resumed is None and call is None:
            raise line_error(self.path, lineno, "not an strace line", line)
        when = self._timestamp(prefix["ts"], lineno, line)
        name = (resumed or call)["name"]
        if call is not None and body.rstrip().endswith(_UNFINISHED):
            self.pending[(pid, name)] = when
            return
        duration = _DURATION_RE.search(body)
        if duration is None:
            if _RESULT_RE.search(body) or body.rstrip().endswith("= ?"):
                self.no_duration += 1
                if resumed is not None:
                    self.pending.pop((pid, name), None)
                return
            raise line_error(self.path, lineno, "incomplete strace line (no result)", line)
        latency = _seconds_ns(duration["dur"])
        if latency > MAX_LATENCY_NS:
            raise line_error(self.path, lineno, "duration out of range", line)
        if resumed is not None:
            start = self.pending.pop((pid, name), None)
            if start is None:
                self.unpaired_resumed += 1
                start = when - latency
        else:
            start = when
        if self.syscalls is None or name in self.syscalls:
            self.samples.add(name, pid, start, latency)

    def notes(self) -> list[str]:
        notes = []
        if self.pending:
            notes.append(f"{len(self.pending)} system call(s) never returned before the log ended "
                         "(<unfinished ...> without resumed): not counted")
        if self.unpaired_resumed:
            notes.append(f"{self.unpaired_resumed} resumed call(s) without their start line: "
                         "start estimated as end minus duration")
        if self.no_duration:
            notes.append(f"{self.no_duration} call(s) without a -T duration (e.g. exit_group): "
                         "not counted")
        if self.clock == "ordinal":
            notes.append("the log has no timestamps (-t/-tt/-ttt/-r): start times are the line "
                         "order, not a clock")
        if self.ts_kind == "tod" or self.ts_kind == "rel":
            notes.append("timestamps are -t/-tt/-r, not -ttt: start times relative to the first "
                         "call")
        return notes


def _seconds_ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])
