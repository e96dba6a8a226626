"""Moderate steps in histories of single runs (issue 45): A/A histories and steps of +10% and +25%
at p50, with 1 and with 3 runs a point, read by `stallbench series`.

    PYTHONPATH=src .venv/bin/python benchmarks/series_moderate.py record --data DIR \
        [--histories 20] [--runs 1,3]
    PYTHONPATH=src .venv/bin/python benchmarks/series_moderate.py evaluate --data DIR [--json F]

record: each history is its own plan and results directory (DIR/r{RUNS}-{N}), recorded with
`stallbench run --plan` as a user would (interleaved rounds, each in a random order): POINTS
variants of randread (a 128 MiB file in 128 KiB records, kept in the page cache, 2 s, no
--warmup: the start-up transient is found), RUNS runs each, whose only difference is a setting
that cannot matter to it: vm.dirty_expire_centisecs (randread writes nothing), 3000 + the
point's index. The data file is made first by a run that is thrown away.
evaluate: per recorded history three series, each through the code of `stallbench series`
(order as given; change points of read p50, p99 and rate):
  A/A       the history as recorded: a change point anywhere is a false alarm;
  +10%/+25% the same runs with every latency of the points from the knee on (3 + N % 5)
            multiplied by 1.10 / 1.25 (copies of the real runs, their run.json kept, so the
            true step is exactly the factor at every quantile, the rate unchanged): found when
            a p50 or p99 change point is within one point of the knee, and a change point
            further away is a false alarm.
Each run's machine_load.others_cpus is reported (near 0: a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

POINTS = 10
FACTORS = (1.10, 1.25)
PLAN_HEAD = """workload = "randread"
duration = "2s"
iterations = {runs}
monitors = []
results = "{results}"
[workload_options]
file_size = "128M"
record_size = "128K"
"""
VARIANT = ('[[variants]]\nname = "p{i:02d}"\ndir = "{work}"\ndrop_caches = false\n'
           'sysctls = ["vm.dirty_expire_centisecs={value}"]\n')


def record(data: Path, histories: int, runs: list[int]) -> None:
    data.mkdir(parents=True, exist_ok=True)
    work = data / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    if not (work / "randread.data").exists():
        # the data file first, by a run thrown away: the run that writes it reads it twice as
        # fast as any later one (p50 13 µs against 24-28 µs), a point of its own in a history
        subprocess.run([sys.executable, "-m", "stallbench", "-q", "run", "randread",
                        "--file-size", "128M", "--record-size", "128K", "--duration", "1",
                        "--monitors", "none", "--no-drop-caches", "--dir", str(work),
                        "--results", str(data / "made")], env=env, capture_output=True)
    for n in range(histories):
        for k in runs:
            name = f"r{k}-{n + 1}"
            results = data / name
            if (data / f"{name}.log").exists():
                print(f"{name}: already recorded", flush=True)
                continue
            plan = data / f"{name}.toml"
            plan.write_text(PLAN_HEAD.format(runs=k, results=results) + "".join(
                VARIANT.format(i=i, work=work, value=3000 + i) for i in range(POINTS)))
            proc = subprocess.run([sys.executable, "-m", "stallbench", "-q", "run", "--plan",
                                   str(plan)], env=env, capture_output=True, text=True)
            (data / f"{name}.log").write_text(proc.stdout + proc.stderr)
            print(f"{name}: exit {proc.returncode}", flush=True)


def scaled_history(results: Path, target: Path, knee: int, factor: float) -> None:
    """A copy of a recorded history whose points from `knee` on have every latency x factor
    (run.json kept, summary rebuilt); the points before are links to the real runs."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if target.exists():
        return
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for variant in sorted(p for p in results.iterdir() if p.name.startswith("p")):
        if int(variant.name[1:]) < knee:
            (partial / variant.name).symlink_to(variant.resolve())
            continue
        for run_json in variant.glob("*/*/run.json"):
            run = run_json.parent
            copy = partial / run.relative_to(results)
            copy.mkdir(parents=True)
            shutil.copy2(run_json, copy / "run.json")
            table = pq.read_table(run / "ops.parquet")
            latency = table.column("latency_ns").to_numpy().astype(np.float64) * factor
            table = table.set_column(table.schema.get_field_index("latency_ns"), "latency_ns",
                                     pa.array(np.rint(latency).astype(np.int64)))
            pq.write_table(table, copy / "ops.parquet")
    partial.rename(target)


