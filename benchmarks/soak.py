"""Soak: a long pgioperf run with the default monitors; memory stays bounded, no op is lost.

Starts `stallbench run pgioperf` (default monitors) in a subprocess and samples the whole
stallbench process tree (the parent and every worker) from /proc every few seconds: VmRSS and
VmHWM from /proc/PID/status, and PSS from /proc/PID/smaps_rollup (workers are forked, so summing
RSS counts the shared pages once per process; PSS does not). At each checkpoint (1, 10, 30
minutes after the start by default) it records the peaks seen so far and in the window since
the previous checkpoint: if memory grew with duration, the later windows would show it.
After the run it checks that the ops recorded in ops.parquet equal the workers' own counters
(run.json "counted"), per op.

    sudo nice -n 10 .venv/bin/python benchmarks/soak.py --duration 30m --output soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from stallbench.core.units import parse_duration  # noqa: E402

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass
class Peaks:
    """Peaks (KiB) over a stretch of time."""

    tree_rss_kb: int = 0        # largest sum of VmRSS over the tree at one sample
    tree_pss_kb: int = 0        # largest sum of PSS over the tree at one sample
    parent_rss_kb: int = 0
    worker_rss_kb: int = 0      # largest VmRSS of any single worker
    processes: int = 0

    def update(self, sample: dict[str, int]) -> None:
        self.tree_rss_kb = max(self.tree_rss_kb, sample["tree_rss_kb"])
        self.tree_pss_kb = max(self.tree_pss_kb, sample["tree_pss_kb"])
        self.parent_rss_kb = max(self.parent_rss_kb, sample["parent_rss_kb"])
        self.worker_rss_kb = max(self.worker_rss_kb, sample["worker_rss_kb"])
        self.processes = max(self.processes, sample["processes"])


@dataclass
class Checkpoint:
    at_s: float
    since_start: Peaks
    window: Peaks
    parent_hwm_kb: int
    samples: int


@dataclass
class Sampler:
    root: int
    checkpoints_s: list[float]
    start: float = field(default_factory=time.monotonic)
    overall: Peaks = field(default_factory=Peaks)
    window: Peaks = field(default_factory=Peaks)
    after_run: Peaks = field(default_factory=Peaks)
    done: list[Checkpoint] = field(default_factory=list)
    parent_hwm_kb: int = 0
    samples: int = 0
    workers_seen: bool = False

    def sample(self) -> None:
        sample = tree_memory(self.root)
        if sample is None:
            return
        self.samples += 1
        # the workers are forked processes: once they are gone, the parent merges and stores
        self.workers_seen = self.workers_seen or sample["processes"] > 1
        running = not (self.workers_seen and sample["processes"] == 1)
        self.parent_hwm_kb = max(self.parent_hwm_kb, sample["parent_hwm_kb"])
        self.overall.update(sample)
        if running:
            self.window.update(sample)
        else:
            self.after_run.update(sample)
        elapsed = time.monotonic() - self.start
        while self.checkpoints_s and elapsed >= self.checkpoints_s[0]:
            at = self.checkpoints_s.pop(0)
            self.done.append(Checkpoint(at, Peaks(**vars(self.overall)), self.window,
                                        self.parent_hwm_kb, self.samples))
            self.window = Peaks()


def children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def status_kb(pid: int) -> dict[str, int]:
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    except OSError:
        pass
    return values


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_memory(root: int) -> dict[str, int] | None:
    """Memory of `root` (the stallbench parent) and all its descendants, in KiB."""
    children = children_map()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    parent = status_kb(root)
    if not parent:
        return None
    rss = [status_kb(pid).get("VmRSS", 0) for pid in pids]
    return {
        "processes": len(pids),
        "tree_rss_kb": sum(rss),
        "tree_pss_kb": sum(pss_kb(pid) for pid in pids),
        "parent_rss_kb": parent.get("VmRSS", 0),
        "parent_hwm_kb": parent.get("VmHWM", 0),
        "worker_rss_kb": max(rss[1:], default=0),
    }


def recorded_vs_counted(run_dir: Path) -> dict[str, dict[str, int]]:
    """Rows per op in ops.parquet (counted by pyarrow, independently of run.json) vs the
    workers' own counters."""
    meta = json.loads((run_dir / "run.json").read_text())
    column = pq.read_table(run_dir / "ops.parquet", columns=["op"]).column("op")
    counts = pc.value_counts(column.cast("string")).to_pylist()
    recorded = {item["values"]: item["counts"] for item in counts}
    ops = sorted(set(recorded) | set(meta.get("counted") or {}))
    return {op: {"recorded": int(recorded.get(op, 0)),
                 "counted": int((meta.get("counted") or {}).get(op, 0))} for op in ops}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="30m")
    parser.add_argument("--checkpoints", default="1m,10m,30m",
                        help="times after the start at which to report peaks")
    parser.add_argument("--data-size", default="1G")
    parser.add_argument("--readers", default="4")
    parser.add_argument("--monitors", default="default", help="monitors of the run (default)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--results", type=Path, help="results directory (default: a temp dir)")
    parser.add_argument("--output", type=Path, help="write the measurements as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    args = parser.parse_args()
    duration_s = parse_duration(args.duration, "--duration")
    checkpoints = sorted(parse_duration(c, "--checkpoints") for c in args.checkpoints.split(","))
    tmp = None
    if args.results is None:
        tmp = tempfile.mkdtemp(prefix="stallbench-soak-", dir="/var/tmp")
        args.results = Path(tmp)
    cmd = [sys.executable, "-m", "stallbench", "run", "pgioperf", "--variant", "soak",
           "--results", str(args.results), "--no-progress", "--duration", args.duration,
           "--data-size", args.data_size, "--readers", args.readers, "--monitors", args.monitors]
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    log = open(args.results / "soak.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    sampler = Sampler(process.pid, [c for c in checkpoints if c <= duration_s + 1])
    started = time.monotonic()
    printed = 0
    while process.poll() is None:
        sampler.sample()
        for cp in sampler.done[printed:]:
            print(f"{cp.at_s / 60:5.1f} min: tree RSS peak {cp.since_start.tree_rss_kb} KiB, "
                  f"PSS peak {cp.since_start.tree_pss_kb} KiB, parent HWM {cp.parent_hwm_kb} "
                  f"KiB", file=sys.stderr, flush=True)
        printed = len(sampler.done)
        time.sleep(args.interval)
    log.close()
    total_s = time.monotonic() - started
    run_dir = args.results / "soak" / "pgioperf" / "1"
    meta = json.loads((run_dir / "run.json").read_text())
    counts = recorded_vs_counted(run_dir)
    lost = {op: c for op, c in counts.items() if c["recorded"] != c["counted"]}
    report = {
        "command": " ".join(cmd),
        "exit_code": process.returncode,
        "status": meta.get("status"),
        "reason": meta.get("reason"),
        "duration_s": meta.get("duration_s"),
        "wall_s": round(total_s, 1),
        "ops_per_op": counts,
        "ops_total": sum(c["recorded"] for c in counts.values()),
        "mismatches": lost,
        "checkpoints": [{"at_min": cp.at_s / 60, "since_start": vars(cp.since_start),
                         "window": vars(cp.window), "parent_hwm_kb": cp.parent_hwm_kb}
                        for cp in sampler.done],
        "after_run_peaks": vars(sampler.after_run),
        "overall_peaks": vars(sampler.overall),
        "parent_hwm_kb": sampler.parent_hwm_kb,
        "ops_parquet_bytes": (run_dir / "ops.parquet").stat().st_size,
        "monitors": {k: v.get("status") for k, v in (meta.get("monitors") or {}).items()},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    if tmp and not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if process.returncode == 0 and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
