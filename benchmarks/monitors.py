"""Overhead of the monitors: throughput with no monitors vs the default set vs each monitor.

Runs randread (page-cached file: the most sensitive case, every op is a syscall) and pgioperf
through `stallbench run`, interleaving the monitor configurations round by round so that drift
of the machine hits them all alike. Prints one markdown table per workload: ops/s (median over
rounds) and the cost against no monitors.

    sudo .venv/bin/python benchmarks/monitors.py --rounds 3 --duration 4

A configuration joins monitor lists with "+" (`default+stacks`); costs are against the first
configuration, and the paired ratio (each round against the first configuration's run of the
same round) is printed as well. A second table gives the workload's own CPU time per op
(run.json rusage, user + system, over the ops recorded) and its paired change: what a monitor
adds to the recorder's work, which other processes' load moves far less than the throughput.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIGS = ["none", "default", "counters", "psi", "diskstats", "delay", "stacks", "trace",
           "trace-full", "profile", "perfstat"]
WORKLOADS = {
    "randread": ["--file-size", "64M", "--no-drop-caches"],
    "pgioperf": ["--memory", "128M", "--data-size", "128M", "--readers", "4"],
}


def run_once(results: Path, work: Path, workload: str, monitors: str, duration: float,
             variant: str) -> tuple[float, float]:
    """(ops/s, the workload's CPU time per op in ns: rusage user + system over the ops)."""
    cmd = [sys.executable, "-m", "stallbench", "run", workload, "--results", str(results),
           "--no-progress", "--variant", variant, "--monitors", monitors,
           "--duration", str(duration), "--dir", str(work), *WORKLOADS[workload]]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    runs = sorted((results / variant / workload).iterdir(), key=lambda p: int(p.name))
    meta = json.loads((runs[-1] / "run.json").read_text())
    ops = sum(meta["samples"].values())
    cpu_s = float(meta["rusage"]["user_s"]) + float(meta["rusage"]["system_s"])
    return ops / float(meta["duration_s"]), cpu_s * 1e9 / max(ops, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--workloads", default="randread,pgioperf")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args()
    configs = args.configs.split(",")
    with tempfile.TemporaryDirectory(prefix="stallbench-bench-") as tmp:
        for workload in args.workloads.split(","):
            work = Path(tmp) / f"work-{workload}"
            work.mkdir()
            results = Path(tmp) / "results"
            run_once(results, work, workload, "none", 1.0, "warmup")
            rates: dict[str, list[float]] = {c: [] for c in configs}
            cpu: dict[str, list[float]] = {c: [] for c in configs}
            for _round in range(args.rounds):
                for config in configs:
                    rate, cpu_per_op = run_once(results, work, workload, config.replace("+", ","),
                                                args.duration, f"m-{config.replace('+', '-')}")
                    rates[config].append(rate)
                    cpu[config].append(cpu_per_op)
            first = configs[0]
            base = statistics.median(rates[first])
            print(f"\n{workload}: {args.rounds} rounds x {args.duration:g} s, ops/s (median; "
                  "all rounds)\n")
            print(f"| monitors | ops/s | cost vs {first} | paired cost (median; range) | "
                  "rounds |")
            print("|---|---|---|---|---|")
            for config in configs:
                median = statistics.median(rates[config])
                cost = 1 - median / base
                paired = [1 - r / b for r, b in zip(rates[config], rates[first], strict=True)]
                rounds = ", ".join(f"{r:.0f}" for r in rates[config])
                print(f"| {config} | {median:.0f} | {cost:+.1%} | "
                      f"{statistics.median(paired):+.1%}; {min(paired):+.1%} to "
                      f"{max(paired):+.1%} | {rounds} |")
            # the workload's own CPU time per op: what a monitor adds to the recorder's work,
            # much less moved by other processes' load than the throughput
            print(f"\n| monitors | CPU ns/op of the workload (median) | paired change vs "
                  f"{first} (median; range) |")
            print("|---|---|---|")
            for config in configs:
                paired = [c / b - 1 for c, b in zip(cpu[config], cpu[first], strict=True)]
                print(f"| {config} | {statistics.median(cpu[config]):.0f} | "
                      f"{statistics.median(paired):+.1%}; {min(paired):+.1%} to "
                      f"{max(paired):+.1%} |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
