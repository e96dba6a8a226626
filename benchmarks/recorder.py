"""Recorder overhead: stallbench randread vs fio on the same page-cached file, side by side.

    .venv/bin/python benchmarks/recorder.py [--rounds 5] [--seconds 5] [--write BENCHMARKS.md]

Each round runs fio (psync, invalidate=0, one job, 4 KiB random reads), `stallbench run
randread --threads 1` with its C op loop and with its Python loop (STALLBENCH_NO_C_LOOP=1) for
the same time on the same file, alternating so drift hits all three. Then it breaks down where
the Python loop's per-op time goes, by timing the same loop with parts removed.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import stallbench

RECORD = 4096
FILE_SIZE = 256 << 20


def run_fio(path: Path, seconds: float) -> tuple[float, float]:
    out = subprocess.run(
        ["fio", "--name=bench", f"--filename={path}", "--rw=randread", f"--bs={RECORD}",
         "--ioengine=psync", "--invalidate=0", f"--size={FILE_SIZE}", "--numjobs=1",
         "--time_based", f"--runtime={seconds}", "--output-format=json"],
        capture_output=True, text=True, check=True)
    read = json.loads(out.stdout)["jobs"][0]["read"]
    return read["iops"], read["clat_ns"]["percentile"]["50.000000"]


def run_stallbench(workdir: Path, results: Path, seconds: float, python_loop: bool = False
                   ) -> tuple[float, float]:
    from stallbench.workloads.native import NO_C_LOOP

    subprocess.run(
        [sys.executable, "-m", "stallbench", "run", "randread", "--threads", "1",
         "--file-size", str(FILE_SIZE), "--record-size", str(RECORD), "--dir", str(workdir),
         "--results", str(results), "--variant", "bench", "--duration", str(seconds),
         "--monitors", "none", "--no-drop-caches", "--no-progress"],
        capture_output=True, text=True, check=True,
        env={**os.environ, NO_C_LOOP: "1" if python_loop else "0"})
    run_dir = max((results / "bench" / "randread").iterdir(), key=lambda p: int(p.name))
    run = stallbench.load_run(run_dir)
    latency = run.op_arrays()["read"].latency_ns
    return len(latency) / run.duration_s, float(np.percentile(latency, 50))


def warm_page_cache(path: Path) -> None:
    """Read the file so that it is page-cached (something else may have dropped caches)."""
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)


def per_op_breakdown(path: Path, n: int = 1_000_000, repeats: int = 5) -> dict[str, float]:
    """ns per op of the loop with parts removed: what each part of the hot loop costs.
    Each variant runs `repeats` times, interleaved; the fastest run counts (least disturbed)."""
    from array import array

    fd = os.open(path, os.O_RDONLY)
    buffers = [mmap.mmap(-1, RECORD)]
    offsets = (np.random.default_rng(1).integers(0, FILE_SIZE // RECORD, n) * RECORD).tolist()
    starts, ends = array("q", bytes(8 * n)), array("q", bytes(8 * n))
    preadv, now = os.preadv, time.monotonic_ns

    def loop_only() -> None:
        for _offset in offsets:
            pass

    def with_preadv() -> None:
        for offset in offsets:
            preadv(fd, buffers, offset)

    def with_clock() -> None:
        for offset in offsets:
            now()
            preadv(fd, buffers, offset)
            now()

    def full() -> None:
        j = 0
        next_tick = now() + 10**12
        for offset in offsets:
            t0 = now()
            preadv(fd, buffers, offset)
            t1 = now()
            starts[j] = t0
            ends[j] = t1
            j += 1
            if t1 >= next_tick:
                break

    variants = {"loop only": loop_only, "loop + preadv": with_preadv,
                "+ two clock reads": with_clock,
                "+ two stores, index, tick check (= stallbench's loop)": full}
    best = {name: float("inf") for name in variants}
    warm_page_cache(path)
    for _ in range(repeats):
        for name, fn in variants.items():
            t = time.perf_counter_ns()
            fn()
            best[name] = min(best[name], (time.perf_counter_ns() - t) / n)
    os.close(fd)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--write", type=Path, help="replace the '## recorder' section of FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sb-bench-") as tmp:
        workdir, results = Path(tmp) / "work", Path(tmp) / "results"
        workdir.mkdir()
        # the first stallbench run creates the file; then read it once so it is page-cached
        run_stallbench(workdir, results, 1)
        path = workdir / "randread.data"
        rows = []
        for round_no in range(1, args.rounds + 1):
            warm_page_cache(path)
            fio_iops, fio_p50 = run_fio(path, args.seconds)
            warm_page_cache(path)
            sb_iops, sb_p50 = run_stallbench(workdir, results, args.seconds)
            warm_page_cache(path)
            py_iops, py_p50 = run_stallbench(workdir, results, args.seconds, python_loop=True)
            rows.append((round_no, fio_iops, sb_iops, fio_p50, sb_p50, py_iops, py_p50))
            print(f"round {round_no}: fio {fio_iops:,.0f} ops/s p50 {fio_p50:.0f} ns; "
                  f"stallbench C {sb_iops:,.0f} ops/s p50 {sb_p50:.0f} ns; "
                  f"Python {py_iops:,.0f} ops/s p50 {py_p50:.0f} ns", flush=True)
        breakdown = per_op_breakdown(path)
    ratios = [r[2] / r[1] for r in rows]
    p50_gaps = [r[4] - r[3] for r in rows]
    py_ratios = [r[5] / r[1] for r in rows]
    py_gaps = [r[6] - r[3] for r in rows]
    lines = [
        "## recorder",
        "",
        f"Command: `.venv/bin/python benchmarks/recorder.py --rounds {args.rounds} "
        f"--seconds {args.seconds:g}` ({time.strftime('%Y-%m-%d')}, kernel {os.uname().release},"
        f" {os.cpu_count()} CPUs). 4 KiB random reads of a page-cached {FILE_SIZE >> 20} MiB "
        "file, one thread; fio 'psync, invalidate=0' vs `stallbench run randread --threads 1` "
        "with its C op loop (workloads/native/readloop.c) and with its Python loop "
        "(STALLBENCH_NO_C_LOOP=1, the fallback without a C compiler), alternating in one run.",
        "",
        "| round | fio ops/s | C loop ops/s | ratio | Python loop ops/s | ratio | fio clat p50 "
        "| C loop p50 | gap | Python loop p50 | gap |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for round_no, fio_iops, sb_iops, fio_p50, sb_p50, py_iops, py_p50 in rows:
        lines.append(f"| {round_no} | {fio_iops:,.0f} | {sb_iops:,.0f} | "
                     f"{sb_iops / fio_iops:.2f} | {py_iops:,.0f} | {py_iops / fio_iops:.2f} | "
                     f"{fio_p50:.0f} ns | {sb_p50:.0f} ns | {sb_p50 - fio_p50:+.0f} ns | "
                     f"{py_p50:.0f} ns | {py_p50 - fio_p50:+.0f} ns |")
    lines += [
        "",
        f"C loop: median ratio {np.median(ratios):.2f} (target >= 0.95), median p50 gap "
        f"{np.median(p50_gaps):+.0f} ns (target <= +100 ns). Python loop: median ratio "
        f"{np.median(py_ratios):.2f}, median p50 gap {np.median(py_gaps):+.0f} ns.",
        "",
        "Where the Python loop's per-op time goes (the same loop, parts added one at a time, "
        "1 million ops each, fastest of 5 interleaved repeats):",
        "",
        "| loop | ns per op |",
        "|---|---|",
    ]
    lines += [f"| {name} | {value:.0f} |" for name, value in breakdown.items()]
    steps = list(breakdown.values())
    fio_per_op = 1e9 / float(np.median([r[1] for r in rows]))
    lines += [
        "",
        f"fio spends about {fio_per_op:.0f} ns per op in all. Python's `os.preadv` call costs "
        f"{steps[1] - steps[0]:.0f} ns (the system call plus argument parsing and the buffer "
        f"protocol), the two `time.monotonic_ns()` reads {steps[2] - steps[1]:.0f} ns, and "
        f"keeping the record (two stores into preallocated arrays, the index, the tick check) "
        f"{steps[3] - steps[2]:.0f} ns. What is left between the loop and the measured "
        "ops/s is the 100 ms ticks (flush of the buffer, progress) and the offsets drawn in "
        "batches. The latency a sample records spans only the system call and one clock read, "
        "which is why the p50s agree within a few hundred ns.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        _replace_section(args.write, "## recorder", text)
    return 0


def _replace_section(path: Path, heading: str, text: str) -> None:
    old = path.read_text() if path.exists() else "# Benchmarks\n\n"
    start = old.find(heading + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(heading))
        new = old[:start] + text + (old[end + 1:] if end >= 0 else "")
    path.write_text(new.rstrip("\n") + "\n")


if __name__ == "__main__":
    sys.exit(main())