def evaluate(data: Path, out: Path | None) -> None:
    from stallbench.compare.series import SeriesOptions, build_series
    from stallbench.results.runselect import resolve_runs

    rows = []
    for log in sorted(data.glob("r*-*.log"), key=lambda p: (p.stem.split("-")[0],
                                                            int(p.stem.split("-")[1]))):
        name = log.stem
        runs, n = int(name.split("-")[0][1:]), int(name.split("-")[1])
        knee = 3 + (n - 1) % 5
        results = data / name
        if not results.is_dir():
            continue
        for factor in (None, *FACTORS):
            where = results
            if factor is not None:
                where = data / "scaled" / f"{name}-x{factor:g}"
                scaled_history(results, where, knee, factor)
            variants = sorted(p.name for p in where.iterdir() if p.name.startswith("p"))
            series = build_series([resolve_runs(v, where) for v in variants],
                                  SeriesOptions(results=where))
            called = [(c.metric, c.index) for c in series.change_points
                      if c.verdict != "unclear"]
            unclear = [(c.metric, c.index, c.change.note) for c in series.change_points
                       if c.verdict == "unclear"]
            found = factor is not None and any(
                abs(i - knee) <= 1 and m.split(":")[1] in ("p50", "p99") for m, i in called)
            elsewhere = [f"{m}@{i}" for m, i in called if factor is None or abs(i - knee) > 1]
            others = [(r.meta.machine_load or {}).get("others_cpus") or 0.0
                      for point in series.points for r in point.runs]
            rows.append({"history": name, "runs": runs, "step": factor, "knee": knee,
                         "change_points": [f"{m}@{i}" for m, i in called], "found": found,
                         "elsewhere": elsewhere,
                         "unclear": [f"{m}@{i} ({note})" for m, i, note in unclear],
                         "others_cpus_mean": sum(others) / len(others),
                         "others_cpus_max": max(others)})
            r = rows[-1]
            print(f"{name:7} {'A/A' if factor is None else f'x{factor:g}':6} knee {knee}  "
                  f"change points: {', '.join(r['change_points']) or 'none'}"
                  + (f"; unclear {', '.join(r['unclear'])}" if r["unclear"] else "")
                  + f"  others_cpus mean {r['others_cpus_mean']:.2f} max "
                  f"{r['others_cpus_max']:.2f}", flush=True)
    print()
    for runs in sorted({r["runs"] for r in rows}):
        mine = [r for r in rows if r["runs"] == runs]
        aa = [r for r in mine if r["step"] is None]
        print(f"{runs} run(s) a point: A/A histories with a change point "
              f"{sum(bool(r['change_points']) for r in aa)} of {len(aa)}")
        for factor in FACTORS:
            steps = [r for r in mine if r["step"] == factor]
            print(f"  x{factor:g}: found at the knee (+-1) {sum(r['found'] for r in steps)} of "
                  f"{len(steps)}; a change point elsewhere in "
                  f"{sum(bool(r['elsewhere']) for r in steps)} of {len(steps)}")
    if out is not None:
        out.write_text(json.dumps(rows, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record", help="record the histories")
    rec.add_argument("--data", type=Path, required=True)
    rec.add_argument("--histories", type=int, default=20, help="histories per runs a point")
    rec.add_argument("--runs", default="1,3", help="runs a point, comma-separated")
    ev = sub.add_parser("evaluate", help="their change points")
    ev.add_argument("--data", type=Path, required=True)
    ev.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.what == "record":
        record(args.data, args.histories, [int(k) for k in args.runs.split(",")])
    else:
        evaluate(args.data, args.json)


if __name__ == "__main__":
    main()
