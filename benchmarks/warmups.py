"""What the start-up transient search (analysis/transient.py) found in recorded runs: per set (a
results tree's variant), how many runs it left a transient out of, how long, by which op and
statistic, and the outside load of the runs (run.json machine_load).

    PYTHONPATH=src .venv/bin/python benchmarks/warmups.py DATA [DATA ...]

DATA is a results tree (e.g. benchmarks/aa.py's --data); runs with a stated warm-up are counted
as such. Prints one line per variant."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from stallbench.results.rundirs import RUN_FILE
from stallbench.results.store import load_run


def main(roots: list[str]) -> int:
    print(f"{'variant':<28} {'runs':>4}  {'found (settled/steady/unsettled/short/stated)':<46} "
          f"{'warm-up s (min-max)':<20} {'others CPUs':<12} by")
    for root in roots:
        variants: dict[str, list] = {}
        for run_json in sorted(Path(root).rglob(RUN_FILE)):
            run = load_run(run_json.parent)
            if run.meta.status != "complete":
                continue
            variants.setdefault(run.meta.variant, []).append(run)
        for name, runs in variants.items():
            outcomes: Counter = Counter()
            by: Counter = Counter()
            warmups, others = [], []
            for run in runs:
                summary = run.summary()
                found = summary.transient
                outcomes[found.outcome if found else "stated"] += 1
                if found and found.op:
                    by[f"{found.op} {found.stat}"] += 1
                warmups.append((summary.warmup_ns - summary.start_ns // summary.block_ns
                                * summary.block_ns) / 1e9)
                others.append((run.meta.machine_load or {}).get("others_cpus") or 0.0)
            counts = "/".join(str(outcomes[k]) for k in
                              ("settled", "steady", "unsettled", "too short", "stated"))
            print(f"{name:<28} {len(runs):>4}  {counts:<46} "
                  f"{min(warmups):.1f}-{max(warmups):.1f}{'':<13} "
                  f"{min(others):.2f}-{max(others):.2f}    "
                  + ", ".join(f"{k} {v}" for k, v in by.most_common(3)))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="+", help="results trees")
    sys.exit(main(parser.parse_args().data))
