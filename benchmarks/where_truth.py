"""The where section's truth table: causes injected on real runs, the first "where" line each
one gives, with the default monitors and with all, and whether that line is right.

Each row runs a baseline and a candidate that differs by one injected cause, once with the
default monitors and once with `--monitors all`, compares them (`stallbench compare --format
json`) and takes the first explanation line of the row's op. A line is right when it names the
injected cause (the row's `expect` pattern) and blames nothing that was not injected (`forbid`,
checked on every line and on the device verdict of every op).

    sudo .venv/bin/python benchmarks/where_truth.py [--rows NAME,...] [--duration S]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

OTHER_CAUSES = {
    "cpu": r"CPU contention",
    "throttle": r"I/O throttle",
    "memcg": r"memcg|limit was hit",
    "dirty": r"dirty throttling",
    "sysmem": r"low system memory",
    "device-for-cached": r"page cache.*in the device",
}


# the first clause of a line whose added op time was on a CPU
ON_A_CPU = (r"^\S+ \S+ [+\d]+%(?::| \(not decided\): if real,) \d+% of the added op time was "
            r"on a CPU, ")


@dataclass
class Row:
    name: str
    cause: str                      # the injected cause, in words
    workload: str
    common: list[str]
    candidate: list[str]
    op: str
    expect: str                     # what the first line must name
    forbid: list[str]               # OTHER_CAUSES keys the row did not inject
    hogs: bool = False              # CPU hogs beside the candidate's run
    baseline: list[str] = field(default_factory=list)
    not_device: bool = False        # a sleep the device serves nothing of: the op's device
    #                                 verdict must not be "waiting for the device"


def rows(data: Path, work: Path) -> list[Row]:
    def d(name: str) -> list[str]:
        (data / name).mkdir(exist_ok=True)
        return ["--dir", str(data / name)]

    return [
        Row("cpu-hogs", "CPU hogs beside the workload (twice as many as CPUs)", "randread",
            ["--file-size", "64M", "--no-drop-caches", *d("cpu-hogs")], [], "read",
            r"waiting for a CPU \(CPU contention", ["throttle", "memcg", "dirty", "sysmem"],
            hogs=True),
        Row("io-max", "--io-max riops=200 on O_DIRECT reads", "randread",
            ["--fs", "ext4", "--fs-size", "64M", "--file-size", "16M", "--direct",
             "--work-dir", str(work)], ["--io-max", "riops=200"], "read",
            r"I/O throttle riops=200", ["cpu", "memcg", "dirty", "sysmem"]),
        Row("memcg-cold", "a 32M memory cgroup on a cold cache (128M file)", "randread",
            ["--file-size", "128M", *d("memcg-cold")], ["--memory", "32M"], "read",
            r"(block I/O waits|reclaim).*(memcg|limit was hit)",
            ["cpu", "throttle", "dirty", "sysmem"]),
        Row("dirty-bytes", "vm.dirty_bytes=1M (and background 512K)", "pgioperf",
            ["--data-size", "64M", "--readers", "1", "--wal-size", "64M", *d("dirty-bytes")],
            ["--sysctl", "vm.dirty_bytes=1048576", "--sysctl",
             "vm.dirty_background_bytes=524288"], "wal", r"dirty throttling",
            ["cpu", "throttle", "memcg", "sysmem"]),
        Row("dirty-unpaced", "vm.dirty_bytes=1M under an unpaced buffered writer (the "
            "checkpointer at 1 µs, no readers)", "pgioperf",
            ["--data-size", "64M", "--readers", "0", "--checkpoint-interval", "1us",
             "--fs", "ext4", "--fs-size", "512M", "--work-dir", str(work)],
            ["--sysctl", "vm.dirty_bytes=1048576", "--sysctl",
             "vm.dirty_background_bytes=524288"], "checkpoint",
            # the traced stall, or, where the kernel's block I/O accounting was impossible (a
            # fault it makes now and then), the device's counters naming the same stall
            r"^checkpoint \S+ [+\d]+%(?::| \(not decided\): if real,)(?:(?: the added time was "
            r"(?:mostly )?spent waiting \([^)]*\);)? \d+% of the checkpoint ops' time was in "
            r"dirty throttling| above the device: at least \d+% in dirty throttling)",
            ["cpu", "throttle", "memcg", "sysmem"], not_device=True),
        Row("fsync-heavy", "the checkpointer fsyncs every 8 writes (default 100000)", "pgioperf",
            ["--data-size", "64M", "--readers", "1", *d("fsync-heavy")],
            # the op the cause brings: the checkpointer's fsyncs (the writes between them may or
            # may not slow down; in one run each their p99 moved 0 to +210%)
            ["--checkpoint-fsync-every", "8"], "checkpoint-fsync",
            r"block I/O waits|fdatasync|journal commit|writeback|waiting for the device",
            ["cpu", "throttle", "memcg", "dirty", "sysmem"]),
        Row("read-size", "cached random reads of 64 KiB instead of 4 KiB (the copy to user "
            "space, in the read call: kernel CPU, no wait)", "randread",
            ["--file-size", "64M", "--no-drop-caches", *d("read-size")],
            ["--record-size", "64K"], "read", ON_A_CPU + "in the kernel",
            ["cpu", "throttle", "memcg", "dirty", "sysmem"], baseline=["--record-size", "4K"]),
        Row("mmap-size", "the same through a shared mapping of the file (--mmap: the copy is "
            "the reader's own memcpy, user-space CPU)", "randread",
            ["--file-size", "64M", "--no-drop-caches", "--mmap", *d("mmap-size")],
            ["--record-size", "64K"], "read", ON_A_CPU + "in user space",
            ["cpu", "throttle", "memcg", "dirty", "sysmem"], baseline=["--record-size", "4K"]),
        Row("system-memory", "--system-memory 4G, one random reader (64K reads, 30 s warm-up "
            "to fill the page cache) of a 6G file", "randread",
            ["--file-size", "6G", "--record-size", "64K", "--warmup", "30",
             *d("system-memory")], ["--system-memory", "4G"], "read",
            r"(block I/O waits|reclaim).*low system memory",
            ["cpu", "throttle", "memcg", "dirty"]),
    ]


def stallbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=900)


def run(results: Path, row: Row, variant: str, extra: list[str], monitors: str,
        duration: float) -> None:
    hogs = []
    if row.hogs and variant.endswith("cand"):
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(2 * (os.cpu_count() or 1))]
    try:
        out = stallbench("run", row.workload, "--variant", variant, "--results", str(results),
                         "--no-progress", "--duration", str(duration), "--monitors", monitors,
                         *row.common, *extra)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    if out.returncode != 0:
        raise SystemExit(f"{row.name} {variant}: {out.stderr.strip()}")


def judge(row: Row, where: dict, label: str) -> tuple[str, bool, list[str]]:
    lines = [e["text"] for e in where.get("explanations", []) if e["variant"] == label]
    mine = [t for t in lines if t.startswith(f"{row.op} ")]
    first = mine[0] if mine else "(no line: the op's p99 did not grow)"
    wrong = []
    everything = lines + [d.get("verdict") or "" for ops in where.get("device", {}).values()
                          for d in ops.values()]
    for key in row.forbid:
        wrong += [t for t in everything if re.search(OTHER_CAUSES[key], t)]
    # a cached read "in the device": from_device is the share of the role's reads that reached
    # the block layer, so it says nothing of a write op (wal, commit: the fsync-heavy row's
    # writers, whose roles read little, once counted here)
    cached_in_device = [op for ops in where.get("device", {}).values() for op, d in ops.items()
                        if op == "read" and d.get("from_device") is not None
                        and d["from_device"] < 0.02
                        and (d.get("verdict") or "").startswith("waiting for the device")]
    wrong += cached_in_device
    if row.not_device:
        verdict = (where.get("device", {}).get(label, {}).get(row.op) or {}).get("verdict") or ""
        if verdict.startswith("waiting for the device"):
            wrong.append(f"{row.op}: {verdict}")
    right = bool(mine) and re.search(row.expect, first) is not None and not wrong
    return first, right, wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="")
    parser.add_argument("--duration", type=float, default=6.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stallbench-truth-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        data, work = base / "data", base / "work"
        data.mkdir()
        work.mkdir()
        print("| injected cause | monitors | first \"where\" line for the op | right |")
        print("|---|---|---|---|")
        all_right = True
        for row in rows(data, work):
            if args.rows and row.name not in args.rows.split(","):
                continue
            for monitors in ("default", "all"):
                results = base / f"results-{row.name}-{monitors}"
                run(results, row, "base", row.baseline, monitors, args.duration)
                run(results, row, "cand", row.candidate, monitors, args.duration)
                out = stallbench("compare", "base", "cand", "--results", str(results),
                                 "--format", "json")
                if out.returncode != 0:
                    raise SystemExit(f"{row.name}: compare: {out.stderr.strip()}")
                first, right, wrong = judge(row, json.loads(out.stdout)["where"], "cand")
                all_right &= right
                note = "" if not wrong else f" (wrongly: {'; '.join(wrong)[:200]})"
                print(f"| {row.cause} | {monitors} | {first.replace('|', '/')} | "
                      f"{'yes' if right else 'NO' + note} |", flush=True)
        return 0 if all_right else 1


if __name__ == "__main__":
    sys.exit(main())
