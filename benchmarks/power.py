"""Power and honesty of stallbench's verdicts on real configuration changes of this machine.

    .venv/bin/python benchmarks/power.py record   [--data DIR] [--rounds 8] [--seconds 5]
    .venv/bin/python benchmarks/power.py evaluate [--data DIR] [--sets ...] [--json FILE]

1. record: for each change, ROUNDS interleaved rounds of three variants — the baseline, its
   A/A twin (the same configuration under another name) and the changed configuration — each
   round in a random order (Abedi & Brecht), one `stallbench run` process per run as a user
   would, with `--monitors none`. A set of 8 rounds is 24 runs.
2. evaluate: the true size of each change is the pooled estimate over all its rounds (the
   change of the statistic of all baseline runs against all changed runs); then, for disjoint
   groups of 1 and 3 rounds, the share of comparisons that call it worse (power), the share of
   95% intervals that hold the true size (coverage), and the same for the twin against the
   baseline (A/A: rows called, comparisons with any call, `check` exit 1).
   Scaled copies: latencies of real baseline runs multiplied by a known factor, against other
   real baseline runs (true change exactly the factor).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

CHANGES = {
    # name: (base args, changed args, op, statistics judged)
    "recsize": (["randread", "--file-size", "256M", "--no-drop-caches"],
                ["randread", "--file-size", "256M", "--no-drop-caches", "--record-size", "8K"]),
    "threads": (["randread", "--file-size", "256M", "--no-drop-caches"],
                ["randread", "--file-size", "256M", "--no-drop-caches", "--threads", "2"]),
    "direct-bs": (["randread", "--file-size", "256M", "--direct"],
                  ["randread", "--file-size", "256M", "--direct", "--record-size", "16K"]),
    "sysctl": (["pgioperf", "--readers", "2", "--data-size", "384M"],
               ["pgioperf", "--readers", "2", "--data-size", "384M",
                "--sysctl", "vm.dirty_background_bytes=1048576"]),
    "memcg": (["pgioperf", "--readers", "2", "--data-size", "384M", "--memory", "160M"],
              ["pgioperf", "--readers", "2", "--data-size", "384M", "--memory", "112M"]),
}
VARIANTS = ("base", "twin", "changed")


def stallbench(*args: str) -> None:
    cmd = [sys.executable, "-m", "stallbench", *args]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} -> {result.returncode}\n{result.stderr[-2000:]}")


def record(data: Path, sets: list[str], rounds: int, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    for name in sets:
        base, changed = CHANGES[name]
        results = data / name
        have = min((len(list((results / v).glob("*/*/run.json"))) if (results / v).exists()
                    else 0) for v in VARIANTS)
        if have < rounds and "--no-drop-caches" in base:
            stallbench("run", base[0], "--variant", "warming", "--results", str(results),
                       "--duration", "2s", "--monitors", "none", "--no-progress", *base[1:])
        for i in range(have, rounds):
            order = list(VARIANTS)
            rng.shuffle(order)
            started = time.time()
            for variant in order:
                args = changed if variant == "changed" else base
                stallbench("run", args[0], "--variant", variant, "--results", str(results),
                           "--duration", f"{seconds}s", "--monitors", "none", "--no-progress",
                           *args[1:])
            print(f"  {name} round {i + 1}/{rounds} ({' '.join(order)}, "
                  f"{time.time() - started:.0f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("record", "evaluate"))
    parser.add_argument("--data", type=Path, default=Path("/var/tmp/stallbench-power"))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sets", default=",".join(CHANGES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    if args.command == "record":
        if os.geteuid() != 0:
            raise SystemExit("power.py record: run as root (memory cgroups, sysctls)")
        record(args.data, sets, args.rounds, args.seconds, args.seed)
        return 0
    from power_eval import evaluate  # noqa: PLC0415 (numpy and the comparison, only here)
    result = evaluate(args.data, sets)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
