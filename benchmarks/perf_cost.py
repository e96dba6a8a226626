"""What perf costs the process it watches, by itself: the CPU time per read of a `dd` of
/dev/zero (every op a ~0.5 µs system call, the recorder's most sensitive case) alone, under
`perf record` with the profile monitor's own options at several sampling rates, and under
`perf stat` with the perfstat monitor's events, alternated run by run.

The throughput of a whole run (benchmarks/monitors.py) moves by ±5-30% with the machine's other
load; the CPU time of one process per op (its rusage, user + system) moves far less, and
sampling at ten times the profile monitor's rate shows the cost per sample that the monitor's
rate then pays a tenth of.

    sudo .venv/bin/python benchmarks/perf_cost.py --rounds 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stallbench.analysis.where.perfstat import SOFTWARE_EVENTS
from stallbench.monitors.perfstat import stat_args
from stallbench.monitors.profile import DATA_FILE, FREQUENCY_HZ, SOFTWARE_EVENT, record_args


def _perf_argv(config: str, scratch: Path) -> list[str] | None:
    """perf's command line for a configuration: none, stat, or a sampling rate in Hz."""
    if config == "none":
        return None
    if config == "stat":
        return ["perf", *stat_args(list(SOFTWARE_EVENTS), str(scratch / "stat.csv"))]
    args = record_args(SOFTWARE_EVENT, scratch / DATA_FILE)
    args[args.index("-F") + 1] = config
    return ["perf", *args]


def cpu_ns_per_read(config: str, reads: int, scratch: Path) -> float:
    """One dd of `reads` 4 KiB reads, held until perf (if any) is attached."""
    dd = subprocess.Popen(["sh", "-c", f"read go; exec dd if=/dev/zero of=/dev/null bs=4k "
                                       f"count={reads}"],
                          stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    argv = _perf_argv(config, scratch)
    perf = subprocess.Popen([*argv, "-p", str(dd.pid)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL) if argv else None
    if perf is not None:
        time.sleep(0.5)                     # perf opens its events (no control FIFO needed)
    assert dd.stdin is not None
    dd.stdin.write(b"go\n")
    dd.stdin.close()
    _pid, _status, usage = os.wait4(dd.pid, 0)
    dd.returncode = 0
    if perf is not None:
        perf.wait(60)
    return (usage.ru_utime + usage.ru_stime) * 1e9 / reads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--reads", type=int, default=1_000_000)
    parser.add_argument("--configs", default=f"none,{FREQUENCY_HZ},{FREQUENCY_HZ * 10 + 9},stat",
                        help="none, stat, or perf record's sampling rate in Hz")
    args = parser.parse_args()
    configs = args.configs.split(",")
    results: dict[str, list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="stallbench-perfcost-") as tmp:
        for _round in range(args.rounds):
            for config in configs:
                results[config].append(cpu_ns_per_read(config, args.reads, Path(tmp)))
    first = configs[0]
    print(f"\ndd of /dev/zero, {args.reads:,} reads of 4 KiB a run, {args.rounds} rounds: CPU "
          "time per read (rusage user + system)\n")
    print(f"| perf | ns/read (median) | paired change vs {first} (median; range) |")
    print("|---|---|---|")
    for config in configs:
        paired = [c / b - 1 for c, b in zip(results[config], results[first], strict=True)]
        name = config if config in ("none", "stat") else f"record -F {config}"
        print(f"| {name} | {statistics.median(results[config]):.0f} | "
              f"{statistics.median(paired):+.1%}; {min(paired):+.1%} to {max(paired):+.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
