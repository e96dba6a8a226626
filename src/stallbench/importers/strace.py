"""`stallbench import strace LOG`: strace -T output, one op per system call name (the parser is
logformats/strace.py, shared with the command workload's strace tracer)."""

from __future__ import annotations

from pathlib import Path

from ..logformats.loglines import LogError, read_lines
from ..logformats.strace import StraceParser
from .imported import Imported


def parse_strace(path: Path, syscalls: set[str] | None = None) -> Imported:
    path = Path(path)
    parser = StraceParser(path, syscalls)
    last = 0
    for lineno, line in read_lines(path):
        parser.feed(lineno, line)
        last = lineno
    if parser.samples is None or not len(parser.samples):
        raise LogError(f"{path}:{last}: no system calls with a -T duration found "
                       "(record with: strace -f -T -ttt -o FILE CMD)")
    return Imported(
        workload="command",
        samples=parser.samples,
        params={"source": "strace", "path": str(path.resolve()),
                "syscalls": sorted(syscalls) if syscalls else None},
        summary={"signals": parser.signals, "exits": parser.exits,
                 "unfinished_at_end": len(parser.pending)},
        notes=["imported from strace -T: latencies include strace's ptrace overhead "
               "(typically several µs per call) and have µs resolution", *parser.notes()],
    )
