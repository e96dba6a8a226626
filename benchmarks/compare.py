"""Benchmark of `stallbench compare`: 2 variants x 3 iterations x 3 million ops each, all
sections (tables, shift, stalls) and all plots (HTML with embedded PNGs, plus PNG and SVG files).

    .venv/bin/python benchmarks/compare.py [--data DIR] [--rounds N]

The simulated runs are written once through store.RunWriter into DIR (default
/tmp/stallbench-bench-compare) and reused. Each round runs the real command line in a child
process; wall time and the child's peak RSS (wait4) are reported. Targets: <= 10 s, <= 2 GiB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from stallbench import store

OPS_PER_RUN = 3_000_000
DURATION_S = 60.0
MIX = (("read", 0.85), ("wal", 0.09), ("commit", 0.045), ("checkpoint", 0.015))


def write_data(results: Path) -> None:
    rng = np.random.default_rng(2024)
    names = [name for name, _ in MIX]
    for variant, slow_share in (("vanilla", 0.0), ("memcg", 0.06)):
        for iteration in range(3):
            writer = store.RunWriter(results, variant, "pgioperf-sim", {"iteration": iteration})
            batches = []
            for code, (name, share) in enumerate(MIX):
                n = int(OPS_PER_RUN * share)
                latency = rng.lognormal(np.log(300e3 if name == "read" else 40e3), 0.5, n)
                slow = rng.random(n) < slow_share
                latency[slow] *= rng.uniform(20, 100, int(slow.sum()))
                start = np.sort(rng.uniform(0, DURATION_S * 1e9, n)).astype(np.int64)
                workers = rng.integers(0, 16, n) if name == "read" else np.zeros(n)
                intended = start - rng.integers(0, 50_000, n) if name == "wal" else None
                batches.append(store.ops_batch(names, np.full(n, code), workers, start,
                                               latency.astype(np.int64), intended))
            counts = writer.write_ops(batches)
            writer.meta.update({"ops_declared": names, "duration_s": DURATION_S,
                                "samples": counts, "counted": counts,
                                "rusage": {"user_s": 30.0, "system_s": 20.0,
                                           "elapsed_s": DURATION_S}})
            writer.finalize("complete")


def run_once(results: Path, out: Path) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds of one `stallbench compare` child."""
    stallbench = Path(sys.executable).with_name("stallbench")
    command = [str(stallbench), "compare", "vanilla", "memcg", "--results", str(results),
               "--format", "html", "--output", str(out / "report.html"),
               "--plots", str(out / "plots")]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"compare failed with status {status}")
    return elapsed, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/tmp/stallbench-bench-compare"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="rewrite the simulated runs")
    args = parser.parse_args()
    if args.fresh and args.data.exists():
        shutil.rmtree(args.data)
    if not (args.data / "memcg" / "pgioperf-sim" / "3" / "ops.parquet").exists():
        shutil.rmtree(args.data, ignore_errors=True)
        started = time.perf_counter()
        write_data(args.data)
        print(f"wrote 2 x 3 x {OPS_PER_RUN:,} ops in {time.perf_counter() - started:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_once(args.data, Path(tmp)) for _ in range(args.rounds)]
        plots = sorted(p.name for p in (Path(tmp) / "plots").iterdir())
        html_size = (Path(tmp) / "report.html").stat().st_size
    for i, (elapsed, rss, cpu) in enumerate(rows, 1):
        print(f"round {i}: {elapsed:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss / 2**30:.2f} GiB")
    best = min(r[0] for r in rows)
    peak = max(r[1] for r in rows)
    print(f"best {best:.2f} s (target <= 10 s), peak RSS {peak / 2**30:.2f} GiB "
          f"(target <= 2 GiB); html {html_size / 1024:.0f} KiB; plots {' '.join(plots)}")
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
