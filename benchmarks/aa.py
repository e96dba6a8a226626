"""A/A calibration and power of stallbench's verdicts, on real runs of this machine.

    .venv/bin/python benchmarks/aa.py [--data DIR] [--runs 10] [--seconds 6] [--sets ...]
                                      [--skip-record] [--json FILE]

1. Record: for each set, RUNS separate real runs of one configuration (`stallbench run`, as a
   user would, one process per run; one set after the other, since a set that drops the page
   cache would empty the cached set's file; the cached set starts with one discarded run that
   reads its file in):
     randread-cached   randread, 256 MiB file kept in the page cache (--no-drop-caches)
     randread-cold     randread, 256 MiB file, page cache dropped before each run (the default)
     pgioperf          pgioperf, 2 readers of a 512 MiB file
     pgioperf-memcg    pgioperf, 2 readers, in a 96 MiB memory cgroup that binds (root)
2. A/A: every comparison of disjoint groups of 1, 2 and 3 of those runs (all pairs for 1; up to
   SPLITS random disjoint splits for 2 and 3) through the same code as `stallbench compare`;
   per statistic the share of rows called better/worse, the share of comparisons with any call,
   and `stallbench check` (read:p50, read:p99, read:p999 or the set's ops, bound 10%) exit 1.
3. Power: candidates made from *other* real runs of the set with a known change — every latency
   x(1+d) ("whole", true change d at every quantile), or only the ops above the run's p98
   ("tail", true change d at p99) — for d = 5, 10, 25, 100% and 1, 3, 5 runs per variant:
   detection rate (called worse) and coverage of the true change by the 95% interval.
4. Real changes with one run each: cached vs O_DIRECT randread, pgioperf without and with a
   binding memory cgroup, pgioperf with 2 vs 8 readers.

Targets (issue "honest verdicts"): A/A <= 5% of rows, <= 1 comparison in 10 with any call,
check never exits 1; the real changes found with one run each.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stallbench.analysis.quantiles import LATENCY_STATS
from stallbench.compare.comparison import build_comparison
from stallbench.compare.gate import gate, gate_exit_code, gate_options
from stallbench.compare.metrics import parse_metric
from stallbench.compare.model import CompareOptions
from stallbench.compare.verdicts import MACHINE_BUSIER
from stallbench.results import store
from stallbench.results.rundirs import OPS_FILE
from stallbench.results.runmeta import Status
from stallbench.results.runselect import Resolved
from stallbench.results.store import load_run

SETS = {
    "randread-cached": ["randread", "--file-size", "256M", "--no-drop-caches"],
    "randread-cold": ["randread", "--file-size", "256M"],
    "pgioperf": ["pgioperf", "--readers", "2", "--data-size", "512M"],
    "pgioperf-memcg": ["pgioperf", "--readers", "2", "--memory", "96M"],
}
REAL_CHANGES = {
    "cached-vs-direct": (["randread", "--file-size", "256M", "--no-drop-caches"],
                         ["randread", "--file-size", "256M", "--no-drop-caches", "--direct"],
                         "read", "p50"),
    "memcg-binding": (["pgioperf", "--readers", "2", "--data-size", "384M"],
                      ["pgioperf", "--readers", "2", "--data-size", "384M", "--memory", "96M"],
                      "read", "p50"),
    "2-vs-8-readers": (["pgioperf", "--readers", "2", "--data-size", "512M"],
                       ["pgioperf", "--readers", "8", "--data-size", "512M"],
                       "read", "p50"),
}
CHECK_METRICS = {"randread": ["read:p50", "read:p99", "read:p999"],
                 "pgioperf": ["read:p50", "read:p99", "commit:p99"]}
SPLITS = 20
DELTAS = (0.05, 0.10, 0.25, 1.00)
POWER_RUNS = (1, 3, 5)
ROW_STATS = ("rate", *LATENCY_STATS)


def stallbench(*args: str) -> None:
    cmd = [sys.executable, "-m", "stallbench", *args]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} -> {result.returncode}\n{result.stderr[-2000:]}")


def record(data: Path, sets: list[str], runs: int, seconds: float) -> None:
    for name in sets:
        variant_dir = data / name
        have = len(list(variant_dir.glob("*/*/run.json"))) if variant_dir.exists() else 0
        if have < runs and "--no-drop-caches" in SETS[name]:
            stallbench("run", SETS[name][0], "--variant", f"{name}-warming", "--results",
                       str(data), "--duration", "2s", "--monitors", "none", "--no-progress",
                       *SETS[name][1:])
        for i in range(have, runs):
            started = time.time()
            stallbench("run", *SETS[name][:1], "--variant", name, "--results", str(data),
                       "--duration", f"{seconds}s", "--monitors", "none", "--no-progress",
                       *SETS[name][1:])
            print(f"  recorded {name} run {i + 1} ({time.time() - started:.0f} s)", flush=True)


def runs_of(data: Path, name: str) -> list[store.Run]:
    runs = [load_run(p) for p in sorted((data / name).glob("*/*"), key=lambda p: int(p.name))
            if (p / "run.json").exists()]
    return [r for r in runs if r.complete]


def compare(base: list[store.Run], cand: list[store.Run], label_b="A", label_c="B"):
    options = CompareOptions(explain=False)
    return build_comparison(Resolved(label_b, base, []), [Resolved(label_c, cand, [])], options)


def splits(n: int, k: int, rng: np.random.Generator) -> list[tuple[tuple[int, ...], ...]]:
    if k == 1:
        return [((a,), (b,)) for a, b in itertools.combinations(range(n), 2)]
    found = set()
    for _ in range(SPLITS * 20):
        order = rng.permutation(n)
        a, b = tuple(sorted(order[:k])), tuple(sorted(order[k:2 * k]))
        found.add((min(a, b), max(a, b)))
        if len(found) >= SPLITS:
            break
    return sorted(found)


def aa(runs: list[store.Run], workload: str, rng: np.random.Generator) -> dict:
    out = {}
    for k in (1, 2, 3):
        if len(runs) < 2 * k:
            continue
        rows = {s: [0, 0] for s in ROW_STATS}   # stat -> [called, with interval]
        any_call = comparisons = check_fail = check_ok = busier = held_only = 0
        for a, b in splits(len(runs), k, rng):
            comparison = compare([runs[i] for i in a], [runs[i] for i in b])
            comparisons += 1
            called = held = False
            for op in comparison.ops:
                for stat, change in op.changes["B"].items():
                    if stat not in rows or change.low is None:
                        continue
                    rows[stat][1] += 1
                    if change.verdict in ("better", "worse"):
                        rows[stat][0] += 1
                        called = True
                    held |= change.note == MACHINE_BUSIER
            any_call += called
            busier += any("MACHINE BUSIER" in note for note in comparison.notes)
            held_only += held and not called    # a call only the machine-busier rule withheld
            metrics = [parse_metric(m) for m in CHECK_METRICS[workload]]
            gated = build_comparison(Resolved("A", [runs[i] for i in a], []),
                                     [Resolved("B", [runs[i] for i in b], [])],
                                     gate_options(metrics))
            code = gate_exit_code(gate(gated, metrics, 0.10))
            check_fail += code == 1
            check_ok += code == 0
        total_called = sum(c for c, _ in rows.values())
        total_rows = sum(n for _, n in rows.values())
        out[k] = {"comparisons": comparisons, "rows": total_rows, "called": total_called,
                  "row_rate": total_called / total_rows if total_rows else None,
                  "any_call_rate": any_call / comparisons, "check_exit_1": check_fail,
                  "check_exit_0": check_ok, "machine_busier": busier,
                  "any_call_rate_without_busier_rule": (any_call + held_only) / comparisons,
                  "per_stat": {s: (c / n if n else None) for s, (c, n) in rows.items()}}
    return out


_COPIES: dict[tuple[str, float, str], store.Run] = {}


def scaled_copy(run: store.Run, target: Path, delta: float, mode: str) -> store.Run:
    """A copy of a real run with its latencies changed by a known factor (made once)."""
    key = (str(run.path), delta, mode)
    if key not in _COPIES:
        _COPIES[key] = _scaled_copy(run, target, delta, mode)
    return _COPIES[key]


def _scaled_copy(run: store.Run, target: Path, delta: float, mode: str) -> store.Run:
    table = pq.read_table(run.path / OPS_FILE)
    latency = table.column("latency_ns").to_numpy().astype(np.float64)
    if mode == "whole":
        latency = latency * (1 + delta)
    else:
        ops = table.column("op").cast("string").to_numpy(zero_copy_only=False)
        scaled = latency.copy()
        for name in np.unique(ops):
            mine = ops == name
            threshold = np.quantile(latency[mine], 0.98)
            scaled[mine & (latency >= threshold)] *= 1 + delta
        latency = scaled
    table = table.set_column(table.schema.get_field_index("latency_ns"), "latency_ns",
                             pa.array(np.rint(latency).astype(np.int64)))
    writer = store.RunWriter(target, f"{run.variant}-{mode}{delta:g}", run.workload,
                             run.meta.params)
    for key in ("ops_declared", "duration_s", "duration_planned_s", "warmup_s", "rusage",
                "machine_load", "duet"):
        setattr(writer.meta, key, getattr(run.meta, key))
    writer.meta.samples = writer.write_ops([table])
    writer.finalize(Status.COMPLETE)
    return load_run(writer.path)


def power(runs: list[store.Run], target: Path, rng: np.random.Generator,
          trials_per_cell: int = 8) -> dict:
    out: dict = {}
    for k in POWER_RUNS:
        if len(runs) < 2 * k:
            continue
        trials = splits(len(runs), k, rng)[:trials_per_cell]
        for mode, stat in (("whole", "p50"), ("tail", "p99")):
            for delta in DELTAS:
                detected = covered = 0
                for a, b in trials:
                    cand = [scaled_copy(runs[i], target, delta, mode) for i in b]
                    change = compare([runs[i] for i in a], cand).ops[0].changes["B"][stat]
                    detected += change.verdict == "worse"
                    covered += change.low is not None and change.low <= delta <= change.high
                out[f"{mode} {stat} +{delta:.0%} k={k}"] = {
                    "trials": len(trials), "detected": detected / len(trials),
                    "coverage": covered / len(trials)}
    return out


def real_changes(data: Path, seconds: float) -> dict:
    out = {}
    for name, (base_args, cand_args, op, stat) in REAL_CHANGES.items():
        results = data / "real" / name
        for variant, args in (("base", base_args), ("cand", cand_args)):
            if not (results / variant).exists():
                stallbench("run", args[0], "--variant", variant, "--results", str(results),
                           "--duration", f"{seconds}s", "--monitors", "none", "--no-progress",
                           *args[1:])
        base, cand = runs_of(results, "base"), runs_of(results, "cand")
        comparison = compare(base, cand, "base", "cand")
        found = next(o for o in comparison.ops if o.op == op)
        out[name] = {f"{op} {s}": {"change": found.changes["cand"][s].change,
                                   "low": found.changes["cand"][s].low,
                                   "high": found.changes["cand"][s].high,
                                   "verdict": found.changes["cand"][s].verdict}
                     for s in (stat, "rate")}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("/var/tmp/stallbench-aa"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--skip-record", action="store_true")
    parser.add_argument("--no-power", action="store_true")
    parser.add_argument("--no-aa", action="store_true", help="only power and real changes")
    parser.add_argument("--trials", type=int, default=8, help="power trials per cell")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    if os.geteuid() != 0:
        sets = [s for s in sets if s != "pgioperf-memcg"]
    args.data.mkdir(parents=True, exist_ok=True)
    if not args.skip_record:
        record(args.data, sets, args.runs, args.seconds)
    rng = np.random.default_rng(7)
    report: dict = {"aa": {}, "power": {}, "real": {}}
    print("\nA/A: share of rows called better/worse, comparisons with any call, check exit 1")
    print(f"{'set':<16} {'runs':>4} {'comparisons':>11} {'rows called':>12} {'any call':>9} "
          f"{'check=1':>8} {'check=0':>8} {'busier':>7} {'any call w/o busier rule':>25}")
    for name in ([] if args.no_aa else sets):
        runs = runs_of(args.data, name)
        result = aa(runs, SETS[name][0], rng)
        report["aa"][name] = result
        for k, r in result.items():
            print(f"{name:<16} {k:>4} {r['comparisons']:>11} "
                  f"{r['called']:>4}/{r['rows']:<4} {r['row_rate']:>5.1%} "
                  f"{r['any_call_rate']:>8.0%} {r['check_exit_1']:>8} {r['check_exit_0']:>8} "
                  f"{r['machine_busier']:>7} {r['any_call_rate_without_busier_rule']:>25.0%}")
    if not args.no_power:
        print("\npower: injected change into other real runs (detected = called worse)")
        for name in ("randread-cached", "pgioperf"):
            if name not in sets:
                continue
            result = power(runs_of(args.data, name), args.data / "power" / name, rng,
                           args.trials)
            report["power"][name] = result
            for key, r in result.items():
                print(f"{name:<16} {key:<24} detected {r['detected']:>5.0%}  "
                      f"coverage {r['coverage']:>5.0%}  ({r['trials']} trials)")
        print("\nreal changes, one run each")
        report["real"] = real_changes(args.data, args.seconds)
        for name, rows in report["real"].items():
            for key, r in rows.items():
                print(f"{name:<16} {key:<12} {r['change']:+8.1%} [{r['low']:+.1%}, "
                      f"{r['high']:+.1%}] {r['verdict']}" if r["low"] is not None else
                      f"{name:<16} {key:<12} {r['change']:+8.1%} {r['verdict']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
