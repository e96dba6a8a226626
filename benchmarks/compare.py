"""Benchmark of `stallbench compare`: 2 variants x 3 iterations x 3 million ops each, all
sections (tables, shift, stalls) and all plots (HTML with embedded PNGs, plus PNG and SVG files).

    .venv/bin/python benchmarks/compare.py [--data DIR] [--rounds N]
    .venv/bin/python benchmarks/compare.py --scale 10M,100M,500M [--data DIR]

The simulated runs are written once through store.RunWriter into DIR (default
/tmp/stallbench-bench-compare) and reused. Each round runs the real command line in a child
process; wall time and the child's peak RSS (wait4) are reported. Target: <= 3 s.

--scale: for each size, 2 variants x 1 run of that many ops (95% reads, 5% paced WAL writes,
400k ops/s), written in a child process (its peak RSS is the finalize cost: ops.parquet and
summary.parquet in one streaming pass), then `compare` with every section and plot, with the
summaries and from ops.parquet alone (summary.parquet removed before each round). Targets: peak
RSS flat in the op count and <= 1 GiB; 2 x 500 M ops <= 10 s with summaries, <= 3 min from
ops.parquet alone; finalizing a 500 M-op run <= 256 MiB.
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

from stallbench.results import store
from stallbench.results.oprecorder import READ_CHUNK_RECORDS
from stallbench.results.opsfile import ops_batch

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
                batches.append(ops_batch(names, np.full(n, code), workers, start,
                                               latency.astype(np.int64), intended))
            counts = writer.write_ops(batches)
            writer.meta.update({"ops_declared": names, "duration_s": DURATION_S,
                                "samples": counts, "counted": counts,
                                "rusage": {"user_s": 30.0, "system_s": 20.0,
                                           "elapsed_s": DURATION_S}})
            writer.finalize("complete")


def run_once(results: Path, out: Path, base: str = "vanilla",
             cand: str = "memcg") -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds of one `stallbench compare` child."""
    stallbench = Path(sys.executable).with_name("stallbench")
    command = [str(stallbench), "compare", base, cand, "--results", str(results),
               "--format", "html", "--output", str(out / "report.html"),
               "--plots", str(out / "plots")]
    return _child(command)


def _child(command: list[str]) -> tuple[float, int, float]:
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed with status {status}")
    return elapsed, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


SCALE_RATE = 400_000      # ops/s of the simulated runs: 4 readers on this machine
BATCH = READ_CHUNK_RECORDS        # as the runner reads the spools


def write_scale_run(results: Path, variant: str, ops: int, slow_share: float) -> None:
    """One run of `ops` simulated ops, generated and written batch by batch (bounded memory)."""
    rng = np.random.default_rng(hash(variant) & 0xFFFF)
    names = ["read", "wal"]
    duration = ops / SCALE_RATE
    writer = store.RunWriter(results, variant, "scale-sim", {"ops": ops})
    writer.meta.update({"ops_declared": names, "duration_s": duration, "warmup_s": 0.0,
                        "rusage": {"user_s": 1.0, "system_s": 1.0, "elapsed_s": duration}})

    def batches():
        done = 0
        while done < ops:
            n = min(BATCH, ops - done)
            start = ((done + np.arange(n)) * (1e9 / SCALE_RATE)).astype(np.int64)
            wal = rng.random(n) < 0.05
            latency = rng.lognormal(np.log(2_000), 0.8, n)
            slow = rng.random(n) < slow_share
            latency[slow] *= 30
            latency[wal] = rng.lognormal(np.log(40_000), 0.5, int(wal.sum()))
            intended = np.where(wal, start - rng.integers(0, 50_000, n), -1)
            yield ops_batch(names, wal.astype(np.int32), rng.integers(0, 5, n), start,
                                  latency.astype(np.int64), intended)
            done += n

    counts = writer.write_ops(batches())
    writer.meta.update({"samples": counts, "counted": counts})
    writer.finalize("complete")


def parse_count(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def scale(data: Path, sizes: list[int], rounds: int) -> None:
    print(f"{'ops/run':>12} {'write 1 run':>12} {'writer RSS':>11} {'with summaries':>24} "
          f"{'RSS':>9} {'from ops alone':>24} {'RSS':>9}")
    for size in sizes:
        results = data / f"scale-{size}"
        written = {}
        for variant, slow in (("base", 0.0), ("cand", 0.02)):
            if not (results / variant / "scale-sim" / "1" / "summary.parquet").exists():
                shutil.rmtree(results / variant, ignore_errors=True)
                written[variant] = _child([sys.executable, __file__, "--write-scale",
                                           str(size), "--data", str(results),
                                           "--variant", variant, "--slow", str(slow)])
        with tempfile.TemporaryDirectory() as tmp:
            summaries = [run_once(results, Path(tmp), "base", "cand") for _ in range(rounds)]
            from_ops = []
            for _ in range(rounds):
                for variant in ("base", "cand"):
                    (results / variant / "scale-sim" / "1" / "summary.parquet").unlink()
                from_ops.append(run_once(results, Path(tmp), "base", "cand"))
        w = written.get("base")
        def cell(rows):
            best = min(rows, key=lambda r: r[0])
            return (f"{best[0]:8.2f} s ({best[2]:6.2f} s CPU)",
                    f"{max(r[1] for r in rows) / 2**20:5.0f} MiB")

        print(f"{size:>12,} {(f'{w[0]:.1f} s' if w else 'reused'):>12} "
              f"{(f'{w[1] / 2**20:.0f} MiB' if w else '-'):>11} "
              f"{cell(summaries)[0]:>24} {cell(summaries)[1]:>9} "
              f"{cell(from_ops)[0]:>24} {cell(from_ops)[1]:>9}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/tmp/stallbench-bench-compare"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="rewrite the simulated runs")
    parser.add_argument("--scale", help="sizes of the scale series, e.g. 10M,100M,500M")
    parser.add_argument("--write-scale", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--slow", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_scale:
        write_scale_run(args.data, args.variant, args.write_scale, args.slow)
        return
    if args.scale:
        scale(args.data, [parse_count(s) for s in args.scale.split(",")], args.rounds)
        return
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
